import CVips
import Foundation

@testable import ImageCache

// Test images made by libvips itself, and readers of what the resize made: every helper makes
// an image one way and saves it through `encode(_:as:)`.

/// How a test image is saved.
enum TestEncoding {
    /// JPEG at `quality`; `keepMetadata` keeps EXIF (orientation); `progressive` interlaces it.
    case jpeg(quality: Int32, keepMetadata: Bool = false, progressive: Bool = false)
    case png
}

/// libvips' last error as a test failure.
func vipsFailure() -> ImageCacheError { ImageCacheError(code: .processing, message: VipsRuntime.takeError()) }

/// The image `make` fills in, or a failure.
private func made(_ make: (inout UnsafeMutablePointer<VipsImage>?) -> Int32) throws -> UnsafeMutablePointer<VipsImage> {
    try VipsRuntime.start()
    var image: UnsafeMutablePointer<VipsImage>?
    guard make(&image) == 0, let image else { throw vipsFailure() }
    return image
}

/// `image` saved as `encoding` (the image is released).
private func encode(_ image: UnsafeMutablePointer<VipsImage>, as encoding: TestEncoding) throws -> Data {
    defer { cvips_unref(image) }
    var buffer: UnsafeMutableRawPointer?
    var length = 0
    let status =
        switch encoding {
        case .png: cvips_pngsave_buffer(image, &buffer, &length)
        case .jpeg(let quality, _, true): cvips_jpegsave_buffer_progressive(image, &buffer, &length, quality)
        case .jpeg(let quality, true, false): cvips_jpegsave_buffer_keep(image, &buffer, &length, quality)
        case .jpeg(let quality, false, false): cvips_jpegsave_buffer(image, &buffer, &length, quality)
        }
    guard status == 0, let buffer else { throw vipsFailure() }
    defer { cvips_free(buffer) }
    return Data(bytes: buffer, count: length)
}

/// An RGB image over `rows` (width × height × 3 bytes).
private func fromRows(_ rows: Data, width: Int, height: Int) throws -> UnsafeMutablePointer<VipsImage> {
    try made { image in
        rows.withUnsafeBytes {
            cvips_image_new_from_memory_copy($0.baseAddress, $0.count, Int32(width), Int32(height), 3, &image)
        }
    }
}

/// A black image of the size and bands, saved as `format` (JPEG at quality 80).
func testImage(width: Int, height: Int, bands: Int = 3, format: String) throws -> Data {
    let image = try made { cvips_black(&$0, Int32(width), Int32(height), Int32(bands)) }
    return try encode(image, as: format == "jpeg" ? .jpeg(quality: 80) : .png)
}

/// A constant-colour image of this size (RGB, or RGBA with `alpha`), saved as `format` (JPEG at
/// quality 90); `orientation` sets EXIF orientation (JPEG only).
func colouredImage(
    width: Int, height: Int, rgb: (Double, Double, Double), alpha: Double? = nil, format: String,
    orientation: Int? = nil
) throws -> Data {
    let image = try made {
        cvips_constant(&$0, Int32(width), Int32(height), rgb.0, rgb.1, rgb.2, alpha ?? 255, alpha == nil ? 3 : 4)
    }
    if let orientation { cvips_image_set_int(image, "orientation", Int32(orientation)) }
    return try encode(image, as: format == "jpeg" ? .jpeg(quality: 90, keepMetadata: orientation != nil) : .png)
}

/// An image whose pixels vary (so its encoding is long and a cut falls in the pixel data),
/// JPEG at quality 95 or PNG.
func noisyImage(width: Int, height: Int, format: String) throws -> Data {
    var rows = Data(capacity: width * height * 3)
    for y in 0..<height {
        for x in 0..<width {
            rows.append(contentsOf: [
                UInt8(truncatingIfNeeded: x &* y &+ x), UInt8(truncatingIfNeeded: y &* 7),
                UInt8(truncatingIfNeeded: x ^ y),
            ])
        }
    }
    return try encode(fromRows(rows, width: width, height: height), as: format == "jpeg" ? .jpeg(quality: 95) : .png)
}

/// A progressive JPEG of this size.
func progressiveJPEG(width: Int, height: Int) throws -> Data {
    let image = try made { cvips_black(&$0, Int32(width), Int32(height), 3) }
    return try encode(image, as: .jpeg(quality: 80, progressive: true))
}

/// An RGB image painted by `colour(x, y)`, saved as JPEG (quality 95, keeping `orientation`
/// when given), PNG, or a CMYK JPEG (`cmyk`).
func paintedImage(
    width: Int, height: Int, format: String, orientation: Int? = nil, colour: (Int, Int) -> (UInt8, UInt8, UInt8)
) throws -> Data {
    var rows = Data(capacity: width * height * 3)
    for y in 0..<height {
        for x in 0..<width {
            let (r, g, b) = colour(x, y)
            rows.append(contentsOf: [r, g, b])
        }
    }
    var image = try fromRows(rows, width: width, height: height)
    if format == "cmyk" {
        let rgb = image
        defer { cvips_unref(rgb) }
        image = try made { cvips_colourspace_cmyk(rgb, &$0) }
    }
    if let orientation { cvips_image_set_int(image, "orientation", Int32(orientation)) }
    return try encode(image, as: format == "png" ? .png : .jpeg(quality: 95, keepMetadata: true))
}

/// A PNG signature and an IHDR chunk (with its right CRC) claiming this size, then an IEND.
func pngHeaderOnly(width: Int, height: Int) -> Data {
    func chunk(_ type: String, _ payload: [UInt8]) -> [UInt8] {
        let body = Array(type.utf8) + payload
        let length = UInt32(payload.count)
        return withUnsafeBytes(of: length.bigEndian, Array.init) + body
            + withUnsafeBytes(of: crc32(body).bigEndian, Array.init)
    }
    let ihdr =
        withUnsafeBytes(of: UInt32(width).bigEndian, Array.init)
        + withUnsafeBytes(of: UInt32(height).bigEndian, Array.init)
        + [8, 2, 0, 0, 0]
    return Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", ihdr) + chunk("IEND", []))
}

/// The CRC-32 PNG chunks carry (``CRC32``, checked against its standard vector in
/// `ImageStructureTests`).
func crc32(_ bytes: [UInt8]) -> UInt32 { bytes.withUnsafeBytes { CRC32.checksum($0) } }

/// The pixel at (`x`, `y`) of an encoded image, band by band.
func pixel(_ data: Data, x: Int, y: Int) throws -> [Double] {
    try data.withUnsafeBytes { raw in
        guard let image = cvips_image_new_from_buffer(raw.baseAddress, raw.count, 1) else { throw vipsFailure() }
        defer { cvips_unref(image) }
        var values = [Double](repeating: -1, count: 4)
        let count = cvips_getpoint(image, Int32(x), Int32(y), &values, 4)
        guard count > 0 else { throw vipsFailure() }
        return Array(values.prefix(Int(count)))
    }
}

/// The first pixel of an encoded image, band by band.
func firstPixel(_ data: Data) throws -> [Double] { try pixel(data, x: 0, y: 0) }

/// Whether `pixel` is within `tolerance` of `expected` on every band.
func near(_ pixel: [Double], _ expected: [Double], tolerance: Double = 40) -> Bool {
    pixel.count >= expected.count && zip(pixel, expected).allSatisfy { abs($0 - $1) <= tolerance }
}
