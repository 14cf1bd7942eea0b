import Foundation
import Synchronization
import Testing

@testable import StorageServer

@Suite(.timeLimit(.minutes(3)))
struct StorageServerLifecycleTests {
    @Test func startReturnsALoopbackBaseURLWithTrailingSlashAndStopClearsIt() async throws {
        try await withTemporaryDirectory { directory in
            let fixture = try Fixture(directory: directory)
            try fixture.write("a.txt", "a")
            let server = StorageServer(root: fixture.root)
            #expect(server.baseURL == nil)
            let url = try await server.start()
            #expect(url.absoluteString.hasPrefix("http://127.0.0.1:"))
            #expect(url.absoluteString.hasSuffix("/"))
            #expect(url.port != nil && url.port != 0)
            #expect(server.baseURL == url)
            #expect(server.url(for: "/") == url)
            #expect(server.url(for: "x y.txt").absoluteString == url.absoluteString + "x%20y.txt")
            #expect(try await curl(server.url(for: "a.txt"), in: fixture.scratch).status == 200)

            await server.stop()
            #expect(server.baseURL == nil)
            let refused = try await curl(url.appendingPathComponent("a.txt"), in: fixture.scratch)
            #expect(refused.exitCode == 7)
            await server.stop()
        }
    }

    @Test func startFailsAtOnceWhenThePortIsTaken() async throws {
        try await withServedFixture { first, fixture in
            let port = try #require(first.baseURL?.port)
            let second = StorageServer(root: fixture.root, configuration: .init(port: UInt16(port)))
            let error = await #expect(throws: StorageServerError.self) { try await second.start() }
            #expect(error?.code == .listenFailed)
            #expect(second.baseURL == nil)
            // The first server is unharmed.
            try fixture.write("a.txt", "still here")
            #expect(try await curl(first.url(for: "a.txt"), in: fixture.scratch).status == 200)
        }
    }

    @Test func startFailsForAMissingRoot() async throws {
        try await withTemporaryDirectory { directory in
            let server = StorageServer(root: directory.appendingPathComponent("nope"))
            let error = await #expect(throws: StorageServerError.self) { try await server.start() }
            #expect(error?.code == .rootNotFound)
            #expect(error?.message.contains("nope") == true)
        }
    }

    @Test func startTwiceFailsUntilStopped() async throws {
        try await withServedFixture { server, _ in
            let error = await #expect(throws: StorageServerError.self) { try await server.start() }
            #expect(error?.code == .alreadyStarted)
        }
    }

    @Test func stopClosesAStalledConnectionPromptly() async throws {
        try await withTemporaryDirectory { directory in
            let fixture = try Fixture(directory: directory)
            try fixture.write("a.bin", randomBytes(5000))
            let server = StorageServer(root: fixture.root)
            _ = try await server.start()
            server.injectFault(.stall, forPath: "/a.bin")
            async let stalled = curl(server.url(for: "a.bin"), ["--max-time", "40"], in: fixture.scratch)
            try await waitUntil { server.requests().count == 1 }
            await server.stop()
            let result = try await stalled
            #expect(result.exitCode == 18)
            #expect(result.body.count == 100)
        }
    }

    @Test func runServesUntilItsTaskIsCancelled() async throws {
        try await withTemporaryDirectory { directory in
            let fixture = try Fixture(directory: directory)
            try fixture.write("a.txt", "served")
            let server = StorageServer(root: fixture.root)
            let announced = AnnouncedURL()
            let ended = Mutex(false)
            let running = Task {
                defer { ended.withLock { $0 = true } }
                try await server.run { url in announced.set(url) }
            }
            // A run that ends before it announces (say, it could not listen) stops the wait and
            // shows its error below, instead of waiting out the hang detector.
            try await waitUntil { announced.get() != nil || ended.withLock { $0 } }
            guard let url = announced.get() else {
                _ = try await running.value
                Issue.record("run() ended without announcing a URL")
                return
            }
            let result = try await curl(url.appendingPathComponent("a.txt"), in: fixture.scratch)
            #expect(result.body == Data("served".utf8))

            running.cancel()
            try await running.value
            #expect(server.baseURL == nil)
        }
    }

    @Test func serverCanBeRestartedAfterStop() async throws {
        try await withTemporaryDirectory { directory in
            let fixture = try Fixture(directory: directory)
            try fixture.write("a.txt", "again")
            let server = StorageServer(root: fixture.root)
            _ = try await server.start()
            await server.stop()
            _ = try await server.start()
            let result = try await curl(server.url(for: "a.txt"), in: fixture.scratch)
            #expect(result.body == Data("again".utf8))
            await server.stop()
        }
    }
}

/// The URL `run(onListening:)` announced, shared with the test task.
private final class AnnouncedURL: Sendable {
    private let url = Mutex<URL?>(nil)
    func set(_ value: URL) { url.withLock { $0 = value } }
    func get() -> URL? { url.withLock { $0 } }
}
