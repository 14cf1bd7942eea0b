internal import CVips
import Foundation

/// What an image's header says, read without decoding its pixels.
public struct ImageHeader: Sendable, Equatable {
    /// The format, by the bytes (never the Content-Type): `jpeg`, `png`, `webp`, `gif`, `heif`…
    public var format: String
    /// Width and height in pixels.
    public var width: Int, height: Int
    /// Bands (3 for RGB, 4 with alpha, 1 for grey).
    public var bands: Int
    /// Pages or frames (1 for a still image).
    public var pages: Int
    /// The EXIF orientation, 1–8 (1 when the image has none or a damaged one).
    public var orientation = 1
    /// Whether it is progressive (JPEG) or interlaced (PNG, GIF): decoding such an image holds
    /// all of it in memory at once.
    public var interlaced = false
}

/// The limits an untrusted image is held to before a pixel is decoded.
public struct ImageLimits: Sendable, Equatable {
    /// The most pixels, width × height × pages. Default 50 million (imgproxy's default).
    public var maxPixels = 50_000_000
    /// The largest source in bytes. Default 64 MiB.
    public var maxBytes = 64 << 20
    /// The most pixels of a progressive JPEG or an interlaced PNG, whose decoding holds every
    /// coefficient at once (a 49 MP progressive JPEG took 185–253 MB here, against 43 MB for a
    /// baseline one). Default 20 million.
    public var maxProgressivePixels = 20_000_000

    /// The defaults.
    public init() {}
}

/// Reads an image's header through libvips' allowed loaders and holds it to ``ImageLimits``.
public enum ImageProbe {
    /// The header of the image in `data`, named `source` in messages; throws
    /// ``ImageCacheError/Code/refused`` for anything not an allowed image or over the limits.
    public static func header(of data: Data, source: String, limits: ImageLimits = ImageLimits())
        throws(ImageCacheError) -> ImageHeader
    {
        try VipsRuntime.start()
        guard !data.isEmpty else {
            throw ImageCacheError(code: .refused, message: "\(source) is empty; it holds no image")
        }
        guard data.count <= limits.maxBytes else {
            throw ImageCacheError(
                code: .refused,
                message:
                    "\(source) is \(data.count) bytes, over the \(limits.maxBytes)-byte limit (ImageLimits.maxBytes)")
        }
        return try data.withUnsafeBytes { raw in
            Result { () throws(ImageCacheError) in try header(of: raw, source: source, limits: limits) }
        }.get()
    }

    /// The header of the image `input` holds. Bytes in memory get every check of
    /// ``header(of:source:limits:)``; a descriptor (a stored original, whose bytes were checked
    /// when they were fetched and whose checksum the item cache verifies on every read) gets
    /// the format, damage and limit checks of its header.
    public static func header(of input: ImageInput, source: String, limits: ImageLimits = ImageLimits())
        throws(ImageCacheError) -> ImageHeader
    {
        switch input {
        case .data(let data):
            return try header(of: data, source: source, limits: limits)
        case .descriptor(let descriptor):
            try VipsRuntime.start()
            var status = stat()
            guard fstat(descriptor, &status) == 0 else {
                throw ImageCacheError(
                    code: .processing, message: "cannot read \(source): \(String(cString: strerror(errno)))")
            }
            guard status.st_size <= limits.maxBytes else {
                throw ImageCacheError(
                    code: .refused,
                    message:
                        "\(source) is \(status.st_size) bytes, over the \(limits.maxBytes)-byte limit (ImageLimits.maxBytes)"
                )
            }
            return try VipsSources.with(input) {
                (make: () -> UnsafeMutablePointer<VipsSource>?) throws(ImageCacheError) -> ImageHeader in
                guard let vipsSource = make() else {
                    throw ImageCacheError(
                        code: .processing, message: "cannot read \(source): \(VipsRuntime.takeError())")
                }
                defer { cvips_source_unref(vipsSource) }
                let loader = cvips_find_load_source(vipsSource).map { String(cString: $0) }
                return try header(
                    loader: loader, source: source, limits: limits,
                    open: { cvips_image_new_from_source(vipsSource, 1) })
            }
        }
    }

