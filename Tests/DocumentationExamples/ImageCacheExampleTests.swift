import Foundation
import ImageCache
import ItemCache
import StorageServer
import Testing

/// The ImageCache catalog's and the README's image examples, run against a loopback server.
@Suite("The image cache examples compile and do what they say", .timeLimit(.minutes(3)))
struct ImageCacheExampleTests {
    /// A fixture image (made once with `vips`): `Tests/Fixtures/images/NAME`.
    static func fixture(_ name: String) throws -> Data {
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        return try Data(contentsOf: tests.appendingPathComponent("Fixtures/images/\(name)"))
    }

    @Test func theThumbnailsExampleFetchesOnceAndMakesEachSizeOnce() async throws {
        let root = NSTemporaryDirectory() + "image-example-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/site", withIntermediateDirectories: true)
        try Self.fixture("photo-640x480.jpg").write(to: URL(fileURLWithPath: root + "/site/photo.jpg"))
        try Data("<html>moved</html>".utf8).write(to: URL(fileURLWithPath: root + "/site/page.jpg"))
        let server = StorageServer(root: URL(fileURLWithPath: root + "/site"))
        _ = try await server.start()
        server.setCacheControl("max-age=600", forPath: "/photo.jpg")
        defer { Task { await server.stop() } }

        let thumbnails = try Thumbnails(cacheFolder: root + "/cache")
        let first = try await thumbnails.thumbnail(of: server.url(for: "photo.jpg"))
        let second = try await thumbnails.thumbnail(of: server.url(for: "photo.jpg"))
        #expect(first == second)
        let header = try ImageProbe.header(of: first, source: "thumbnail")
        #expect(header.format == "webp" && header.width == 320 && header.height == 240)
        let avatar = try #require(try await thumbnails.avatar(of: server.url(for: "photo.jpg")))
        #expect(try ImageProbe.header(of: avatar, source: "avatar").width == 96)
        #expect(try await thumbnails.avatar(of: server.url(for: "page.jpg")) == nil)
        #expect(server.requestCount(forPath: "/photo.jpg") == 1)
        #expect(thumbnails.pipeline.counts == ImagePipeline.Counts(made: 2, hits: 1, refusals: 1))
        try await thumbnails.shutdown()
    }

    @Test func theSavedDrawingExampleMakesItsSizeOffline() async throws {
        let folder = NSTemporaryDirectory() + "image-saved-example-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let pipeline = try ImagePipeline(cache: CacheConfiguration(folder: folder))
        let thumbnail = try await saveDrawing(try Self.fixture("drawing-200x100.png"), pipeline: pipeline)
        let header = try ImageProbe.header(of: thumbnail, source: "drawing")
        #expect(header.format == "png" && header.width == 64 && header.height == 32)
        var request = ImageRequest(source: .id("drawing-42"), width: 64, height: 64)
        request.policy = .offline
        #expect(try await pipeline.isCached(request))
        try await pipeline.close()
    }
}
