import CVips
import FileKit
import Foundation
import ItemCache
import Metrics
import MetricsTestKit
import StorageServer
import Synchronization
import Testing
import Transport

@testable import ImageCache

/// A pipeline on a real cache folder and a scripted loopback origin whose answers a test sets
/// and changes.
final class PipelineFixture: Sendable {
    typealias Answer = ScriptedOrigin.Answer
    let folder: String
    let origin: ScriptedOrigin
    let transport: CurlTransport
    let answers = AnswerTable()

    final class AnswerTable: Sendable {
        let table = Mutex<[String: Answer]>([:])
        /// Seconds the origin waits before answering a path.
        let delays = Mutex<[String: Double]>([:])
        func withLock<T>(_ body: (inout [String: Answer]) -> T) -> T { table.withLock { body(&$0) } }
    }

    init(_ name: String = #function) throws {
        folder =
            NSTemporaryDirectory() + "image-cache-\(name.filter(\.isLetter).prefix(24))-\(UUID().uuidString.prefix(8))"
        let answers = self.answers
        origin = try ScriptedOrigin { request in
            if let delay = answers.delays.withLock({ $0[request.path] }) { Thread.sleep(forTimeInterval: delay) }
            return answers.withLock { $0[request.path] } ?? Answer(status: 404, body: Data("no such image".utf8))
        }
        transport = try CurlTransport()
    }

    /// Serves `body` at `path` (fresh for `maxAge` seconds), with `contentType`.
    func serve(_ path: String, _ body: Data, contentType: String = "image/jpeg", maxAge: Int = 3600) {
        answers.withLock {
            $0[path] = Answer(
                headers: [
                    "Content-Type: \(contentType)", "Cache-Control: max-age=\(maxAge)", "ETag: \"\(body.count)\"",
                ],
                body: body)
        }
    }

    /// A new pipeline (a new process, as far as the folder can tell, but for the memory tier).
    func pipeline(_ configure: (inout ImagePipeline.Configuration) -> Void = { _ in }) throws -> ImagePipeline {
        let store = try ItemStore(configuration: CacheConfiguration(folder: folder))
        let loader = ItemLoader(store: store, loading: LoadingConfiguration(), transport: transport)
        var configuration = ImagePipeline.Configuration()
        configure(&configuration)
        return try ImagePipeline(loader: loader, configuration: configuration)
    }

    func url(_ path: String) -> URL { origin.url(path) }

    func request(_ path: String, _ width: Int?, _ height: Int?) -> ImageRequest {
        ImageRequest(source: .url(url(path)), width: width, height: height)
    }

    deinit {
        origin.stop()
        try? FileManager.default.removeItem(atPath: folder)
    }
}

/// The size of an encoded image, read back by libvips.
func dimensions(_ data: Data) throws -> (width: Int, height: Int, format: String) {
    let header = try ImageProbe.header(of: data, source: "variant")
    return (header.width, header.height, header.format)
}

@Suite("ImagePipeline: variants of fetched originals on a real cache folder and loopback origin")
struct ImagePipelineTests {
    @Test("an original is fetched once; each variant is made once and served from the store after")
    func madeOnce() async throws {
        let fixture = try PipelineFixture()
        fixture.serve("/photo.jpg", try colouredImage(width: 400, height: 300, rgb: (200, 30, 30), format: "jpeg"))
        let pipeline = try fixture.pipeline()
        let first = try await pipeline.image(for: fixture.request("/photo.jpg", 100, nil))
        #expect(first.wasMade)
        #expect(try dimensions(first.data) == (100, 75, "jpeg"))
        #expect(first.metadata.width == 100 && first.metadata.height == 75 && first.metadata.format == "jpeg")
        #expect(first.original.width == 400 && first.original.height == 300 && first.original.sha256 != nil)
        let again = try await pipeline.image(for: fixture.request("/photo.jpg", 100, nil))
        #expect(!again.wasMade)
        #expect(again.data == first.data)
        // Another size: a new variant, from the stored original.
        let other = try await pipeline.image(for: fixture.request("/photo.jpg", nil, 60))
        #expect(other.wasMade)
        #expect(try dimensions(other.data) == (80, 60, "jpeg"))
        #expect(fixture.origin.requestCount(forPath: "/photo.jpg") == 1)
        // A new pipeline on the folder (a restart): the variant and its metadata survive.
        let restarted = try fixture.pipeline()
        let stored = try await restarted.image(for: fixture.request("/photo.jpg", 100, nil))
        #expect(!stored.wasMade && stored.source == .disk)
        #expect(stored.metadata == first.metadata)
        #expect(stored.original.sha256 == first.original.sha256)
        #expect(try await restarted.isCached(fixture.request("/photo.jpg", 100, nil)))
        #expect(try await !restarted.isCached(fixture.request("/photo.jpg", 33, nil)))
        #expect(fixture.origin.requestCount(forPath: "/photo.jpg") == 1)
    }

