import Foundation
import StorageServer
import Synchronization
import Testing

@testable import ContentSync

/// A flag the policy reads and the test flips.
final class Switch: Sendable {
    private let on = Atomic<Bool>(true)
    var isOn: Bool { on.load(ordering: .sequentiallyConsistent) }
    func turnOff() { on.store(false, ordering: .sequentiallyConsistent) }
}

/// The connection policy is asked before anything goes out, and a stop it causes is recorded
/// as what it was.
@Suite("The connection policy is asked first and its stops are recorded as such", .timeLimit(.minutes(3)))
struct ConnectionPolicyTests {
    @Test func aPolicyThatSaysNoFromTheStartSendsNotEvenTheStatusRequest() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            var configuration = harness.configuration()
            configuration.connectionPolicy = ConnectionPolicy { false }
            let manager = try CacheManager(configuration: configuration)
            let error = await #expect(throws: SyncError.self) { try await manager.checkForUpdates() }
            #expect(error?.code == .connectionNotAllowed)
            #expect(harness.server.requests().isEmpty, "requests: \(harness.server.requests().map(\.path))")
            let attempt = try #require(try await manager.history().first)
            #expect(attempt.outcome == .cancelled && attempt.errorCode == .connectionNotAllowed, "\(attempt)")
        }
    }

    @Test func aStopThePolicyCausesMidUpdateIsRecordedAsThePolicysNotACancellation() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            // The archive stalls, so the update is downloading when the policy turns false.
            harness.server.injectFault(.stall, where: { $0.hasSuffix(".zip") })
            let allowed = Switch()
            var configuration = harness.configuration()
            configuration.connectionPolicy = ConnectionPolicy { allowed.isOn }
            let manager = try CacheManager(configuration: configuration)
            let update = Task { try await manager.checkForUpdates() }
            while !harness.server.requests().contains(where: { $0.path.hasSuffix(".zip") }) {
                try await Task.sleep(for: .milliseconds(10))
            }
            allowed.turnOff()
            let result = await update.result
            guard case .failure(let error as SyncError) = result else {
                Issue.record("the update did not stop: \(result)")
                return
            }
            #expect(error.code == .connectionNotAllowed)
            let attempt = try #require(try await manager.history().first)
            #expect(attempt.outcome == .cancelled)
            #expect(attempt.errorCode == .connectionNotAllowed, "recorded \(String(describing: attempt.errorCode))")
            #expect(await manager.state == .suspended)
        }
    }
}
