import CVips
import Foundation
import Testing

@testable import ImageCache

/// A constant-colour image of this size (RGB, or RGBA with `alpha`), saved as `format`;
/// `orientation` sets EXIF orientation (JPEG only).
func colouredImage(
    width: Int, height: Int, rgb: (Double, Double, Double), alpha: Double? = nil, format: String,
    orientation: Int? = nil
) throws -> Data {
    try VipsRuntime.start()
    var image: UnsafeMutablePointer<VipsImage>?
    guard
        cvips_constant(&image, Int32(width), Int32(height), rgb.0, rgb.1, rgb.2, alpha ?? 255, alpha == nil ? 3 : 4)
            == 0, let image
    else { throw ImageCacheError(code: .processing, message: VipsRuntime.takeError()) }
    defer { cvips_unref(image) }
    var buffer: UnsafeMutableRawPointer?
    var length = 0
    if let orientation { cvips_image_set_int(image, "orientation", Int32(orientation)) }
    let status =
        format == "jpeg"
        ? (orientation != nil
            ? cvips_jpegsave_buffer_keep(image, &buffer, &length, 90)
            : cvips_jpegsave_buffer(image, &buffer, &length, 90))
        : cvips_pngsave_buffer(image, &buffer, &length)
    guard status == 0, let buffer else { throw ImageCacheError(code: .processing, message: VipsRuntime.takeError()) }
    defer { cvips_free(buffer) }
    return Data(bytes: buffer, count: length)
}

/// The first pixel of an encoded image, band by band.
func firstPixel(_ data: Data) throws -> [Double] {
    try data.withUnsafeBytes { raw in
        guard let image = cvips_image_new_from_buffer(raw.baseAddress, raw.count, 1) else {
            throw ImageCacheError(code: .processing, message: VipsRuntime.takeError())
        }
        defer { cvips_unref(image) }
        var values = [Double](repeating: -1, count: 4)
        let count = cvips_getpoint(image, 0, 0, &values, 4)
        guard count > 0 else { throw ImageCacheError(code: .processing, message: VipsRuntime.takeError()) }
        return Array(values.prefix(Int(count)))
    }
}

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