    /// A 304 says the original did not change: its variants stay, and none is made again.
    @Test("a stale original revalidated by a 304 keeps its variants: none is made again")
    func aNotModifiedOriginalKeepsItsVariants() async throws {
        let fixture = try PipelineFixture()
        let body = try colouredImage(width: 400, height: 300, rgb: (0, 128, 0), format: "png")
        fixture.serve("/kept.png", body, contentType: "image/png", maxAge: 0)
        let pipeline = try fixture.pipeline()
        let first = try await pipeline.image(for: fixture.request("/kept.png", 100, nil))
        #expect(first.wasMade)
        // From now on the origin answers 304 (the same ETag): the original is unchanged.
        fixture.answers.withLock {
            $0["/kept.png"] = PipelineFixture.Answer(
                status: 304, headers: ["Cache-Control: max-age=0", "ETag: \"\(body.count)\""])
        }
        let second = try await pipeline.image(for: fixture.request("/kept.png", 100, nil))
        #expect(fixture.origin.requestCount(forPath: "/kept.png") == 2, "the stale original was revalidated")
        #expect(!second.wasMade, "the variant was made again after a 304")
        #expect(second.data == first.data)
        #expect(pipeline.counts.made == 1)
    }

    /// The instruments record into the factory the configuration names (no process-wide
    /// bootstrap: the item cache's tests own that one), under its prefix.
    @Test("swift-metrics: variants made with their processing time, hits by tier, refusals")
    func metricsCountWhatHappened() async throws {
        let fixture = try PipelineFixture()
        fixture.serve("/m.jpg", try colouredImage(width: 300, height: 200, rgb: (10, 20, 30), format: "jpeg"))
        fixture.serve("/not-an-image", Data("plain text, not an image".utf8), contentType: "image/jpeg")
        let metrics = TestMetrics()
        let configure: (inout ImagePipeline.Configuration) -> Void = {
            $0.metricsPrefix = "images_test"
            $0.metricsFactory = metrics
        }
        let pipeline = try fixture.pipeline(configure)
        _ = try await pipeline.image(for: fixture.request("/m.jpg", 100, nil)) // made
        _ = try await pipeline.image(for: fixture.request("/m.jpg", 50, nil)) // made
        _ = try await pipeline.image(for: fixture.request("/m.jpg", 100, nil)) // memory
        _ = try await fixture.pipeline(configure).image(for: fixture.request("/m.jpg", 50, nil)) // disk
        await #expect(throws: ImageCacheError.self) {
            try await pipeline.image(for: fixture.request("/not-an-image", 10, nil))
        }
        #expect(try metrics.expectCounter("images_test_variants_made").totalValue == 2)
        #expect(try metrics.expectTimer("images_test_processing_duration").values.count == 2)
        #expect(try metrics.expectTimer("images_test_processing_duration").values.allSatisfy { $0 > 0 })
        #expect(try metrics.expectCounter("images_test_variant_hits", [("tier", "memory")]).totalValue == 1)
        #expect(try metrics.expectCounter("images_test_variant_hits", [("tier", "disk")]).totalValue == 1)
        #expect(try metrics.expectCounter("images_test_refusals").totalValue == 1)
        #expect(pipeline.counts.made == 2 && pipeline.counts.hits == 1 && pipeline.counts.refusals == 1)
    }

    @Test("modes by their pixels: fit, fill (the crop box), force; PNG and WebP keep the request's format")
    func modes() async throws {
        let fixture = try PipelineFixture()
        fixture.serve(
            "/wide.png", try colouredImage(width: 600, height: 200, rgb: (0, 0, 255), format: "png"),
            contentType: "image/png")
        let pipeline = try fixture.pipeline()
        var fill = fixture.request("/wide.png", 100, 100)
        fill.mode = .fill
        #expect(try dimensions(try await pipeline.image(for: fill).data) == (100, 100, "png"))
        var fit = fixture.request("/wide.png", 100, 100)
        fit.format = .webp
        #expect(try dimensions(try await pipeline.image(for: fit).data) == (100, 33, "webp"))
        var force = fixture.request("/wide.png", 50, 70)
        force.mode = .force
        #expect(try dimensions(try await pipeline.image(for: force).data) == (50, 70, "png"))
        // Never upscale by default; with upscale the box is reached.
        var small = fixture.request("/wide.png", 1200, nil)
        #expect(try dimensions(try await pipeline.image(for: small).data) == (600, 200, "png"))
        small.upscale = true
        #expect(try dimensions(try await pipeline.image(for: small).data) == (1200, 400, "png"))
        // Force does not upscale either: the wide side shrinks, the short one keeps its 200.
        var forceBig = fixture.request("/wide.png", 300, 900)
        forceBig.mode = .force
        #expect(try dimensions(try await pipeline.image(for: forceBig).data) == (300, 200, "png"))
        forceBig.upscale = true
        #expect(try dimensions(try await pipeline.image(for: forceBig).data) == (300, 900, "png"))
    }

    @Test("a PNG served as image/jpeg is read as the PNG it is; alpha goes onto white for JPEG")
    func bytesDecide() async throws {
        let fixture = try PipelineFixture()
        fixture.serve(
            "/liar.jpg", try colouredImage(width: 40, height: 40, rgb: (0, 0, 0), alpha: 0, format: "png"),
            contentType: "image/jpeg")
        let pipeline = try fixture.pipeline()
        var request = fixture.request("/liar.jpg", 20, nil)
        request.format = .jpeg
        let image = try await pipeline.image(for: request)
        #expect(image.original.format == "png")
        let pixel = try firstPixel(image.data)
        #expect(pixel.count == 3 && pixel.allSatisfy { $0 > 245 })
    }

    @Test("eight concurrent loads of one variant fetch the original once and make the variant once")
    func coalesced() async throws {
        let fixture = try PipelineFixture()
        fixture.serve("/big.jpg", try colouredImage(width: 1600, height: 1200, rgb: (10, 200, 10), format: "jpeg"))
        // The original comes after 2 s: every load has joined by then, on a loaded machine too
        // (a load that started after the variant was stored would count as a hit).
        fixture.answers.delays.withLock { $0["/big.jpg"] = 2 }
        let pipeline = try fixture.pipeline()
        let sizes = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<8 {
                group.addTask { try await pipeline.image(for: fixture.request("/big.jpg", 320, nil)).metadata.width }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(sizes == Array(repeating: 320, count: 8))
        #expect(pipeline.counts.made == 1 && pipeline.counts.hits == 0)
        #expect(fixture.origin.requestCount(forPath: "/big.jpg") == 1)
        let variants = try await pipeline.loader.count(matching: ItemQuery().context(ImagePipeline.variantContext))
        #expect(variants == 1)
    }

    @Test("a new version of an original gets new variants and its old ones go; remove takes them all")
    func newVersion() async throws {
        let fixture = try PipelineFixture()
        fixture.serve(
            "/logo.png", try colouredImage(width: 200, height: 100, rgb: (255, 0, 0), format: "png"),
            contentType: "image/png", maxAge: 0)
        let pipeline = try fixture.pipeline()
        let red = try await pipeline.image(for: fixture.request("/logo.png", 50, nil))
        _ = try await pipeline.image(for: fixture.request("/logo.png", 20, nil))
        #expect(try firstPixel(red.data).first ?? 0 > 200)
        fixture.serve(
            "/logo.png", try colouredImage(width: 300, height: 100, rgb: (0, 255, 0), format: "png"),
            contentType: "image/png", maxAge: 0)
        let green = try await pipeline.image(for: fixture.request("/logo.png", 50, nil))
        #expect(green.wasMade && green.key != red.key)
        #expect(try dimensions(green.data) == (50, 17, "png"))
        #expect(try firstPixel(green.data)[1] > 200)
        let variants = try await pipeline.loader.items(matching: ItemQuery().context(ImagePipeline.variantContext))
        #expect(variants.map(\.key) == [green.key])
        #expect(try await pipeline.remove(.url(fixture.url("/logo.png"))) == 2)
        #expect(try await pipeline.loader.count(matching: ItemQuery()) == 0)
    }

    @Test(
        "hostile or wrong input is refused by name, and nothing is cached for it",
        arguments: [
            "svg", "html", "empty", "truncated-jpeg", "truncated-png", "pixel-bomb", "progressive-bomb", "noise",
            "png-crc", "png-ihdr", "jpeg-marker", "over-bytes", "pdf",
        ])
    func refused(kind: String) async throws {
        let fixture = try PipelineFixture(kind)
        let body = try hostileImage(kind)
        fixture.serve("/bad", body)
        let pipeline = try fixture.pipeline {
            $0.limits.maxProgressivePixels = 1_000_000
            $0.limits.maxBytes = 256 << 10
        }
        let error = await #expect(throws: ImageCacheError.self) {
            try await pipeline.image(for: fixture.request("/bad", 64, nil))
        }
        #expect(error?.code == .refused)
        #expect(error?.message.contains(fixture.url("/bad").absoluteString) == true)
        if kind == "over-bytes" { #expect(error?.message.contains("ImageLimits.maxBytes") == true) }
        #expect(pipeline.counts.refusals == 1 && pipeline.counts.made == 0)
        #expect(try await pipeline.loader.count(matching: ItemQuery()) == 0)
    }

    @Test("a corrupt EXIF block is not fatal: the image is made, unrotated")
    func corruptEXIF() async throws {
        let fixture = try PipelineFixture()
        var jpeg = try colouredImage(width: 120, height: 80, rgb: (90, 90, 90), format: "jpeg", orientation: 6)
        // Damage the EXIF payload (after its "Exif\0\0" header): the IFD offsets point nowhere.
        let exif = try #require(jpeg.firstRange(of: Data("Exif\0\0".utf8)))
        for index in (exif.upperBound + 4)..<(exif.upperBound + 24) { jpeg[index] = 0xEE }
        fixture.serve("/exif.jpg", jpeg)
        let pipeline = try fixture.pipeline()
        let image = try await pipeline.image(for: fixture.request("/exif.jpg", 60, nil))
        #expect(try dimensions(image.data) == (60, 40, "jpeg"))
    }

    @Test("an error status is the origin's answer, not an image; offline with nothing stored is notCached")
    func statusesAndOffline() async throws {
        let fixture = try PipelineFixture()
        let pipeline = try fixture.pipeline()
        let missing = await #expect(throws: ImageCacheError.self) {
            try await pipeline.image(for: fixture.request("/missing.jpg", 10, nil))
        }
        #expect(missing?.code == .cache && missing?.cacheError?.httpStatus == 404)
        var offline = fixture.request("/other.jpg", 10, nil)
        offline.policy = .offline
        let miss = await #expect(throws: ImageCacheError.self) { try await pipeline.image(for: offline) }
        #expect(miss?.cacheError?.code == .notCached)
        #expect(fixture.origin.requestCount(forPath: "/other.jpg") == 0)
    }

    /// Offline, an expired original whose origin forbade stale use (`must-revalidate`), or one
    /// that must be revalidated on every use (`no-cache`), serves no variant, as `cache get
    /// --offline` serves no such item (RFC 9111 §4.2.4); an expired one that allows it does.
    @Test(
        "offline serves no variant of an original its origin forbade serving stale",
        arguments: [
            ("max-age=0, must-revalidate", false), ("no-cache", false), ("max-age=0", true), ("max-age=3600", true),
        ])
    func offlineKeepsTheOriginsStaleRules(cacheControl: String, served: Bool) async throws {
        let fixture = try PipelineFixture()
        let jpeg = try colouredImage(width: 120, height: 80, rgb: (10, 200, 30), format: "jpeg")
        fixture.answers.withLock {
            $0["/rules.jpg"] = PipelineFixture.Answer(
                headers: ["Content-Type: image/jpeg", "Cache-Control: \(cacheControl)", "ETag: \"r\""], body: jpeg)
        }
        let pipeline = try fixture.pipeline()
        _ = try await pipeline.image(for: fixture.request("/rules.jpg", 30, nil))
        // max-age=0 is expired from the moment it is stored (an expiry at or before now).
        for width in [30, 40] { // the variant made online, and one to make from the stored original
            var offline = fixture.request("/rules.jpg", width, nil)
            offline.policy = .offline
            if served {
                #expect(try dimensions(try await pipeline.image(for: offline).data).width == width, "\(cacheControl)")
            } else {
                let miss = await #expect(throws: ImageCacheError.self, "\(cacheControl) \(width)") {
                    try await pipeline.image(for: offline)
                }
                #expect(miss?.cacheError?.code == .notCached, "\(cacheControl) \(width)")
            }
        }
        #expect(fixture.origin.requestCount(forPath: "/rules.jpg") == 1)
    }

    @Test("a saved image: checked, kept with the caller's metadata, its variants made offline")
    func savedImage() async throws {
        let fixture = try PipelineFixture()
        let pipeline = try fixture.pipeline()
        let png = try colouredImage(width: 64, height: 32, rgb: (1, 2, 3), format: "png")
        let saved = try await pipeline.save(png, id: "avatar-7", metadata: ["owner": "ann"])
        #expect(saved.width == 64 && saved.custom == ["owner": "ann"])
        await #expect(throws: ImageCacheError.self) {
            try await pipeline.save(Data("<html>".utf8), id: "bad", metadata: [:])
        }
        await #expect(throws: ImageCacheError.self) {
            try await pipeline.save(png, id: "reserved", metadata: ["image.width": "1"])
        }
        var request = ImageRequest(source: .id("avatar-7"), width: 16, height: nil)
        request.policy = .offline
        let variant = try await pipeline.image(for: request)
        #expect(try dimensions(variant.data) == (16, 8, "png"))
        #expect(variant.original.custom == ["owner": "ann"])
        let restarted = try fixture.pipeline()
        #expect(try await restarted.originalMetadata(of: .id("avatar-7"))?.custom == ["owner": "ann"])
        #expect(try await restarted.isCached(request))
    }

    @Test("a file in a mirrored folder is keyed by its content: a new version's variants are new, the old go")
    func fileSource() async throws {
        let fixture = try PipelineFixture()
        let folder = fixture.folder + "-mirror"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/hero.jpg"
        try colouredImage(width: 300, height: 300, rgb: (255, 0, 0), format: "jpeg").write(
            to: URL(fileURLWithPath: path))
        let pipeline = try fixture.pipeline()
        let request = ImageRequest(source: .url(URL(fileURLWithPath: path)), width: 30, height: nil)
        let first = try await pipeline.image(for: request)
        let firstAgain = try await pipeline.image(for: request)
        #expect(first.wasMade && !firstAgain.wasMade)
        // A new version, published by rename as ContentSync does.
        try colouredImage(width: 300, height: 150, rgb: (0, 0, 255), format: "jpeg")
            .write(to: URL(fileURLWithPath: path + ".new"))
        #expect(rename(path + ".new", path) == 0)
        let second = try await pipeline.image(for: request)
        #expect(second.wasMade && second.key != first.key)
        #expect(try dimensions(second.data) == (30, 15, "jpeg"))
        let variants = try await pipeline.loader.items(matching: ItemQuery().context(ImagePipeline.variantContext))
        #expect(variants.map(\.key) == [second.key])
        // Nothing of the file is copied into the cache: only its variants.
        #expect(try await pipeline.loader.count(matching: ItemQuery()) == 1)
    }

    @Test(
        "a mirrored file is checked in pieces as a fetched original is whole; a FIFO is refused without blocking",
        .timeLimit(.minutes(3)),
        arguments: [
            "truncated-jpeg", "truncated-png", "png-crc", "png-ihdr", "pixel-bomb", "over-bytes", "fifo", "missing",
        ])
    func hostileFiles(kind: String) async throws {
        let fixture = try PipelineFixture(kind)
        let folder = fixture.folder + "-files"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/image"
        switch kind {
        case "fifo": #expect(mkfifo(path, 0o600) == 0)
        case "missing": break
        default: try hostileImage(kind).write(to: URL(fileURLWithPath: path))
        }
        let pipeline = try fixture.pipeline { $0.limits.maxBytes = 256 << 10 }
        let error = await #expect(throws: ImageCacheError.self) {
            try await pipeline.image(
                for: ImageRequest(source: .url(URL(fileURLWithPath: path)), width: 16, height: nil))
        }
        #expect(error?.code == (kind == "missing" ? .cache : .refused))
        #expect(error?.message.contains(path) == true)
        #expect(try await pipeline.loader.count(matching: ItemQuery()) == 0)
    }

    @Test("a whole file with bytes after its end, and a large noisy one, are accepted from a mirrored folder")
    func wholeFiles() async throws {
        let fixture = try PipelineFixture()
        let folder = fixture.folder + "-whole"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let jpeg = try noisyImage(width: 700, height: 500, format: "jpeg") + Data(repeating: 0, count: 4096)
        try jpeg.write(to: URL(fileURLWithPath: folder + "/a.jpg"))
        let png = try noisyImage(width: 300, height: 200, format: "png")
        try png.write(to: URL(fileURLWithPath: folder + "/b.png"))
        let pipeline = try fixture.pipeline()
        let a = try await pipeline.image(
            for: ImageRequest(source: .url(URL(fileURLWithPath: folder + "/a.jpg")), width: 70, height: nil))
        #expect(a.metadata.width == 70 && a.metadata.height == 50 && a.original.bytes == Int64(jpeg.count))
        let b = try await pipeline.image(
            for: ImageRequest(source: .url(URL(fileURLWithPath: folder + "/b.png")), width: 30, height: nil))
        #expect(b.metadata.height == 20)
        // The digest is the content's, as if it had been read whole.
        #expect(a.original.sha256 == FileDigest.sha256(jpeg))
    }

    @Test("requests that cannot be made are refused before any fetch")
    func badRequests() async throws {
        let fixture = try PipelineFixture()
        let pipeline = try fixture.pipeline()
        for request in [
            fixture.request("/a.jpg", nil, nil), fixture.request("/a.jpg", 0, 10),
            fixture.request("/a.jpg", 99_999, nil),
        ] {
            let error = await #expect(throws: ImageCacheError.self) { try await pipeline.image(for: request) }
            #expect(error?.code == .configuration)
        }
        var quality = fixture.request("/a.jpg", 10, nil)
        quality.quality = 101
        await #expect(throws: ImageCacheError.self) { try await pipeline.image(for: quality) }
        #expect(fixture.origin.requestCount(forPath: "/a.jpg") == 0)
    }
}

