import Foundation
import ItemCache
import Testing

@testable import ImageCache

/// Variant keys: one output, one key; any change of the output, a new key.
@Suite("Variant keys")
struct VariantKeyTests {
    static let original = try! CacheKey(url: URL(string: "https://example.com/a.jpg")!)

    static func key(_ change: (inout ResizeRequest) -> Void = { _ in }, digest: String = "d1", pipeline: String = "p1")
        throws -> CacheKey
    {
        var request = ResizeRequest(width: 720, height: nil, format: .jpeg)
        change(&request)
        return try VariantKey.key(original: original, digest: digest, request: request, pipeline: pipeline)
    }

    @Test("the same output shares a key; a default written out is the default")
    func sameOutput() throws {
        #expect(try Self.key() == Self.key())
        #expect(try Self.key { $0.quality = 80 } == Self.key())
        // PNG has no quality and keeps alpha: neither changes its output.
        let png = { (request: inout ResizeRequest) in request.format = .png }
        #expect(
            try Self.key {
                png(&$0)
                $0.quality = 30
            } == Self.key(png))
        #expect(
            try Self.key {
                png(&$0)
                $0.background = (0, 0, 0)
            } == Self.key(png))
    }

    @Test("every field that changes the output changes the key")
    func distinctOutputs() throws {
        let changes: [(String, (inout ResizeRequest) -> Void)] = [
            ("width", { $0.width = 721 }), ("height", { $0.height = 480 }), ("mode", { $0.mode = .fill }),
            ("smart", { $0.mode = .smartFill }), ("force", { $0.mode = .force }), ("format", { $0.format = .webp }),
            ("quality", { $0.quality = 60 }), ("upscale", { $0.upscale = true }),
            ("background", { $0.background = (0, 0, 0) }),
        ]
        var keys = Set([try Self.key().rawValue])
        for (name, change) in changes {
            let key = try Self.key(change).rawValue
            #expect(!keys.contains(key), "\(name) did not change the key")
            keys.insert(key)
        }
        #expect(try Self.key(digest: "d2") != Self.key())
        #expect(try Self.key(pipeline: "p2") != Self.key())
        #expect(try Self.key().context == "image-variant")
    }

    @Test("the pipeline version names libvips' version")
    func pipelineVersion() throws {
        try VipsRuntime.start()
        #expect(VariantKey.pipelineVersion.hasPrefix("vips8."))
    }
}
