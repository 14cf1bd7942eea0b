import CVips
import Foundation
import Testing

@testable import ImageCache

/// Resizes on real images, judged by their pixels: sizes per mode, no upscale by default,
/// EXIF orientation applied, alpha flattened onto white for JPEG.
@Suite("The libvips resize, by its pixels")
struct ImageProcessorTests {
    struct SizeRow: Sendable, CustomTestStringConvertible {
        var why: String
        var width: Int?, height: Int?
        var mode: ResizeMode = .fit
        var upscale = false
        var expected: (Int, Int)
        var testDescription: String { why }
    }

    static let rows: [SizeRow] = [
        SizeRow(why: "fit 400×300 into 100×100: 100×75", width: 100, height: 100, expected: (100, 75)),
        SizeRow(why: "fit by width only (100x): 100×75", width: 100, height: nil, expected: (100, 75)),
        SizeRow(why: "fit by height only (x60): 80×60", width: nil, height: 60, expected: (80, 60)),
        SizeRow(why: "fill 100×100: cropped to the box", width: 100, height: 100, mode: .fill, expected: (100, 100)),
        SizeRow(why: "smart fill 50×80", width: 50, height: 80, mode: .smartFill, expected: (50, 80)),
        SizeRow(why: "force 100×100: aspect changed", width: 100, height: 100, mode: .force, expected: (100, 100)),
        SizeRow(why: "never upscale: 800×600 box keeps 400×300", width: 800, height: 600, expected: (400, 300)),
        SizeRow(why: "upscale when asked", width: 800, height: 800, upscale: true, expected: (800, 600)),
    ]

    @Test("sizes per mode", arguments: rows)
    func sizes(row: SizeRow) throws {
        let source = try colouredImage(width: 400, height: 300, rgb: (200, 10, 10), format: "jpeg")
        var request = ResizeRequest(width: row.width, height: row.height, format: .png)
        request.mode = row.mode
        request.upscale = row.upscale
        let made = try ImageProcessor.resize(source, source: "a.jpg", request: request)
        #expect((made.width, made.height) == row.expected)
        let header = try ImageProbe.header(of: made.data, source: "out")
        #expect((header.width, header.height) == row.expected)
        #expect(header.format == "png")
    }

    @Test("EXIF orientation 6 is applied: a 400×300 source comes out portrait")
    func orientation() throws {
        let source = try colouredImage(width: 400, height: 300, rgb: (0, 0, 200), format: "jpeg", orientation: 6)
        let made = try ImageProcessor.resize(
            source, source: "rotated.jpg", request: ResizeRequest(width: 300, height: 300, format: .jpeg))
        #expect((made.width, made.height) == (225, 300))
    }

    @Test("alpha is flattened onto white for JPEG and kept for PNG")
    func alpha() throws {
        let transparent = try colouredImage(width: 40, height: 40, rgb: (0, 0, 0), alpha: 0, format: "png")
        let jpeg = try ImageProcessor.resize(
            transparent, source: "t.png", request: ResizeRequest(width: 20, height: 20, format: .jpeg))
        let pixel = try firstPixel(jpeg.data)
        #expect(pixel.count == 3 && pixel.allSatisfy { $0 > 245 }, "\(pixel)")
        let png = try ImageProcessor.resize(
            transparent, source: "t.png", request: ResizeRequest(width: 20, height: 20, format: .png))
        let kept = try firstPixel(png.data)
        #expect(kept.count == 4 && kept[3] < 10, "\(kept)")
    }

    @Test("a size with no positive side is refused")
    func badSize() throws {
        let source = try colouredImage(width: 10, height: 10, rgb: (1, 1, 1), format: "png")
        #expect(throws: ImageCacheError.self) {
            try ImageProcessor.resize(
                source, source: "s.png", request: ResizeRequest(width: nil, height: 0, format: .png))
        }
    }
}

@Suite("The libvips resize, by where its colours land")
struct ResizeGeometryTests {
    @Test("EXIF orientation 6: the stored top-left red corner lands top-right, upright")
    func orientedCorner() throws {
        let jpeg = try paintedImage(width: 400, height: 300, format: "jpeg", orientation: 6) { x, y in
            x < 100 && y < 100 ? (255, 0, 0) : (255, 255, 255)
        }
        for input in [ImageInput.data(jpeg)] {
            let made = try ImageProcessor.resize(
                input, source: "corner", request: ResizeRequest(width: 150, height: nil, format: .png))
            #expect(made.width == 150 && made.height == 200)
            #expect(near(try pixel(made.data, x: 140, y: 10), [255, 0, 0]))
            #expect(near(try pixel(made.data, x: 10, y: 10), [255, 255, 255]))
            #expect(near(try pixel(made.data, x: 140, y: 190), [255, 255, 255]))
        }
    }

    @Test("fill crops the centre: a red-left, blue-right strip keeps red at its left edge and blue at its right")
    func cropBox() throws {
        let png = try paintedImage(width: 400, height: 100, format: "png") { x, _ in
            x < 200 ? (255, 0, 0) : (0, 0, 255)
        }
        var request = ResizeRequest(width: 100, height: 100, format: .png)
        request.mode = .fill
        let made = try ImageProcessor.resize(png, source: "strip", request: request)
        #expect(made.width == 100 && made.height == 100)
        #expect(near(try pixel(made.data, x: 2, y: 50), [255, 0, 0]))
        #expect(near(try pixel(made.data, x: 97, y: 50), [0, 0, 255]))
        // Fit keeps the whole strip instead: 100×25.
        request.mode = .fit
        let fitted = try ImageProcessor.resize(png, source: "strip", request: request)
        #expect(fitted.width == 100 && fitted.height == 25)
        #expect(near(try pixel(fitted.data, x: 2, y: 12), [255, 0, 0]))
    }