/// Input a hostile or careless origin serves.
func hostileImage(_ kind: String) throws -> Data {
    switch kind {
    case "svg": return Data(#"<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"></svg>"#.utf8)
    case "html": return Data("<!doctype html><html><body>Not found</body></html>".utf8)
    case "empty": return Data()
    case "noise": return Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) })
    case "truncated-jpeg":
        let jpeg = try noisyImage(width: 256, height: 256, format: "jpeg")
        return jpeg.prefix(jpeg.count / 2)
    case "truncated-png":
        let png = try noisyImage(width: 256, height: 256, format: "png")
        return png.prefix(png.count / 2)
    case "png-crc":
        // One bit of the pixel data flipped: every chunk length still right, one CRC wrong.
        var png = try noisyImage(width: 128, height: 128, format: "png")
        png[png.count / 2] ^= 0x10
        return png
    case "png-ihdr":
        // A width of 0 in IHDR, its CRC made right: a bad header, not a bad checksum.
        var bytes = [UInt8](try noisyImage(width: 32, height: 32, format: "png"))
        bytes.replaceSubrange(16..<20, with: [0, 0, 0, 0])
        let crc = crc32(Array(bytes[12..<29]))
        bytes.replaceSubrange(29..<33, with: withUnsafeBytes(of: crc.bigEndian, Array.init))
        return Data(bytes)
    case "jpeg-marker":
        // The first quantization table's marker (FF DB) turned into an undefined one (FF 02).
        var jpeg = try noisyImage(width: 64, height: 64, format: "jpeg")
        let index = try #require(jpeg.indices.dropLast().first { jpeg[$0] == 0xFF && jpeg[$0 + 1] == 0xDB })
        jpeg[index + 1] = 0x02
        return jpeg
    case "over-bytes":
        // A whole, valid PNG of about 400 KiB against a 256 KiB limit.
        return try noisyImage(width: 400, height: 400, format: "png")
    case "pdf": return Data("%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n".utf8)
    case "pixel-bomb":
        // A PNG header claiming 100000×100000 pixels, with no pixel data worth the name.
        return pngHeaderOnly(width: 100_000, height: 100_000)
    case "progressive-bomb":
        // Within the plain limit, over the (lowered) progressive one.
        return try progressiveJPEG(width: 1200, height: 1000)
    default: throw ImageCacheError(code: .configuration, message: "no hostile image \(kind)")
    }
}