    private static func header(of raw: UnsafeRawBufferPointer, source: String, limits: ImageLimits)
        throws(ImageCacheError) -> ImageHeader
    {
        let loader = cvips_find_load_buffer(raw.baseAddress, raw.count).map { String(cString: $0) }
        let header = try header(
            loader: loader, source: source, limits: limits,
            open: { cvips_image_new_from_buffer(raw.baseAddress, raw.count, 1) })
        if header.format == "png", let damage = PNGStructure.damage(raw) {
            throw ImageCacheError(
                code: .refused, message: "\(source) is a damaged PNG: \(damage); fetch it whole or fix the file")
        }
        if header.format == "jpeg", !JPEGStructure.hasEndAfterScan(raw) {
            throw ImageCacheError(
                code: .refused,
                message:
                    "\(source) is a JPEG cut short: no end-of-image marker follows its scan data (a truncated download or file); fetch it whole"
            )
        }
        return header
    }

    /// The header through `loader` (nil: none would open the bytes) and `open`, held to `limits`.
    private static func header(
        loader: String?, source: String, limits: ImageLimits, open: () -> UnsafeMutablePointer<VipsImage>?
    ) throws(ImageCacheError) -> ImageHeader {
        guard let loader else {
            _ = VipsRuntime.takeError()
            throw ImageCacheError(
                code: .refused,
                message:
                    "\(source) is not an image this cache accepts (JPEG, PNG, WebP or GIF, by its bytes; SVG, PDF and HEIF only when VipsRuntime.Options allow them)"
            )
        }
        guard VipsRuntime.allows(loader: loader) else {
            throw ImageCacheError(
                code: .refused,
                message:
                    "\(source) is \(Self.format(ofLoader: loader).uppercased()), not an image format this cache accepts (JPEG, PNG, WebP or GIF; SVG and PDF only with VipsRuntime.Options.allowsVectorFormats, HEIF with allowsHEIF)"
            )
        }
        guard let image = open() else {
            throw ImageCacheError(
                code: .refused, message: "\(source) is a damaged image: \(VipsRuntime.takeError())")
        }
        defer { cvips_unref(image) }
        let orientation = Int(cvips_image_get_int_or(image, "orientation", 1))
        let header = ImageHeader(
            format: Self.format(ofLoader: loader), width: Int(cvips_image_width(image)),
            height: Int(cvips_image_height(image)), bands: Int(cvips_image_bands(image)),
            pages: max(1, Int(cvips_image_pages(image))), orientation: (1...8).contains(orientation) ? orientation : 1,
            interlaced: cvips_image_get_int_or(image, "interlaced", 0) != 0)
        let pixels = header.width.multipliedReportingOverflow(by: header.height)
        let total = pixels.partialValue.multipliedReportingOverflow(by: header.pages)
        guard !pixels.overflow, !total.overflow, total.partialValue <= limits.maxPixels else {
            throw ImageCacheError(
                code: .refused,
                message:
                    "\(source) is \(header.width)×\(header.height) pixels × \(header.pages) pages, over the \(limits.maxPixels)-pixel limit (ImageLimits.maxPixels)"
            )
        }
        if header.interlaced, total.partialValue > limits.maxProgressivePixels {
            throw ImageCacheError(
                code: .refused,
                message:
                    "\(source) is a progressive or interlaced \(header.format) of \(header.width)×\(header.height) pixels, over the \(limits.maxProgressivePixels)-pixel limit for those (ImageLimits.maxProgressivePixels): decoding one holds all of it in memory"
            )
        }
        return header
    }

    /// `jpeg` for `VipsForeignLoadJpegBuffer`, and so on.
    static func format(ofLoader loader: String) -> String {
        var name = loader
        for prefix in ["VipsForeignLoad"] where name.hasPrefix(prefix) { name.removeFirst(prefix.count) }
        for suffix in ["Buffer", "Source", "File"] where name.hasSuffix(suffix) { name.removeLast(suffix.count) }
        return name == "Nsgif" ? "gif" : name.lowercased()
    }
}

