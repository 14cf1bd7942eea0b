import Foundation
import ProcessKit
import StorageServer
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// SIGTERM stops `watch` and `serve` whenever it comes: before the handler (the default action),
/// while they start, or while they run. A Dispatch signal source (swift-service-lifecycle's, and
/// ours before) lost one now and then, and the process then ran on for good.
@Suite("SIGTERM at any moment stops watch and serve", .timeLimit(.minutes(5)))
struct SignalDeliveryTests {
    /// Sends SIGTERM `delay` after the start; the status it ended with, or nil if it still ran
    /// 15 s later (then it is killed).
    static func endsAfterTerm(_ process: ChildProcess, delay: Duration) async throws -> Int32? {
        try await Task.sleep(for: delay)
        process.send(SIGTERM)
        let killed = Mutex(false)
        let hung = Task {
            try await Task.sleep(for: .seconds(15))
            killed.withLock { $0 = true }
            process.send(SIGKILL)
        }
        let status = await process.exitStatus()
        hung.cancel()
        return killed.withLock { $0 } ? nil : status
    }

    static let delays: [Duration] = [0, 15, 40, 80, 150, 250, 400, 700, 1_000, 1_500].map { .milliseconds($0) }

    @Test("watch: SIGTERM at 10 moments from its start to its first wait; it ends every time")
    func watchEnds() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.2")) {
                server in
                for (index, delay) in Self.delays.enumerated() {
                    let run = scratch + "/\(index)"
                    try FileManager.default.createDirectory(atPath: run, withIntermediateDirectories: true)
                    // With the endpoint on: a thread of its own, as in production.
                    let process = try SyncAgentBinary.watch(
                        server, scratch: run, ["--interval", "60", "--http", "127.0.0.1:0"])
                    let status = try await Self.endsAfterTerm(process, delay: delay)
                    let log = (try? String(contentsOfFile: run + "/watch.log", encoding: .utf8)) ?? ""
                    #expect(status != nil, "watch still ran 15 s after a SIGTERM \(delay) after its start:\n\(log)")
                    // 143: the default action, before `main` installed anything.
                    #expect(status == 0 || status == 143, "SIGTERM after \(delay): exit \(status ?? -1)\n\(log)")
                }
            }
        }
    }

    @Test("serve: SIGTERM at 10 moments after it printed its URL; it ends with 0 every time")
    func serveEnds() async throws {
        try await withScratch { scratch in
            for delay in Self.delays {
                let (process, url) = try await SyncAgentBinary.serve(
                    SyncAgentCLITests.exampleStorage + "/1.2", scratch: scratch)
                // A request on the way, so the server's threads are busy too.
                _ = try? Data(contentsOf: url.appendingPathComponent("RXCacheConfig/cacheStatus.json"))
                let status = try await Self.endsAfterTerm(process, delay: delay)
                #expect(
                    status == 0,
                    "serve, SIGTERM \(delay) after its URL: \(status.map { "exit \($0)" } ?? "still ran 15 s later")")
            }
        }
    }
}