@Suite("ImagePipeline: variants of a stored original are made from its file")
struct StoredOriginalTests {
    @Test("a new size of a stored original is made from its descriptor, with the same pixels as from memory")
    func fromDescriptor() async throws {
        let fixture = try PipelineFixture()
        let jpeg = try noisyImage(width: 900, height: 600, format: "jpeg")
        #expect(jpeg.count > 64 << 10) // Kept in a file, not inside the index.
        fixture.serve("/noisy.jpg", jpeg)
        _ = try await fixture.pipeline().image(for: fixture.request("/noisy.jpg", 300, nil))
        // A restart: nothing in memory; the original is read from its file.
        let pipeline = try fixture.pipeline()
        let made = try await pipeline.image(for: fixture.request("/noisy.jpg", 150, nil))
        #expect(made.wasMade && made.originalSource == .disk)
        #expect(try dimensions(made.data) == (150, 100, "jpeg"))
        var request = ResizeRequest(width: 150, height: nil, format: .jpeg)
        request.mode = .fit
        let fromMemory = try ImageProcessor.resize(jpeg, source: "noisy", request: request)
        #expect(fromMemory.data == made.data)
        #expect(fixture.origin.requestCount(forPath: "/noisy.jpg") == 1)
    }

    @Test("the processor reads a descriptor from its start, however far it was read before")
    func descriptorInput() throws {
        let png = try noisyImage(width: 120, height: 80, format: "png")
        let path = NSTemporaryDirectory() + "descriptor-\(UUID().uuidString).png"
        try png.write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let descriptor = open(path, O_RDONLY)
        #expect(descriptor >= 0)
        defer { close(descriptor) }
        _ = lseek(descriptor, 50, SEEK_SET)
        let header = try ImageProbe.header(of: .descriptor(descriptor), source: path)
        #expect(header.width == 120 && header.height == 80 && header.format == "png")
        let request = ResizeRequest(width: 60, height: nil, format: .png)
        let fromFile = try ImageProcessor.resize(.descriptor(descriptor), source: path, request: request)
        let fromMemory = try ImageProcessor.resize(png, source: path, request: request)
        #expect(fromFile.data == fromMemory.data && fromFile.width == 60 && fromFile.height == 40)
    }
}

