import Foundation
import ItemCache
import StorageServer
import Synchronization
import ToolSupport
import Transport

/// A failing origin (issue 21): one 4 KiB item stored with `max-age=1` and let go stale, then
/// `--calls` loads `--interval-ms` apart while the origin refuses connections (`refused`) or
/// answers 503 (`503`). Every load must return the stale value. Reports the first load (the
/// one that meets the failure), the p50 of the others (goal ≤ 5 ms), the requests the origin saw
/// (refused: connection attempts, counted before each attempt) and the requests the backoff
/// schedule allows over the same time (``OriginBackoff``: one per period).
func measureDownOrigin(_ options: ToolOptions) async throws {
    let folder = try options.string("folder")
    let calls = try options.int("calls", 100)
    let interval = try options.int("interval-ms", 20)
    for mode in ["refused", "503"] {
        let failing = Atomic<Bool>(false)
        let origin = try ScriptedOrigin { _ in
            failing.load(ordering: .relaxed)
                ? ScriptedOrigin.Answer(status: 503)
                : ScriptedOrigin.Answer(
                    headers: ["Cache-Control: max-age=1"], body: Values(size: 4096, seed: 1).value(0))
        }
        let attempts = Atomic<Int>(0)
        var transportConfiguration = CurlTransport.Configuration()
        transportConfiguration.adapter = ClosureRequestAdapter { _ in attempts.add(1, ordering: .relaxed) }
        let transport = try CurlTransport(configuration: transportConfiguration)
        let configuration = CacheConfiguration(folder: folder + "-" + mode)
        let store = try ItemStore(configuration: configuration)
        let loader = ItemLoader(store: store, loading: configuration.loading, transport: transport)
        let url = origin.url("/down.bin")
        _ = try await loader.item(for: url)
        try await Task.sleep(for: .milliseconds(1100))
        if mode == "refused" { origin.stop() } else { failing.store(true, ordering: .relaxed) }
        let before = (attempts.load(ordering: .relaxed), origin.requestCount(forPath: "/down.bin"))
        var latencies: [UInt64] = []
        let started = nowNanoseconds()
        for call in 0..<calls {
            let start = nowNanoseconds()
            let loaded = try await loader.item(for: url)
            latencies.append(nowNanoseconds() - start)
            guard loaded.source == .stale, loaded.data.count == 4096 else {
                throw ToolFailure(
                    "call \(call) with the origin \(mode) came from \(loaded.source); expected stale data")
            }
            try await Task.sleep(for: .milliseconds(interval))
        }
        let elapsed = Double(nowNanoseconds() - started) / 1e9
        let requests =
            mode == "refused"
            ? attempts.load(ordering: .relaxed) - before.0 : origin.requestCount(forPath: "/down.bin") - before.1
        // The backoff's schedule over the same time: a probe at 0, then after 1, 2, 4… s.
        var allowed = 0
        var due = 0.0
        while due <= elapsed {
            allowed += 1
            let (seconds, attoseconds) = configuration.loading.originBackoff.delay(afterFailures: allowed).components
            due += Double(seconds) + Double(attoseconds) / 1e18
        }
        try await loader.close()
        await transport.shutdown()
        origin.stop()
        emit(
            [
                "measure": "down-origin", "op": mode, "first_ns": latencies[0], "requests": requests,
                "allowed": allowed, "calls": calls, "seconds": elapsed,
            ].merging(latencyFields(Array(latencies.dropFirst()))) { $1 })
    }
}
