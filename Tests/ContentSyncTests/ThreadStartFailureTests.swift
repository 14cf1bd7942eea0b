import Foundation
import StorageServer
import Testing
import ThreadKit

@testable import Archive
@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat
@testable import Transport

/// Under a task limit (systemd's `TasksMax`, a container's pids limit) no thread can be made.
/// Foundation's `Thread.start()` failed in silence there, and whoever waited for the work waited
/// for good. Each place that makes a thread now runs the work itself, with fewer helpers, or
/// fails naming the limit. `DetachedThread.simulatedFailure` refuses every thread this task
/// asks for, as `pthread_create` does at the limit (EAGAIN).
@Suite("No thread to be had: the work still ends", .timeLimit(.minutes(3)))
struct ThreadStartFailureTests {
    /// The name of the thread running this, as the kernel has it.
    static func threadName() -> String {
        ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "")
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func aRestoreThenAReplayCompleteWithoutThreads() async throws {
        try await withSyncHarness(serving: "1.1") { harness in
            // The transport's loops are made first: without them no transfer could run at all
            // (the next test). Everything the engine starts itself is refused.
            let transport = try CurlTransport()
            var configuration = harness.configuration()
            configuration.transport = transport
            try await DetachedThread.$simulatedFailure.withValue(ThreadRefusal()) {
                let restore = try await CacheManager(configuration: configuration).checkForUpdates()
                #expect(restore.outcome == .restored)
                try harness.expectTree(is: "1.1")
                // The twin was linked on the walk's own thread (TwinSeed), and is whole.
                let twin = StagingArea(contentDirectory: harness.content).retired
                #expect(try TreeSnapshot.read(twin) == harness.tree())
                harness.serve("1.4")
                let replay = try await CacheManager(configuration: configuration).checkForUpdates()
                #expect(replay.outcome == .replayed)
                try harness.expectTree(is: "1.4")
            }
            await transport.shutdown()
        }
    }

    @Test func aTransportWithoutItsThreadFailsAtOnceNamingTheLimit() async throws {
        await DetachedThread.$simulatedFailure.withValue(ThreadRefusal()) {
            do {
                let transport = try CurlTransport()
                await transport.shutdown()
                Issue.record("a transport without a thread was made")
            } catch let error as TransportError {
                #expect(error.code == .threadLimit, "\(error.code)")
                #expect(error.message.contains("task limit"), "\(error.message)")
                #expect(error.message.contains("cs.curl.0"), "the thread is named: \(error.message)")
            } catch {
                Issue.record("\(error)")
            }
            let state = NSTemporaryDirectory() + "/thread-\(UUID().uuidString).sqlite"
            defer { for suffix in ["", "-wal", "-shm"] { unlink(state + suffix) } }
            do {
                _ = try CacheManager(
                    configuration: SyncConfiguration(
                        baseURL: URL(string: "http://127.0.0.1:9/")!, contentDirectory: "/nonexistent/content",
                        stateDatabasePath: state))
                Issue.record("a manager without a transport thread was made")
            } catch let error as SyncError {
                #expect(error.code == .configuration)
                #expect(error.message.contains("task limit"), "\(error.message)")
            } catch {
                Issue.record("\(error)")
            }
        }
    }

    @Test func aTransportThatGetsOneOfItsLoopsRunsEveryTransferOnIt() async throws {
        try await withSyncHarness(serving: "1.4") { harness in
            var configuration = CurlTransport.Configuration()
            configuration.ioThreads = 4
            configuration.maxConnectionsPerHost = 8
            let transport = try DetachedThread.$simulatedFailure.withValue(ThreadRefusal(allowing: 1)) {
                try CurlTransport(configuration: configuration)
            }
            #expect(transport.loops.count == 1)
            let url = harness.baseURL.appendingPathComponent("RXCacheConfig/cacheStatus.json")
            let expected = try Data(
                contentsOf: ExampleStorageFixture.snapshot("1.4").appendingPathComponent(
                    "RXCacheConfig/cacheStatus.json"))
            let bodies = try await withThrowingTaskGroup(of: Data.self) { group in
                for _ in 0..<40 { group.addTask { try await transport.data(for: HTTPRequest(url: url)).body } }
                return try await group.reduce(into: [Data]()) { $0.append($1) }
            }
            #expect(bodies.count == 40 && bodies.allSatisfy { $0 == expected })
            await transport.shutdown()
        }
    }