@Suite("ImagePipeline: pixels for an app's own toolkit, and ISCache's states")
struct PixelsAndStatesTests {
    @Test("a variant as RGBA8: its size, stride, opaque alpha and colour; kept decoded in memory")
    func pixels() async throws {
        let fixture = try PipelineFixture()
        fixture.serve(
            "/c.png", try colouredImage(width: 80, height: 40, rgb: (10, 200, 30), format: "png"),
            contentType: "image/png")
        let pipeline = try fixture.pipeline { $0.decodedMemoryLimit = 1 << 20 }
        let request = fixture.request("/c.png", 20, nil)
        let pixels = try await pipeline.pixels(for: request)
        #expect(pixels.width == 20 && pixels.height == 10 && pixels.stride == 80)
        #expect(pixels.bytes.count == 20 * 10 * 4)
        #expect(Array(pixels.bytes.prefix(4)) == [10, 200, 30, 255])
        #expect(pipeline.decoded.bytes == 800)
        #expect(try await pipeline.pixels(for: request) == pixels)
        // Alpha is kept (PNG out): a transparent source stays transparent.
        fixture.serve(
            "/t.png", try colouredImage(width: 8, height: 8, rgb: (0, 0, 0), alpha: 0, format: "png"),
            contentType: "image/png")
        let clear = try await pipeline.pixels(for: fixture.request("/t.png", 4, nil))
        #expect(clear.bytes[3] == 0)
    }

