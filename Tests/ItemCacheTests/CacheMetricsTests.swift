import Foundation
import Metrics
import MetricsTestKit
import Testing

@testable import ItemCache

/// swift-metrics' test backend, bootstrapped once for the test process (a backend can be set
/// only once; instruments made before it are no-ops, so each test makes its cache after this).
let testMetrics: TestMetrics = {
    let metrics = TestMetrics()
    MetricsSystem.bootstrap(metrics)
    return metrics
}()

/// The cache's instruments count what happened, under the configured prefix.
@Suite("Metrics: hits and misses per tier, bytes, fetch latency, revalidations, evictions")
struct CacheMetricsTests {
    @Test("a miss, a memory hit, a disk hit, a 304 and evictions each move their instrument")
    func instrumentsCount() async throws {
        let prefix = "test_\(UUID().uuidString.prefix(8).lowercased())"
        let metrics = testMetrics
        let fixture = try await LoaderFixture { configuration in
            configuration.metricsPrefix = prefix
            // Room for three 1,000-byte files (a block and a row each) beside the index and log.
            // Their shard folders count too (a block each).
            let keys = (0..<4).map { try! CacheKey.custom("v\($0)") }
            let shards = Set(keys.map { BlobName(newFor: $0).shard }).count + 1
            configuration.diskLimit = DiskTier.limit(
                forRows: 3 * DiskTier.cost(size: 1_000, inline: false), shardFolders: shards)
            configuration.inlineThreshold = 64
        }
        defer { Task { await fixture.close() } }
        try fixture.publish("a", String(repeating: "a", count: 1_000))
        fixture.server.setCacheControl("max-age=600", forPath: "/a")

        _ = try await fixture.loader.item(for: fixture.url("a")) // miss: fetched
        _ = try await fixture.loader.item(for: fixture.url("a")) // memory hit
        fixture.store.purgeMemory()
        _ = try await fixture.loader.item(for: fixture.url("a")) // disk hit
        // A reload (a miss by choice) fetches the whole value, no validators. Stored expired,
        // so the next get is a miss that revalidates with its ETag: 304.
        _ = try await fixture.loader.item(
            for: fixture.url("a"), options: LoadOptions(expiry: .date(Date(timeIntervalSince1970: 1)), policy: .reload))
        _ = try await fixture.loader.item(for: fixture.url("a"))

        #expect(
            try metrics.expectCounter(prefix + "_misses", [("tier", "disk")]).totalValue == 3,
            "every load the cache could not answer fresh")
        #expect(
            try metrics.expectCounter(prefix + "_misses", [("tier", "memory")]).totalValue == 4,
            "those three and the disk hit")
        #expect(try metrics.expectCounter(prefix + "_hits", [("tier", "memory")]).totalValue == 1)
        #expect(try metrics.expectCounter(prefix + "_hits", [("tier", "disk")]).totalValue == 1)
        #expect(
            try metrics.expectCounter(prefix + "_fetched_bytes").totalValue == 2_000,
            "the reload's body; the 304 moves none")
        #expect(try metrics.expectCounter(prefix + "_stored_bytes").totalValue == 2_000)
        #expect(try metrics.expectCounter(prefix + "_revalidations", [("result", "not_modified")]).totalValue == 1)
        #expect(fixture.server.requestCount(forPath: "/a") == 3)
        #expect(try metrics.expectTimer(prefix + "_fetch_duration").values.count == 3)

        // Four more 1,000-byte values where three fit: two older items must go.
        for index in 0..<4 { try await fixture.store.store(Data(count: 1_000), for: CacheKey.custom("v\(index)")) }
        #expect(try metrics.expectCounter(prefix + "_evictions").totalValue == 2)
    }
}
