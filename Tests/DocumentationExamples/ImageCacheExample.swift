import Foundation
import ImageCache
import ItemCache

// snippet:begin image-pipeline
/// Thumbnails for the app's photo grid: each photo is downloaded once and checked as an image
/// before it is kept, and each size is made once, whoever asks (other processes sharing the
/// folder included).
final class Thumbnails: Sendable {
    let pipeline: ImagePipeline

    init(cacheFolder: String) throws {
        var cache = CacheConfiguration(folder: cacheFolder)
        cache.diskLimit = 256 << 20 // originals and variants together, across processes
        pipeline = try ImagePipeline(cache: cache)
    }

    /// A 320-pixel-wide WebP of the photo at `url` (never larger than the photo).
    func thumbnail(of url: URL) async throws -> Data {
        var request = ImageRequest(source: .url(url), width: 320, height: nil)
        request.format = .webp
        let image = try await pipeline.image(for: request)
        print(image.metadata.width, image.metadata.height, image.wasMade) // 320 240 true, then false
        return image.data
    }

    /// A square avatar, cropped where libvips finds the subject; nil for a URL that serves no
    /// image this cache accepts (HTML, SVG, a cut-off JPEG): nothing is cached for it.
    func avatar(of url: URL) async throws -> Data? {
        var request = ImageRequest(source: .url(url), width: 96, height: 96)
        request.mode = .smartFill
        do {
            return try await pipeline.image(for: request).data
        } catch {
            guard error.code == .refused else { throw error } // `error` is an ImageCacheError
            print(error.message) // names the URL and the reason
            return nil
        }
    }

    /// At the app's end: adds this process's counts to the folder's and ends the transport.
    func shutdown() async throws {
        try await pipeline.close()
    }
}
// snippet:end image-pipeline

// snippet:begin image-saved
/// A drawing the app made itself: kept under an id with its own metadata, and its sizes made
/// without the network.
func saveDrawing(_ png: Data, pipeline: ImagePipeline) async throws -> Data {
    try await pipeline.save(png, id: "drawing-42", metadata: ["author": "ana"])
    var request = ImageRequest(source: .id("drawing-42"), width: 64, height: 64)
    request.policy = .offline
    print(try await pipeline.isCached(request)) // false: the 64×64 is not made yet
    let thumbnail = try await pipeline.image(for: request)
    print(thumbnail.original.custom["author"] ?? "") // ana
    return thumbnail.data
}
// snippet:end image-saved
