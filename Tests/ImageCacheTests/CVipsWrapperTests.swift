import CVips
import Foundation
import Testing

@testable import ImageCache

/// Each wrapper of the CVips shim, on real libvips, and the header probe on top of them.
@Suite("libvips through CVips: start-up, loaders allowed and refused, headers and limits")
struct CVipsWrapperTests {
    @Test("starts once; other options later are refused, the same ones accepted")
    func startOnce() throws {
        try VipsRuntime.start()
        try VipsRuntime.start(VipsRuntime.Options())
        var other = VipsRuntime.Options()
        other.allowsVectorFormats = true
        #expect(throws: ImageCacheError.self) { try VipsRuntime.start(other) }
        #expect(VipsRuntime.version.hasPrefix("8."))
        #expect(cvips_version(0) == 8 && cvips_version(1) >= 13)
    }

    @Test("JPEG and PNG made by libvips read back with their size, bands and format")
    func headers() throws {
        let jpeg = try testImage(width: 64, height: 48, format: "jpeg")
        #expect(jpeg.starts(with: [0xFF, 0xD8]))
        let jpegHeader = try ImageProbe.header(of: jpeg, source: "a.jpg")
        #expect(jpegHeader == ImageHeader(format: "jpeg", width: 64, height: 48, bands: 3, pages: 1))
        let png = try testImage(width: 10, height: 20, bands: 4, format: "png")
        let pngHeader = try ImageProbe.header(of: png, source: "a.png")
        #expect(pngHeader == ImageHeader(format: "png", width: 10, height: 20, bands: 4, pages: 1))
        // The bytes decide, not a name: the loader for PNG bytes is the PNG loader.
        let loader = png.withUnsafeBytes {
            cvips_find_load_buffer($0.baseAddress, $0.count).map { String(cString: $0) }
        }
        #expect(loader?.hasPrefix("VipsForeignLoadPng") == true)
    }

    @Test(
        "what is not an allowed image is refused by name",
        arguments: [
            ("empty", Data()),
            ("svg", Data(#"<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"></svg>"#.utf8)),
            ("html", Data("<!doctype html><html><body>not an image</body></html>".utf8)),
            ("matrix", Data("2 2\n0 0\n0 0\n".utf8)),
            ("noise", Data((0..<512).map { UInt8(truncatingIfNeeded: $0 &* 97 &+ 13) })),
            ("pdf", Data("%PDF-1.4\n1 0 obj << >> endobj\ntrailer << >>\n%%EOF\n".utf8)),
        ])
    func refused(name: String, data: Data) {
        let error = #expect(throws: ImageCacheError.self) { try ImageProbe.header(of: data, source: "input.\(name)") }
        #expect(error?.code == .refused)
        #expect(error?.message.contains("input.\(name)") == true)
    }

    @Test("the pixel and byte limits are held from the header")
    func limits() throws {
        let png = try testImage(width: 100, height: 100, format: "png")
        var limits = ImageLimits()
        limits.maxPixels = 5_000
        let error = #expect(throws: ImageCacheError.self) {
            try ImageProbe.header(of: png, source: "big.png", limits: limits)
        }
        #expect(error?.message.contains("100×100") == true)
        limits = ImageLimits()
        limits.maxBytes = 16
        #expect(throws: ImageCacheError.self) { try ImageProbe.header(of: png, source: "big.png", limits: limits) }
        #expect(try ImageProbe.header(of: png, source: "ok.png").width == 100)
    }

    @Test("a loader's class name gives the format")
    func formatNames() {
        #expect(ImageProbe.format(ofLoader: "VipsForeignLoadJpegBuffer") == "jpeg")
        #expect(ImageProbe.format(ofLoader: "VipsForeignLoadPngBuffer") == "png")
        #expect(ImageProbe.format(ofLoader: "VipsForeignLoadNsgifBuffer") == "gif")
        #expect(ImageProbe.format(ofLoader: "VipsForeignLoadWebpSource") == "webp")
    }
}