/// What libjpeg only warns about: a JPEG whose data stops before its end. libjpeg fills the
/// rest grey and reports "premature end of data" as a warning, which `fail_on=error` lets
/// through, while `fail_on=warning` would also refuse a damaged EXIF block, which is harmless.
enum JPEGStructure {
    /// Whether an end-of-image marker (`FF D9`) follows the first start-of-scan (`FF DA`). In
    /// scan data every `FF` byte is stuffed (`FF 00`) or a restart marker (`FF D0`–`FF D7`),
    /// so the pair cannot occur by chance there; an EXIF thumbnail's own end marker comes
    /// before the scan and does not count. Bytes after the end (padding, appended data) are
    /// allowed.
    static func hasEndAfterScan(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count >= 4 else { return false }
        var index = 2 // After SOI.
        var sawScan = false
        while index + 1 < bytes.count {
            if bytes[index] == 0xFF {
                let marker = bytes[index + 1]
                if !sawScan {
                    if marker == 0xDA {
                        sawScan = true
                        index += 2
                        continue
                    }
                    // A segment with a length: skip its payload (an EXIF thumbnail's markers
                    // inside it are not the image's).
                    if marker >= 0xC0, marker != 0xD8, marker != 0xFF, !(0xD0...0xD7).contains(marker),
                        index + 3 < bytes.count
                    {
                        let length = Int(bytes[index + 2]) << 8 | Int(bytes[index + 3])
                        guard length >= 2 else { return false }
                        index += 2 + length
                        continue
                    }
                } else if marker == 0xD9 {
                    return true
                }
            }
            index += 1
        }
        return false
    }

    /// ``hasEndAfterScan(_:)`` of `data`.
    static func hasEndAfterScan(_ data: Data) -> Bool {
        data.withUnsafeBytes { hasEndAfterScan($0) }
    }
}

/// A PNG's own integrity checks, every time: libvips' PNG loader lets a file cut short (or a
/// chunk whose CRC is wrong, depending on thread timing) through as a partly grey image.
enum PNGStructure {
    /// What is wrong with the PNG in `bytes`, or nil when its chunks are whole: the signature,
    /// each chunk's length within the file and its CRC-32, IHDR first (13 bytes), and an IEND
    /// (bytes after it are allowed).
    static func damage(_ bytes: UnsafeRawBufferPointer) -> String? {
        let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        guard bytes.count >= 8, zip(bytes.prefix(8), signature).allSatisfy({ $0 == $1 }) else {
            return "no PNG signature"
        }
        var offset = 8
        var first = true
        while true {
            guard offset + 12 <= bytes.count else { return "it ends before its IEND chunk (cut short)" }
            let length = Int(readUInt32(bytes, offset))
            guard length <= 0x7FFF_FFFF, length <= bytes.count - offset - 12 else {
                return "a chunk at byte \(offset) claims \(length) bytes, past the end (cut short)"
            }
            let type = (0..<4).map { bytes[offset + 4 + $0] }
            guard type.allSatisfy({ (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }) else {
                return "the chunk at byte \(offset) has no valid type"
            }
            let name = String(decoding: type, as: UTF8.self)
            if first {
                guard name == "IHDR", length == 13 else { return "its first chunk is not a 13-byte IHDR" }
                first = false
            }
            let stored = readUInt32(bytes, offset + 8 + length)
            let computed = CRC32.checksum(UnsafeRawBufferPointer(rebasing: bytes[(offset + 4)..<(offset + 8 + length)]))
            guard stored == computed else { return "the CRC of its \(name) chunk at byte \(offset) is wrong" }
            if name == "IEND" { return nil }
            offset += 12 + length
        }
    }

    static func damage(_ data: Data) -> String? { data.withUnsafeBytes { damage($0) } }

    private static func readUInt32(_ bytes: UnsafeRawBufferPointer, _ offset: Int) -> UInt32 {
        (0..<4).reduce(0) { $0 << 8 | UInt32(bytes[offset + $1]) }
    }
}

/// CRC-32 (IEEE 802.3, as PNG and zlib use it), table-driven.
enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { index in
        var crc = UInt32(index)
        for _ in 0..<8 { crc = crc & 1 != 0 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        return crc
    }

    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        ~update(start, bytes)
    }

    /// The running value before any byte.
    static let start: UInt32 = 0xFFFF_FFFF

    /// The running value after `bytes` (the checksum is its complement).
    static func update(_ running: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
        var crc = running
        table.withUnsafeBufferPointer { table in
            for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        }
        return crc
    }
}