    @Test("a CMYK JPEG comes out as sRGB with its colour")
    func cmyk() throws {
        let jpeg = try paintedImage(width: 200, height: 100, format: "cmyk") { _, _ in (30, 120, 200) }
        let header = try ImageProbe.header(of: jpeg, source: "cmyk")
        #expect(header.bands == 4)
        let made = try ImageProcessor.resize(
            jpeg, source: "cmyk", request: ResizeRequest(width: 50, height: nil, format: .jpeg))
        let colour = try pixel(made.data, x: 25, y: 12)
        #expect(colour.count == 3)
        #expect(near(colour, [30, 120, 200], tolerance: 45), "\(colour)")
    }
}

/// Inputs whose framing is whole but whose pixel data is not: libvips decodes them with only a
/// warning (a JPEG's rest filled grey, a PNG's black) unless asked to fail; and metadata that
/// one encoder's own `strip` keeps.
@Suite("Damaged pixel data is refused, and no encoder keeps the source's metadata")
struct ResizeIntegrityTests {
    /// A JPEG cut halfway through its scan data, with the end-of-image marker appended after
    /// the cut: the structure check passes, libjpeg warns "premature end of data segment".
    static func cutJPEG() throws -> Data {
        let whole = try noisyImage(width: 400, height: 300, format: "jpeg")
        let bytes = [UInt8](whole)
        let scan = try #require((0..<bytes.count - 1).first { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xDA })
        return Data(bytes[..<(scan + (bytes.count - scan) / 2)] + [0xFF, 0xD9])
    }

    /// A PNG whose IHDR claims twice the rows its image data holds (its CRC made right): every
    /// chunk is whole, the pixels stop halfway.
    static func shortPNG() throws -> Data {
        var bytes = [UInt8](try noisyImage(width: 96, height: 64, format: "png"))
        // IHDR: length at 8, type at 12, width at 16, height at 20, its CRC at 29.
        withUnsafeBytes(of: UInt32(128).bigEndian) { bytes.replaceSubrange(20..<24, with: $0) }
        withUnsafeBytes(of: crc32(Array(bytes[12..<29])).bigEndian) { bytes.replaceSubrange(29..<33, with: $0) }
        return Data(bytes)
    }

    @Test(
        "a JPEG cut mid-scan with an end marker after the cut, and a PNG whose rows stop short, are refused from memory and from a file",
        arguments: ["jpeg", "png"])
    func damagedPixelsAreRefused(format: String) throws {
        let damaged = format == "jpeg" ? try Self.cutJPEG() : try Self.shortPNG()
        // The framing is whole: only decoding finds the damage.
        let header = try ImageProbe.header(of: damaged, source: "framed")
        #expect(header.format == format)
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("damaged-\(UUID().uuidString)").path
        try damaged.write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let descriptor = open(path, O_RDONLY)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        for input in [ImageInput.data(damaged), .descriptor(descriptor)] {
            for size in [(1000, 1000), (50, 50)] {
                #expect {
                    _ = try ImageProcessor.resize(
                        input, source: "cut.\(format)",
                        request: ResizeRequest(width: size.0, height: size.1, format: .png))
                } throws: { error in
                    guard let error = error as? ImageCacheError else { return false }
                    return error.code == .refused && error.message.contains("cut.\(format)")
                }
            }
        }
        // The whole images they were made from are not refused.
        let whole = try noisyImage(width: 96, height: 64, format: format)
        _ = try ImageProcessor.resize(
            whole, source: "whole", request: ResizeRequest(width: 50, height: 50, format: .png))
    }

    @Test("no output format keeps the source's EXIF (libvips' WebP strip keeps it)", arguments: ImageFormat.allCases)
    func metadataIsStripped(format: ImageFormat) throws {
        // A libheif without an AV1 encoder has no AVIF to check (ImageFormat.isAVIFAvailable).
        guard format != .avif || ImageFormat.isAVIFAvailable else { return }
        let source = try colouredImage(width: 64, height: 48, rgb: (10, 200, 10), format: "jpeg", orientation: 3)
        // The source carries an EXIF block (its orientation).
        #expect(Self.holdsEXIF(source))
        let made = try ImageProcessor.resize(
            source, source: "exif.jpg", request: ResizeRequest(width: 32, height: nil, format: format))
        #expect(made.format == format)
        #expect(!Self.holdsEXIF(made.data), "\(format) output keeps an EXIF block")
        // What is left is still a whole image of that format and size (HEIF input is not
        // accepted by default, so AVIF is not read back).
        guard format != .avif else { return }
        let header = try ImageProbe.header(of: made.data, source: "out")
        #expect(header.format == format.rawValue && header.width == 32)
        #expect(try firstPixel(made.data).count >= 3)
    }

    /// Whether `data` holds an EXIF block as any of the formats carries one: JPEG's APP1
    /// `Exif\0\0`, WebP's `EXIF` chunk, PNG's `eXIf`, HEIF's `Exif` item.
    static func holdsEXIF(_ data: Data) -> Bool {
        ["Exif", "EXIF", "eXIf"].contains { data.range(of: Data($0.utf8)) != nil }
    }
}
