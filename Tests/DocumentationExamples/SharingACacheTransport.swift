// The ItemCache guide's "Sharing a transport" example, as an app writes it. SharingATransportTests
// runs it.

// snippet:begin synced-content-and-cache
import ContentSync
import Foundation
import ItemCache
import Transport // CurlTransport

/// A synced content folder and an item cache over one transport: one set of I/O threads, and
/// connections to a host reused by both.
final class AppData: Sendable {
    let transport: CurlTransport
    let content: CacheManager
    let cache: ItemLoader

    init(storage: URL, appSupport: String) throws {
        transport = try CurlTransport() // the app's: the app shuts it down, last
        var sync = SyncConfiguration(
            baseURL: storage, contentDirectory: appSupport + "/content",
            stateDatabasePath: appSupport + "/content.sqlite")
        sync.transport = transport
        content = try CacheManager(configuration: sync)
        cache = try ItemLoader(configuration: CacheConfiguration(folder: appSupport + "/cache"), transport: transport)
    }

    /// The synced folder up to date, then an item the app fetches by URL through the cache.
    func refresh(item: URL) async throws -> Data {
        _ = try await content.checkForUpdates()
        return try await cache.item(for: item).data
    }

    /// The users of the transport first, then the transport.
    func stop() async throws {
        await content.shutdown()
        try await cache.close() // leaves a given transport running
        await transport.shutdown()
    }
}
// snippet:end synced-content-and-cache
