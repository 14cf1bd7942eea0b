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

/// An RGB image painted by `colour(x, y)`, saved as JPEG (keeping `orientation` when given),
/// PNG, or a CMYK JPEG (`cmyk`).
func paintedImage(
    width: Int, height: Int, format: String, orientation: Int? = nil, colour: (Int, Int) -> (UInt8, UInt8, UInt8)
) throws -> Data {
    try VipsRuntime.start()
    var rows = Data(capacity: width * height * 3)
    for y in 0..<height {
        for x in 0..<width {
            let (r, g, b) = colour(x, y)
            rows.append(contentsOf: [r, g, b])
        }
    }
    var painted: UnsafeMutablePointer<VipsImage>?
    guard
        rows.withUnsafeBytes({
            cvips_image_new_from_memory_copy($0.baseAddress, $0.count, Int32(width), Int32(height), 3, &painted)
        }) == 0, var image = painted
    else { throw ImageCacheError(code: .processing, message: VipsRuntime.takeError()) }
    defer { cvips_unref(image) }
    if format == "cmyk" {
        var converted: UnsafeMutablePointer<VipsImage>?
        guard cvips_colourspace_cmyk(image, &converted) == 0, let converted else {
            throw ImageCacheError(code: .processing, message: VipsRuntime.takeError())
        }
        cvips_unref(image)
        image = converted
    }
    if let orientation { cvips_image_set_int(image, "orientation", Int32(orientation)) }
    var buffer: UnsafeMutableRawPointer?
    var length = 0
    let status =
        switch format {
        case "png": cvips_pngsave_buffer(image, &buffer, &length)
        case "jpeg" where orientation != nil: cvips_jpegsave_buffer_keep(image, &buffer, &length, 95)
        default: cvips_jpegsave_buffer_keep(image, &buffer, &length, 95)
        }
    guard status == 0, let buffer else { throw ImageCacheError(code: .processing, message: VipsRuntime.takeError()) }
    defer { cvips_free(buffer) }
    return Data(bytes: buffer, count: length)
}

/// The pixel at (`x`, `y`) of an encoded image, band by band.
func pixel(_ data: Data, x: Int, y: Int) throws -> [Double] {
    try data.withUnsafeBytes { raw in
        guard let image = cvips_image_new_from_buffer(raw.baseAddress, raw.count, 1) else {
            throw ImageCacheError(code: .processing, message: VipsRuntime.takeError())
        }
        defer { cvips_unref(image) }
        var values = [Double](repeating: -1, count: 4)
        let count = cvips_getpoint(image, Int32(x), Int32(y), &values, 4)
        guard count > 0 else { throw ImageCacheError(code: .processing, message: VipsRuntime.takeError()) }
        return Array(values.prefix(Int(count)))
    }
}

/// Whether `pixel` is within `tolerance` of `expected` on every band.
func near(_ pixel: [Double], _ expected: [Double], tolerance: Double = 40) -> Bool {
    pixel.count >= expected.count && zip(pixel, expected).allSatisfy { abs($0 - $1) <= tolerance }
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
