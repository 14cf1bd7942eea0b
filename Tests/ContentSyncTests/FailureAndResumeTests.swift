import Foundation
import StorageServer
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

@Suite("Failures leave version N intact, and interrupted updates resume", .timeLimit(.minutes(3)))
struct FailureAndResumeTests {
    /// 1.2 → 1.4 downloads several files; with one download at a time they come in path order.
    static let failingPath = "/RXCacheContent/data/blob.bin"

    /// Every download the failed run had started (those handed to the transport with the one
    /// that failed included) runs to its end and is kept, at any concurrency.
    @Test(arguments: [1, 4])
    func aMissingFileInTheMiddleLeavesTheOldVersionAndTheNextRunFinishesWithoutRefetching(concurrency: Int)
        async throws
    {
        try await withSyncHarness(serving: "1.2") { harness in
            try await harness.sync()
            harness.serve("1.4")
            harness.server.injectFault(.status(404), forPath: Self.failingPath)
            harness.server.resetLog()
            await #expect {
                try await harness.sync(concurrency: concurrency)
            } throws: { error in
                let error = error as! SyncError
                return error.code == .network && error.message.contains("blob.bin") && error.message.contains("404")
            }
            try harness.expectTree(is: "1.2")
            let firstRun = Set(harness.contentDownloads())
            #expect(!firstRun.isEmpty, "something was downloaded before the failure")
            let status = try await SyncStatus.read(statePath: harness.state, contentDirectory: harness.content)
            #expect(status.version == "1.2")
            #expect(status.state == .failed)
            #expect(status.lastError?.contains("blob.bin") == true)
            #expect(status.pendingVersion == "1.4")
            #expect(status.lastErrorCode == .network)
            // A new manager (a restarted app) reads the same error back, with its code.
            let lastError = await (try harness.manager()).lastError()
            #expect(lastError?.code == .network)
            #expect(lastError?.message.contains("blob.bin") == true)

            harness.server.clearFaults()
            harness.server.resetLog()
            let report = try await harness.sync(concurrency: concurrency)
            try harness.expectTree(is: "1.4")
            let secondRun = Set(harness.contentDownloads())
            #expect(
                secondRun.isDisjoint(with: firstRun),
                "files finished before the failure were fetched again: \(secondRun.intersection(firstRun))")
            #expect(report.filesAlreadyDownloaded == firstRun.count)
            #expect(secondRun.contains("data/blob.bin"))
        }
    }

    @Test func badJSONFailsClearlyAndKeepsTheOldVersion() async throws {
        try await withTemporaryDirectory { scratch in
            let broken = try copySnapshot("1.4", to: scratch + "/broken")
            try await withSyncHarness(serving: "1.2") { harness in
                try await harness.sync()
                try "{\"actualCacheVersion\": \"1.4\", ".write(
                    toFile: broken.path + "/RXCacheConfig/cacheStatus.json", atomically: true, encoding: .utf8)
                harness.server.setRoot(broken)
                await #expect {
                    try await harness.sync()
                } throws: { error in
                    let error = error as! SyncError
                    return error.code == .invalidStatus && error.message.contains("cacheStatus.json")
                        && error.message.contains("valid JSON")
                }
                try harness.expectTree(is: "1.2")
                let manager = try harness.manager()
                #expect(try await manager.localVersion()?.text == "1.2")
            }
        }
    }

    @Test func aMalformedChangeListFailsWithItsNameAndKeepsTheOldVersion() async throws {
        try await withTemporaryDirectory { scratch in
            let broken = try copySnapshot("1.4", to: scratch + "/broken")
            try await withSyncHarness(serving: "1.2") { harness in
                try await harness.sync()
                try rewrite(broken.path + "/RXCacheConfig/HistoryOfVersions/changes_1.3_1.4.json") {
                    String($0.prefix(40))
                }
                // A publisher's mistake, not tampering: the hashes describe the broken list.
                try StorageEditing.reseal(broken.path)
                harness.server.setRoot(broken)
                await #expect {
                    try await harness.sync()
                } throws: { error in
                    let error = error as! SyncError
                    return error.code == .invalidChangeList && error.message.contains("changes_1.3_1.4.json")
                }
                try harness.expectTree(is: "1.2")
            }
        }
    }

    @Test func suspendStopsTheNetworkAndResumeFinishesWithoutRefetching() async throws {
        try await withSyncHarness(serving: "1.2") { harness in
            try await harness.sync()
            let manager = try harness.manager(concurrency: 1)
            let update = try await harness.startUpdateThatStalls(to: "1.4", manager)
            // The stalled file sent headers but never finished: it does not count as done.
            let before = Set(harness.contentDownloads().filter { !$0.hasPrefix("styles/") })
            #expect(await manager.state == .working)
            await manager.suspend()
            #expect(await manager.state == .suspended)
            await #expect(throws: SyncError.self) { try await update.value }
            try harness.expectTree(is: "1.2")
            // No request starts after the suspension.
            let count = harness.server.requests().count
            try await Task.sleep(for: .milliseconds(700))
            #expect(harness.server.requests().count == count)

            harness.server.clearFaults()
            harness.server.resetLog()
            let report = try await manager.resume()
            #expect(report.toVersion.text == "1.4")
            try harness.expectTree(is: "1.4")
            let after = Set(harness.contentDownloads())
            #expect(after.isDisjoint(with: before), "refetched after resume: \(after.intersection(before))")
            #expect(after.contains { $0.hasPrefix("styles/") })
        }
    }

    @Test func aNewProcessContinuesAnInterruptedUpdateWithoutRefetchingFinishedFiles() async throws {
        try await withSyncHarness(serving: "1.2") { harness in
            try await harness.sync()
            // The first "process": its manager is dropped mid-update.
            do {
                let update = try await harness.startUpdateThatStalls(to: "1.4", try harness.manager(concurrency: 1))
                update.cancel()
                _ = try? await update.value
            }
            let before = Set(harness.contentDownloads().filter { !$0.hasPrefix("styles/") })
            #expect(!before.isEmpty)
            try harness.expectTree(is: "1.2")
            harness.server.clearFaults()
            harness.server.resetLog()
            let report = try await harness.sync(concurrency: 1)
            try harness.expectTree(is: "1.4")
            let after = Set(harness.contentDownloads())
            #expect(after.isDisjoint(with: before))
            #expect(report.filesAlreadyDownloaded == before.count)
        }
    }

    @Test func aDeniedConnectionPolicySuspendsAndAsksTheApp() async throws {
        try await withSyncHarness(serving: "1.2") { harness in
            try await harness.sync()
            let allowed = AllowFlag()
            var configuration = harness.configuration(concurrency: 1)
            configuration.connectionPolicy = ConnectionPolicy { allowed.value }
            let manager = try CacheManager(configuration: configuration)
            let events = await manager.events()
            let asked = Task {
                for await event in events { if case .connectionNotAllowed = event { return true } }
                return false
            }
            let update = try await harness.startUpdateThatStalls(to: "1.4", manager)
            allowed.value = false
            await #expect(throws: SyncError.self) { try await update.value }
            #expect(await asked.value)
            #expect(await manager.state == .suspended)
            try harness.expectTree(is: "1.2")
            harness.server.clearFaults()
            let report = try await manager.resume(overridingPolicy: true)
            #expect(report.toVersion.text == "1.4")
            try harness.expectTree(is: "1.4")
        }
    }

    @Test func aSecondUpdateOfTheSameFolderIsRefusedWhileOneRuns() async throws {
        try await withSyncHarness(serving: "1.2") { harness in
            try await harness.sync()
            let first = try harness.manager(concurrency: 1)
            let update = try await harness.startUpdateThatStalls(to: "1.4", first)
            await #expect {
                try await harness.sync()
            } throws: { error in
                (error as? SyncError)?.code == .busy && "\(error)".contains("another update of")
                    && "\(error)".contains(harness.state)
            }
            await first.suspend()
            _ = try? await update.value
            harness.server.clearFaults()
            try await harness.sync()
            try harness.expectTree(is: "1.4")
        }
    }

    @Test func aFolderWithUnknownContentIsNotReplacedUnlessAllowed() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try FileManager.default.createDirectory(atPath: harness.content, withIntermediateDirectories: true)
            try "precious".write(toFile: harness.content + "/mine.txt", atomically: true, encoding: .utf8)
            await #expect {
                try await harness.sync()
            } throws: { error in
                (error as! SyncError).code == .configuration && "\(error)".contains("not empty")
            }
            #expect(try String(contentsOfFile: harness.content + "/mine.txt", encoding: .utf8) == "precious")
            var configuration = harness.configuration()
            configuration.allowReplacingUnknownContent = true
            try await CacheManager(configuration: configuration).checkForUpdates()
            try harness.expectTree(is: "1.0")
        }
    }

    @Test func aCrashAfterTheSwapIsFinishedOnTheNextRun() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            harness.serve("1.1")
            // Stage 1.1 by hand the way the engine does, then "crash" right after the swap.
            let store = try StateStore(path: harness.state)
            let staging = StagingArea(contentDirectory: harness.content)
            try staging.resetNext(includingDownloads: true)
            let scratch = harness.root + "/v11"
            try FileManager.default.copyItem(
                atPath: ExampleStorageFixture.snapshot("1.1").path + "/RXCacheContent", toPath: scratch)
            try FileManager.default.removeItem(atPath: staging.next)
            try FileManager.default.moveItem(atPath: scratch, toPath: staging.next)
            for folder in ExampleStorageFixture.manifest("1.1").folders {
                try FileManager.default.createDirectory(
                    atPath: staging.next + "/" + folder, withIntermediateDirectories: true)
            }
            try await store.beginPlan(
                PendingPlanRecord(
                    identity: "test", kind: "replay", fromVersion: "1.0", toVersion: "1.1",
                    phase: .staging, createdAt: Date()))
            let identity = try #require(FileSystem.identity(of: staging.next))
            try await store.markSwitching(device: identity.device, inode: identity.inode)
            try staging.swapIn()
            #expect(try await store.syncState()?.localVersion == "1.0", "the crash happened before the bookkeeping")
            harness.server.resetLog()
            let report = try await harness.sync()
            #expect(report.outcome == .upToDate)
            #expect(harness.contentDownloads().isEmpty)
            try harness.expectTree(is: "1.1")
            #expect(try await store.syncState()?.localVersion == "1.1")
        }
    }
}

extension SyncHarness {
    /// Serves `version` with every file under styles/ stalling, starts `manager`'s update and
    /// returns once a stalled download has begun: the update is then mid-download. The request
    /// log is reset first, so it shows this update only.
    func startUpdateThatStalls(to version: String, _ manager: CacheManager) async throws -> Task<SyncReport, any Error>
    {
        serve(version)
        server.injectFault(.stall, where: { $0.contains("/styles/") })
        server.resetLog()
        let update = Task { try await manager.checkForUpdates() }
        try await waitUntil { server.requests().contains { $0.path.contains("/styles/") } }
        return update
    }
}

/// A flag the connection-policy closure reads.
final class AllowFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var stored = true
    var value: Bool {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

/// Polls `condition` every 20 ms for up to 3 minutes: a hang detector, like the suites' time
/// limits, never a speed check (a task may wait long for a thread on a loaded 2-core machine).
func waitUntil(_ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(180)
    while !condition() {
        guard ContinuousClock.now < deadline else {
            Issue.record("condition not met within 3 minutes")
            return
        }
        try await Task.sleep(for: .milliseconds(20))
    }
}