    @Test func aPoolWithSomeThreadsRunsOnThose() async throws {
        let pool = DetachedThread.$simulatedFailure.withValue(ThreadRefusal(allowing: 1)) {
            BlockingIOPool(threadCount: 3, spin: .zero)
        }
        var names: Set<String> = []
        for _ in 0..<20 { names.insert(await pool.run { Self.threadName() }) }
        #expect(names == ["cs.io-0"])
    }

    @Test func aPoolWithoutThreadsRunsJobsOnTheCallerThenGetsAThread() async throws {
        let pool = DetachedThread.$simulatedFailure.withValue(ThreadRefusal()) {
            BlockingIOPool(threadCount: 2, spin: .zero)
        }
        // Refused again at the job: it runs here, and ends.
        let inline = await DetachedThread.$simulatedFailure.withValue(ThreadRefusal()) {
            await pool.run { Self.threadName() }
        }
        #expect(!inline.hasPrefix("cs.io"), "ran on \(inline)")
        // Threads are to be had again: the pool makes one, and runs jobs there from then on.
        for _ in 0..<3 {
            let worker = await pool.run { Self.threadName() }
            #expect(worker == "cs.io-0")
        }
    }

    @Test func flushesAndExtractionsRunWithoutHelpers() async throws {
        try await withTemporaryDirectory { scratch in
            let files = (0..<40).map { scratch + "/file-\($0)" }
            for (index, file) in files.enumerated() {
                try Data("file \(index)".utf8).write(to: URL(fileURLWithPath: file))
            }
            try await DetachedThread.$simulatedFailure.withValue(ThreadRefusal()) {
                try DiskFlush.entries(files + [scratch])
                // The archive of a real storage, extracted with 4 workers asked for and none made.
                let archive = ExampleStorageFixture.snapshot("1.4").path + "/RXCacheContent.zip"
                try FileManager.default.createDirectory(atPath: scratch + "/out", withIntermediateDirectories: false)
                var options = ZipExtractionOptions(maxTotalBytes: 1 << 30)
                options.workers = 4
                let report = try await ZipExtractor.extract(
                    archiveAt: archive, into: scratch + "/out", options: options)
                #expect(report.files == ExampleStorageFixture.manifest("1.4").files.count)
                #expect(try TreeSnapshot.read(scratch + "/out").files == ExampleStorageFixture.manifest("1.4").files)
            }
        }
    }

    @Test func aPublishBuildsItsArchiveOnTheCallingThread() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            try DetachedThread.$simulatedFailure.withValue(ThreadRefusal()) {
                _ = try PublishFixture.publish("1.0", storage: storage, scratch: scratch, initialize: true)
                _ = try PublishFixture.publish("1.1", storage: storage, scratch: scratch)
            }
            // What was published is whole: a client restores 1.1 from its archive.
            let archive = storage + "/RXCacheContent.zip"
            try FileManager.default.createDirectory(atPath: scratch + "/out", withIntermediateDirectories: false)
            _ = try await ZipExtractor.extract(
                archiveAt: archive, into: scratch + "/out", options: ZipExtractionOptions(maxTotalBytes: 1 << 30))
            #expect(try TreeSnapshot.read(scratch + "/out").files == ExampleStorageFixture.manifest("1.1").files)
            #expect(
                try TreeSnapshot.read(storage + "/RXCacheContent").files == ExampleStorageFixture.manifest("1.1").files)
        }
    }

    @Test func theTestServersSayWhyTheyCannotStart() async throws {
        try await withTemporaryDirectory { scratch in
            try await DetachedThread.$simulatedFailure.withValue(ThreadRefusal()) {
                let server = StorageServer(root: URL(fileURLWithPath: scratch))
                do {
                    _ = try await server.start()
                    Issue.record("the server started without a thread")
                    await server.stop()
                } catch {
                    #expect("\(error)".contains("task limit"), "\(error)")
                    // Said once: the message, then the thread's error in parentheses.
                    #expect("\(error)".components(separatedBy: "task limit").count == 2, "\(error)")
                }
                #expect(throws: ScriptedOriginError.self) { try ScriptedOrigin(handler: { _ in .init(status: 200) }) }
            }
        }
    }
}
