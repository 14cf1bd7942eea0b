import Foundation
import ItemCache
import StorageServer
import Testing

/// The ItemCache catalog's and the README's cache examples, run against a loopback server.
@Suite("The item cache examples compile and do what they say", .timeLimit(.minutes(3)))
struct ItemCacheExampleTests {
    @Test func theLoaderExampleFetchesOnceThenAnswersFromTheCache() async throws {
        let root = NSTemporaryDirectory() + "item-cache-example-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/site", withIntermediateDirectories: true)
        try Data(#"{"city":"Porto","celsius":21}"#.utf8).write(to: URL(fileURLWithPath: root + "/site/forecast"))
        let server = StorageServer(root: URL(fileURLWithPath: root + "/site"))
        _ = try await server.start()
        server.setCacheControl("max-age=600", forPath: "/forecast")
        defer { Task { await server.stop() } }

        let service = try ForecastService(api: server.url(for: "forecast"), cacheFolder: root + "/cache")
        let first = try await service.forecast(for: "Porto")
        let second = try await service.forecast(for: "Porto")
        #expect(first.celsius == 21 && second.city == "Porto")
        #expect(server.requestCount(forPath: "/forecast") == 1, "the second call is answered from memory")
        try await service.shutdown()
        // Another process (here: a second service) finds it on disk.
        let other = try ForecastService(api: server.url(for: "forecast"), cacheFolder: root + "/cache")
        #expect(try await other.forecast(for: "Porto").celsius == 21)
        #expect(server.requestCount(forPath: "/forecast") == 1, "the second process is answered by the cache folder")
        try await other.shutdown()
        let store = try ItemStore(configuration: CacheConfiguration(folder: root + "/cache"))
        #expect(try await store.statistics().limit == 64 << 20)
    }

    @Test func theProviderExampleLoadsOnceAndEditsAtomically() async throws {
        let folder = NSTemporaryDirectory() + "item-cache-provider-example-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ItemStore(configuration: CacheConfiguration(folder: folder))
        let first = try await favouriteCities(store: store, user: "ana") { ["Porto"] }
        #expect(first == ["Lisbon", "Porto"])
        let second = try await favouriteCities(store: store, user: "ana") {
            Issue.record("fresh: no reload")
            return []
        }
        #expect(second == ["Lisbon", "Lisbon", "Porto"])
    }
}