    @Test("the decoded tier keeps its byte limit, least recently used out")
    func decodedLimit() {
        let tier = DecodedTier(limit: 1000)
        let pixels = { (byte: UInt8) in
            ImagePixels(width: 10, height: 10, stride: 40, bytes: Data(repeating: byte, count: 400))
        }
        tier.insert(pixels(1), for: "a")
        tier.insert(pixels(2), for: "b")
        _ = tier.value(for: "a")
        tier.insert(pixels(3), for: "c")
        #expect(tier.value(for: "b") == nil && tier.value(for: "a") != nil && tier.value(for: "c") != nil)
        #expect(tier.bytes == 800)
        tier.insert(ImagePixels(width: 1, height: 1, stride: 4, bytes: Data(count: 2000)), for: "huge")
        #expect(tier.value(for: "huge") == nil && tier.bytes == 800)
    }

    @Test("states: notFound, then found once made; an observer sees the variant found", .timeLimit(.minutes(3)))
    func states() async throws {
        let fixture = try PipelineFixture()
        fixture.serve("/s.jpg", try colouredImage(width: 300, height: 200, rgb: (1, 2, 3), format: "jpeg"))
        let pipeline = try fixture.pipeline()
        let request = fixture.request("/s.jpg", 30, nil)
        #expect(await pipeline.state(for: request) == .notFound)
        var states = pipeline.states(for: request).makeAsyncIterator()
        #expect(await states.next() == .notFound)
        let load = Task { try await pipeline.image(for: request) }
        var seen: [ItemState] = []
        while let state = await states.next() {
            seen.append(state)
            if state == .found { break }
        }
        _ = try await load.value
        #expect(seen.last == .found)
        #expect(await pipeline.state(for: request) == .found)
        // Another size of the same original: not made yet.
        #expect(await pipeline.state(for: fixture.request("/s.jpg", 31, nil)) == .notFound)
        #expect(fixture.origin.requestCount(forPath: "/s.jpg") == 1)
    }
}

