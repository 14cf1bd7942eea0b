// The guide's "Sharing a transport" example, as an app writes it: this file imports only what
// the example needs. SharingATransportTests runs it.

// snippet:begin app-content
import ContentSync
import Foundation
import Transport // CurlTransport

/// Everything the app syncs, over one transport: one set of I/O threads and connections.
struct AppContent {
    let transport: CurlTransport
    let articles: CacheManager
    let images: CacheManager

    init(articles articlesStorage: URL, images imagesStorage: URL, appSupport: String) throws {
        transport = try CurlTransport() // the app's, so the app shuts it down (in stop())
        var configuration = SyncConfiguration(
            baseURL: articlesStorage, contentDirectory: appSupport + "/articles",
            stateDatabasePath: appSupport + "/articles.sqlite")
        configuration.transport = transport
        articles = try CacheManager(configuration: configuration)

        configuration = SyncConfiguration(
            baseURL: imagesStorage, contentDirectory: appSupport + "/images",
            stateDatabasePath: appSupport + "/images.sqlite")
        configuration.transport = transport
        images = try CacheManager(configuration: configuration)
    }

    /// Both folders at once; their requests share the transport's connections.
    func update() async throws -> (articles: SyncReport, images: SyncReport) {
        async let articlesReport = articles.checkForUpdates()
        async let imagesReport = images.checkForUpdates()
        return try await (articlesReport, imagesReport)
    }

    /// The managers first (they stop their updates and leave a given transport running),
    /// then the transport, after the last of them.
    func stop() async {
        await articles.shutdown()
        await images.shutdown()
        await transport.shutdown()
    }
}
// snippet:end app-content
