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
                    throw VipsRuntime.failure(.processing, "cannot read \(source)")
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
        if let damage = ImageStructure.damage(of: MemoryBytes(raw: raw), format: header.format) {
            throw ImageCacheError(code: .refused, message: "\(source) \(damage)")
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
            // libvips gives no text for some headers it refuses (a PNG 0 or 2^31 pixels wide).
            throw VipsRuntime.failure(
                .refused, "\(source) is a damaged image",
                emptyText:
                    "its \(Self.format(ofLoader: loader).uppercased()) header cannot be read (a size of 0, or past libvips' limits)"
            )
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

/// Bytes an integrity check reads, wherever they are: in memory (a fetched body) or in an open
/// file (a mirrored folder's), read a piece at a time so a large file is never held whole.
protocol ImageBytes {
    /// How many bytes there are.
    var size: Int64 { get }
    /// Calls `body` with up to `count` bytes at `offset` (fewer at the end; none past it).
    func withBytes<T>(at offset: Int64, count: Int, _ body: (UnsafeRawBufferPointer) -> T) -> T
}

/// Bytes in memory: pieces are slices, never copies.
struct MemoryBytes: ImageBytes {
    let raw: UnsafeRawBufferPointer
    var size: Int64 { Int64(raw.count) }

    func withBytes<T>(at offset: Int64, count: Int, _ body: (UnsafeRawBufferPointer) -> T) -> T {
        let start = Int(min(max(0, offset), size))
        let end = start + min(max(0, count), raw.count - start)
        return body(UnsafeRawBufferPointer(rebasing: raw[start..<end]))
    }
}

extension ImageBytes {
    /// Up to `count` bytes at `offset`, copied.
    func bytes(at offset: Int64, count: Int) -> [UInt8] { withBytes(at: offset, count: count) { Array($0) } }

    /// The big-endian 32-bit value at `offset`, nil past the end.
    func uint32(at offset: Int64) -> UInt32? {
        let bytes = bytes(at: offset, count: 4)
        return bytes.count == 4 ? bytes.reduce(0) { $0 << 8 | UInt32($1) } : nil
    }
}

/// A format's own integrity checks, which libvips does not make every time: what follows
/// "`<source>` " in a refusal, or nil.
enum ImageStructure {
    static func damage(of bytes: some ImageBytes, format: String) -> String? {
        switch format {
        case "jpeg":
            JPEGStructure.hasEndAfterScan(bytes)
                ? nil
                : "is a JPEG cut short: no end-of-image marker follows its scan data (a truncated download or file); fetch it whole"
        case "png": PNGStructure.damage(bytes).map { "is a damaged PNG: \($0); fetch it whole or fix the file" }
        default: nil
        }
    }
}

/// What libjpeg only warns about: a JPEG whose data stops before its end. libjpeg fills the
/// rest grey and reports "premature end of data" as a warning, which `fail_on=error` lets
/// through, while `fail_on=warning` would also refuse a damaged EXIF block, which is harmless.
enum JPEGStructure {
    /// How far from its end a JPEG's end marker is looked for: bytes appended after it (a
    /// camera's trailer) up to this much are allowed.
    static let tail = 1 << 20

    /// Whether an end-of-image marker (`FF D9`) follows the first start-of-scan (`FF DA`)
    /// within the last ``tail`` bytes. The segments before the scan are skipped by their
    /// lengths (an EXIF thumbnail's own end marker does not count); in scan data every `FF` is
    /// stuffed (`FF 00`) or a restart marker (`FF D0`–`FF D7`), so the pair cannot occur there
    /// by chance.
    static func hasEndAfterScan(_ bytes: some ImageBytes) -> Bool {
        var offset: Int64 = 2 // After SOI.
        var scan: Int64?
        while offset + 4 <= bytes.size {
            let head = bytes.bytes(at: offset, count: 4)
            guard head[0] == 0xFF else {
                // Stray bytes between segments: on to the next FF, a window at a time.
                let window = 1 << 16
                offset += Int64(bytes.withBytes(at: offset, count: window) { $0.firstIndex(of: 0xFF) } ?? window)
                continue
            }
            let marker = head[1]
            if marker == 0xDA {
                scan = offset + 2
                break
            }
            // A marker without a length (fill, SOI, restart, TEM and reserved ones): step over it.
            if marker == 0xFF || marker == 0xD8 || (0xD0...0xD7).contains(marker) || marker < 0xC0 {
                offset += marker == 0xFF ? 1 : 2
                continue
            }
            let length = Int64(head[2]) << 8 | Int64(head[3])
            guard length >= 2 else { return false }
            offset += 2 + length
        }
        guard let scan else { return false }
        let start = max(scan, bytes.size - Int64(tail))
        return bytes.withBytes(at: start, count: Int(bytes.size - start)) { tail in
            tail.indices.dropLast().contains { tail[$0] == 0xFF && tail[$0 + 1] == 0xD9 }
        }
    }

    /// ``hasEndAfterScan(_:)`` of `data`.
    static func hasEndAfterScan(_ data: Data) -> Bool {
        data.withUnsafeBytes { hasEndAfterScan(MemoryBytes(raw: $0)) }
    }
}

/// A PNG's own integrity checks, every time: libvips' PNG loader lets a file cut short (or a
/// chunk whose CRC is wrong, depending on thread timing) through as a partly grey image.
enum PNGStructure {
    /// What is wrong with the PNG in `bytes`, or nil when its chunks are whole: the signature,
    /// each chunk's length within the file and its CRC-32 (read a megabyte at a time), IHDR
    /// first (13 bytes), and an IEND (bytes after it are allowed).
    static func damage(_ bytes: some ImageBytes) -> String? {
        let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        guard bytes.bytes(at: 0, count: 8) == signature else { return "no PNG signature" }
        var offset: Int64 = 8
        var first = true
        while true {
            guard offset + 12 <= bytes.size, let length = bytes.uint32(at: offset).map(Int64.init) else {
                return "it ends before its IEND chunk (cut short)"
            }
            guard length <= 0x7FFF_FFFF, length <= bytes.size - offset - 12 else {
                return "a chunk at byte \(offset) claims \(length) bytes, past the end (cut short)"
            }
            let type = bytes.bytes(at: offset + 4, count: 4)
            guard type.allSatisfy({ (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }) else {
                return "the chunk at byte \(offset) has no valid type"
            }
            let name = String(decoding: type, as: UTF8.self)
            if first {
                guard name == "IHDR", length == 13 else { return "its first chunk is not a 13-byte IHDR" }
                first = false
            }
            // The CRC covers the type and the data.
            var crc = CRC32.start
            var covered: Int64 = 0
            while covered < 4 + length {
                let piece = Int(min(4 + length - covered, 1 << 20))
                crc = bytes.withBytes(at: offset + 4 + covered, count: piece) { CRC32.update(crc, $0) }
                covered += Int64(piece)
            }
            guard bytes.uint32(at: offset + 8 + length) == ~crc else {
                return "the CRC of its \(name) chunk at byte \(offset) is wrong"
            }
            if name == "IEND" { return nil }
            offset += 12 + length
        }
    }

    static func damage(_ data: Data) -> String? { data.withUnsafeBytes { damage(MemoryBytes(raw: $0)) } }
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