/// An app's own storage: every call counted, then passed to an ``ItemStore`` (the kind of
/// wrapper an app writes to trace or to share a cache); not an ``ItemStore`` itself.
final class CountingStorage: ImageStorage {
    let inner: ItemStore
    let calls = Mutex<[String: Int]>([:])

    init(_ inner: ItemStore) { self.inner = inner }

    func count(_ name: String) { calls.withLock { $0[name, default: 0] += 1 } }
    func seen(_ name: String) -> Int { calls.withLock { $0[name] ?? 0 } }

    var clock: any CacheClock { inner.configuration.clock }
    var sharedLockFile: RangeLockFile? { inner.sharedLockFile }
    func item(for key: CacheKey) async throws(ItemCacheError) -> StoredItem? {
        count("item")
        return try await inner.item(for: key)
    }
    @available(*, noasync)
    func itemNow(for key: CacheKey) throws(ItemCacheError) -> StoredItem? { try inner.itemNow(for: key) }
    func store(_ data: Data, for key: CacheKey, options: StoreOptions) async throws(ItemCacheError) -> CachedItem {
        count("store")
        return try await inner.store(data, for: key, options: options)
    }
    func refresh(_ key: CacheKey, expires: Date?, mustRevalidate: Bool, etag: String?, lastModified: String?)
        async throws(ItemCacheError) -> CachedItem?
    {
        try await inner.refresh(
            key, expires: expires, mustRevalidate: mustRevalidate, etag: etag, lastModified: lastModified)
    }
    func removeItem(for key: CacheKey) async throws(ItemCacheError) -> Bool {
        count("remove")
        return try await inner.removeItem(for: key)
    }
    func info(for key: CacheKey) async throws(ItemCacheError) -> ItemInfo? {
        count("info")
        return try await inner.info(for: key)
    }
    func withValue<T: Sendable>(for key: CacheKey, _ body: @escaping @Sendable (borrowing StoredValue) throws -> T)
        async throws -> T?
    {
        count("withValue")
        return try await inner.withValue(for: key, body)
    }
    func items(matching query: ItemQuery) async throws(ItemCacheError) -> [ItemSummary] {
        count("items")
        return try await inner.items(matching: query)
    }
    func addToCounters(_ amounts: [String: Int64]) async throws(ItemCacheError) {
        count("addToCounters")
        try await inner.addToCounters(amounts)
    }
    func counters() async throws(ItemCacheError) -> [String: Int64] { try await inner.counters() }
}

