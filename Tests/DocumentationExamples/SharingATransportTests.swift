import ContentSync
import Foundation
import StorageServer
import Testing
import Transport

/// The "Sharing a transport" article (Sources/ContentSync/ContentSync.docc/SharingATransport.md).
@Suite("The guide's shared transport example works", .timeLimit(.minutes(3)))
struct SharingATransportExamples {
    @Test func twoManagersShareOneTransportThatOutlivesThemUntilTheAppStopsIt() async throws {
        try await withExampleHost(serving: "1.0") { articlesHost in
            try await withStorageServer(root: ExampleStorage.snapshot("1.2")) { imagesServer in
                let content = try AppContent(
                    articles: articlesHost.storageURL, images: imagesServer.baseURL!,
                    appSupport: articlesHost.appSupport)
                let (articles, images) = try await content.update()
                #expect(articles.outcome == .restored && articles.toVersion.text == "1.0")
                #expect(images.outcome == .restored && images.toVersion.text == "1.2")
                ExampleStorage.expectTree(articlesHost.appSupport + "/articles", is: "1.0")
                ExampleStorage.expectTree(articlesHost.appSupport + "/images", is: "1.2")

                // A manager's shutdown leaves the app's transport running for the other one.
                await content.articles.shutdown()
                imagesServer.setRoot(ExampleStorage.snapshot("1.4"))
                #expect(try await content.images.checkForUpdates().toVersion.text == "1.4")
                ExampleStorage.expectTree(articlesHost.appSupport + "/images", is: "1.4")

                await content.stop()
                let error = await #expect(throws: SyncError.self) { try await content.images.checkForUpdates() }
                #expect(error?.code == .cancelled)
                await #expect(throws: (any Error).self) {
                    try await content.transport.data(
                        for: HTTPRequest(url: imagesServer.url(for: "RXCacheConfig/cacheStatus.json")))
                }
            }
        }
    }
}