@Suite("ImagePipeline on an app's own ImageStorage")
struct ImageStorageTests {
    @Test("a pipeline works through the ImageStorage protocol: originals and variants go through the app's storage")
    func aStorageOfTheAppsOwn() async throws {
        let fixture = try PipelineFixture()
        fixture.serve("/own.jpg", try colouredImage(width: 320, height: 200, rgb: (20, 120, 220), format: "jpeg"))
        let storage = CountingStorage(try ItemStore(configuration: CacheConfiguration(folder: fixture.folder)))
        let loader = ItemLoader(
            store: storage, configuration: CacheConfiguration(folder: fixture.folder), transport: fixture.transport)
        let pipeline = try ImagePipeline(loader: loader)
        #expect(pipeline.store == nil, "not an ItemStore")
        let made = try await pipeline.image(for: fixture.request("/own.jpg", 80, nil))
        #expect(try dimensions(made.data).width == 80)
        #expect(storage.seen("store") >= 2, "the original and the variant were stored through it")
        // A second pipeline on the same storage: the variant comes back from it, with no request.
        let again = try await ImagePipeline(loader: loader).image(for: fixture.request("/own.jpg", 80, nil))
        #expect(again.data == made.data)
        #expect(storage.seen("info") + storage.seen("item") >= 2)
        #expect(fixture.origin.requestCount(forPath: "/own.jpg") == 1)
        try await pipeline.recordCounts()
        #expect(storage.seen("addToCounters") == 1)
        #expect(try await ImagePipeline.storedCounts(in: storage).made == 1)
    }
}
