internal import CVips
import Foundation

/// How a source is fitted to the asked size.
public enum ResizeMode: String, Sendable, Equatable, CaseIterable {
    /// Within the box, aspect kept (the default).
    case fit
    /// Covers the box, aspect kept, the overflow cropped from the centre.
    case fill
    /// Covers the box, the overflow cropped where libvips' attention finds the subject.
    case smartFill
    /// Exactly the box, aspect changed; without `upscale`, a side of the box past the
    /// original's side keeps the original's.
    case force
}

/// An output format.
public enum ImageFormat: String, Sendable, Equatable, CaseIterable {
    /// JPEG: no alpha (flattened onto ``ResizeRequest/background``); quality 80 by default.
    case jpeg
    /// PNG: lossless, alpha kept.
    case png
    /// WebP: alpha kept; quality 80 by default.
    case webp
    /// AVIF (AV1 in HEIF, through libheif and libaom): alpha kept; quality 60 at a low encoder
    /// effort by default. See ``ImageFormat/isAVIFAvailable``.
    case avif

    /// The default quality: JPEG 80, WebP 80, AVIF 60 (PNG has none).
    var defaultQuality: Int { self == .avif ? 60 : 80 }

    /// The output format for a source of `format` when the request names none: the source's
    /// own for JPEG, PNG and WebP; PNG (which keeps alpha) for anything else.
    public static func defaultOutput(forSource format: String) -> ImageFormat {
        switch format {
        case "jpeg": .jpeg
        case "webp": .webp
        default: .png
        }
    }

    /// The MIME type.
    public var mimeType: String { "image/\(rawValue)" }

    /// The AVIF encoder effort (0 fastest – 9 smallest): 2, as a cache makes variants on demand.
    static let avifEffort: Int32 = 2

    /// Whether this libvips can encode AVIF: probed once by encoding a 16×16 image (Debian's
    /// libheif encodes AV1 through libaom; a build without an AV1 encoder cannot).
    public static let isAVIFAvailable: Bool = {
        guard (try? VipsRuntime.start()) != nil else { return false }
        var image: UnsafeMutablePointer<VipsImage>?
        guard cvips_black(&image, 16, 16, 3) == 0, let image else {
            _ = VipsRuntime.takeError()
            return false
        }
        defer { cvips_unref(image) }
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        guard cvips_avifsave_buffer(image, &buffer, &length, 60, avifEffort) == 0, let buffer else {
            _ = VipsRuntime.takeError()
            return false
        }
        cvips_free(buffer)
        return length > 0
    }()
}

/// One resize: the box, the mode, the format and quality, the upscale rule, the background that
/// alpha is flattened onto for formats without it.
public struct ResizeRequest: Sendable, Equatable {
    /// The box: a side of nil is free (`Wx`, `xH`). At least one is set.
    public var width: Int?, height: Int?
    /// How to fit the box. Default ``ResizeMode/fit``.
    public var mode: ResizeMode = .fit
    /// The output format.
    public var format: ImageFormat
    /// The quality, 1–100; nil for the format's default.
    public var quality: Int?
    /// Whether a source smaller than the box is enlarged. Default false: never upscale.
    public var upscale = false
    /// The colour alpha is flattened onto for JPEG, 0–255 a channel. Default white.
    public var background: (red: Double, green: Double, blue: Double) = (255, 255, 255)

    /// A resize to `width` × `height` (either may be nil) in `format`.
    public init(width: Int?, height: Int?, format: ImageFormat) {
        (self.width, self.height, self.format) = (width, height, format)
    }

    public static func == (lhs: ResizeRequest, rhs: ResizeRequest) -> Bool {
        lhs.width == rhs.width && lhs.height == rhs.height && lhs.mode == rhs.mode && lhs.format == rhs.format
            && lhs.quality == rhs.quality && lhs.upscale == rhs.upscale && lhs.background == rhs.background
    }
}

/// A made variant: its bytes and what they are.
public struct ProcessedImage: Sendable, Equatable {
    /// The encoded bytes.
    public var data: Data
    /// Its size in pixels.
    public var width: Int, height: Int
    /// Its format.
    public var format: ImageFormat
}

/// Where an original's bytes are.
public enum ImageInput: Sendable {
    /// In memory.
    case data(Data)
    /// An open, read-only file descriptor (a stored value's: `ItemStore.withValue(for:_:)`),
    /// read from its start; the caller keeps it open for the call and closes it. Nothing of it is
    /// copied into memory but what libvips decodes.
    case descriptor(Int32)
}

/// The libvips resize: shrink-on-load, EXIF orientation applied, colour to sRGB, alpha
/// flattened for JPEG, metadata stripped.
///
/// A JPEG is decoded by libjpeg at 1/2, 1/4 or 1/8 of its size whenever that is still at least
/// the output size, then resized; `vips_thumbnail` alone always leaves a final 2× step, so it
/// decodes a 2725×2225 photo in full for a 720-pixel variant where this decodes a quarter.
public enum ImageProcessor {
    /// `request` applied to the image in `data` (named `source` in messages); throws
    /// ``ImageCacheError/Code/refused`` for input that is not an allowed, whole image.
    public static func resize(_ data: Data, source: String, request: ResizeRequest, limits: ImageLimits = ImageLimits())
        throws(ImageCacheError) -> ProcessedImage
    {
        try resize(.data(data), source: source, request: request, limits: limits)
    }

    /// `request` applied to the image `input` holds (named `source` in messages).
    public static func resize(
        _ input: ImageInput, source: String, request: ResizeRequest, limits: ImageLimits = ImageLimits()
    ) throws(ImageCacheError) -> ProcessedImage {
        try request.validate()
        let header = try ImageProbe.header(of: input, source: source, limits: limits)
        let pixels = request.outputPixels(sourceWidth: header.width, sourceHeight: header.height)
        guard pixels <= Double(limits.maxPixels) else {
            throw ImageCacheError(
                code: .configuration,
                message:
                    "resizing \(source) (\(header.width)×\(header.height)) to \(request.sizeDescription) would make about \(Int(pixels)) pixels, over the \(limits.maxPixels)-pixel limit (ImageLimits.maxPixels); ask for a smaller size"
            )
        }
        return try VipsSources.with(input) { (make: () -> UnsafeMutablePointer<VipsSource>?) throws(ImageCacheError) in
            let resized = try thumbnail(make, header: header, request: request, source: source)
            defer { cvips_unref(resized) }
            // Decoded whole before any encoder runs: a damaged input is refused here, and what
            // fails in the encoder is the encoder's.
            var decoded: UnsafeMutablePointer<VipsImage>?
            guard cvips_copy_memory(resized, &decoded) == 0, let decoded else {
                throw VipsRuntime.failure(.refused, "\(source) cannot be decoded")
            }
            defer { cvips_unref(decoded) }
            return try encode(decoded, request: request, source: source)
        }
    }

    /// Formats whose loader `vips_thumbnail_source` may use (their own shrink-on-load: WebP's
    /// scale, HEIF's thumbnail, SVG's and PDF's scale). A PNG or GIF has none, and
    /// `vips_thumbnail_source` lets a PNG whose image data stops short through as a partly black
    /// image whatever its `fail_on`; those are loaded here with `fail_on=error`.
    static let formatsWithShrinkOnLoad: Set<String> = ["webp", "heif", "svg", "pdf"]

    /// The resized image: for a JPEG, libjpeg's shrink then `vips_thumbnail_image`; for a format
    /// with its own shrink-on-load, `vips_thumbnail_source`; else loaded whole (refusing a damaged
    /// one), then `vips_thumbnail_image`.
    private static func thumbnail(
        _ make: () -> UnsafeMutablePointer<VipsSource>?, header: ImageHeader, request: ResizeRequest, source: String
    ) throws(ImageCacheError) -> UnsafeMutablePointer<VipsImage> {
        let plan = ResizePlan(header: header, request: request)
        guard let input = make() else {
            throw VipsRuntime.failure(.processing, "cannot read \(source)")
        }
        defer { cvips_source_unref(input) }
        let undecodable = { VipsRuntime.failure(.refused, "\(source) cannot be decoded") }
        var out: UnsafeMutablePointer<VipsImage>?
        if formatsWithShrinkOnLoad.contains(header.format) {
            guard cvips_thumbnail_source(input, &out, plan.width, plan.height, plan.size, plan.crop) == 0, let out
            else { throw undecodable() }
            return out
        }
        // A JPEG through libjpeg's shrink (its warnings fatal); a PNG or GIF whole, `fail_on=error`.
        let loaded: UnsafeMutablePointer<VipsImage>?
        if header.format == "jpeg" {
            var shrunk: UnsafeMutablePointer<VipsImage>?
            loaded = cvips_jpegload_source_shrink(input, &shrunk, plan.jpegShrink) == 0 ? shrunk : nil
        } else {
            loaded = cvips_image_new_from_source(input, 1)
        }
        guard let loaded else { throw undecodable() }
        defer { cvips_unref(loaded) }
        guard cvips_thumbnail_image(loaded, &out, plan.width, plan.height, plan.size, plan.crop) == 0, let out else {
            throw undecodable()
        }
        return out
    }

    /// Flattens alpha for JPEG and encodes.
    private static func encode(_ resized: UnsafeMutablePointer<VipsImage>, request: ResizeRequest, source: String)
        throws(ImageCacheError) -> ProcessedImage
    {
        var stripped: UnsafeMutablePointer<VipsImage>?
        guard cvips_strip_metadata(resized, &stripped) == 0, let stripped else {
            throw VipsRuntime.failure(.processing, "copying \(source)")
        }
        defer { cvips_unref(stripped) }
        var image = stripped
        var flattened: UnsafeMutablePointer<VipsImage>?
        defer { if let flattened { cvips_unref(flattened) } }
        if request.format == .jpeg, cvips_image_hasalpha(image) != 0 {
            let background = request.background
            guard cvips_flatten(image, &flattened, background.red, background.green, background.blue) == 0,
                let flat = flattened
            else {
                throw VipsRuntime.failure(.processing, "flattening \(source)")
            }
            image = flat
        }
        var buffer: UnsafeMutableRawPointer?
        var length = 0
        let quality = Int32(min(100, max(1, request.quality ?? request.format.defaultQuality)))
        let status: Int32 =
            switch request.format {
            case .jpeg: cvips_jpegsave_buffer(image, &buffer, &length, quality)
            case .png: cvips_pngsave_buffer(image, &buffer, &length)
            case .webp: cvips_webpsave_buffer(image, &buffer, &length, quality)
            case .avif: cvips_avifsave_buffer(image, &buffer, &length, quality, ImageFormat.avifEffort)
            }
        guard status == 0, let buffer else {
            throw VipsRuntime.failure(.processing, "encoding \(source) as \(request.format)")
        }
        defer { cvips_free(buffer) }
        var data = Data(bytes: buffer, count: length)
        // libvips 8.14's WebP saver ignores `strip` and writes an EXIF block of its own.
        if request.format == .webp { data = WebPContainer.withoutMetadata(data) }
        return ProcessedImage(
            data: data, width: Int(cvips_image_width(image)), height: Int(cvips_image_height(image)),
            format: request.format)
    }
}

/// A WebP file's RIFF container (RFC 9649): chunks of a four-character type, a little-endian
/// 32-bit size and the payload, padded to an even length; `VP8X` flags what the file carries.
enum WebPContainer {
    /// The chunks that carry metadata rather than the image: EXIF, XMP and the ICC profile (the
    /// variant is sRGB without one).
    static let metadataChunks: Set<String> = ["EXIF", "XMP ", "ICCP"]

    /// `data` without its metadata chunks, and `VP8X` flagging none; `data` itself when it is not
    /// a WebP container this reads whole (nothing is guessed at).
    static func withoutMetadata(_ data: Data) -> Data {
        let bytes = [UInt8](data)
        guard bytes.count >= 12, bytes[0..<4].elementsEqual("RIFF".utf8), bytes[8..<12].elementsEqual("WEBP".utf8)
        else { return data }
        var out: [UInt8] = Array(bytes[0..<12])
        var offset = 12
        var dropped = false
        while offset + 8 <= bytes.count {
            let type = String(decoding: bytes[offset..<offset + 4], as: UTF8.self)
            let size = bytes[offset + 4..<offset + 8].reversed().reduce(0) { $0 << 8 | Int($1) }
            let end = offset + 8 + size + (size & 1)
            guard end <= bytes.count || (end == bytes.count + 1 && size & 1 == 1) else { return data }
            if metadataChunks.contains(type) {
                dropped = true
            } else {
                var chunk = Array(bytes[offset..<min(end, bytes.count)])
                // VP8X's first payload byte: ICC 0x20, alpha 0x10, EXIF 0x08, XMP 0x04, animation 0x02.
                if type == "VP8X", chunk.count > 8 { chunk[8] &= ~UInt8(0x20 | 0x08 | 0x04) }
                out += chunk
            }
            offset = end
        }
        guard offset >= bytes.count, dropped else { return data }
        let riffSize = UInt32(out.count - 8)
        withUnsafeBytes(of: riffSize.littleEndian) { out.replaceSubrange(4..<8, with: $0) }
        return Data(out)
    }
}

/// How one resize is carried out: the box handed to `vips_thumbnail` (exact output sides for
/// fit and force, so the free side rounds to nearest from the original's own aspect whatever
/// the shrink-on-load), its size and crop modes, and libjpeg's shrink.
struct ResizePlan: Equatable {
    var width: Int32, height: Int32
    /// 0 down only, 1 both, 2 force (`VipsSize`).
    var size: Int32
    /// 0 none, 1 centre, 2 attention (`VipsInteresting`).
    var crop: Int32
    /// 1, 2, 4 or 8.
    var jpegShrink: Int32

    /// VIPS_MAX_COORD: a free side.
    static let free: Int32 = 10_000_000

    init(header: ImageHeader, request: ResizeRequest) {
        // The box applies to the upright image.
        let turned = (5...8).contains(header.orientation)
        let (sourceW, sourceH) = turned ? (header.height, header.width) : (header.width, header.height)
        let (w, h) = (Double(max(1, sourceW)), Double(max(1, sourceH)))
        let mode = (request.width == nil || request.height == nil) && request.mode == .force ? .fit : request.mode
        let scales = [request.width.map { Double($0) / w }, request.height.map { Double($0) / h }].compactMap { $0 }
        let needed: (Double, Double)
        switch mode {
        case .fit:
            var scale = scales.min() ?? 1
            if !request.upscale { scale = min(scale, 1) }
            let out = (max(1, (w * scale).rounded()), max(1, (h * scale).rounded()))
            (width, height, size, crop) = (Int32(out.0), Int32(out.1), 2, 0)
            needed = out
        case .force:
            // Exactly the box, the aspect given up; without `upscale` no side grows past the
            // original's, so a box larger than the image shrinks only the sides it must.
            var out = (Double(request.width ?? sourceW), Double(request.height ?? sourceH))
            if !request.upscale { out = (min(out.0, w), min(out.1, h)) }
            (width, height, size, crop) = (Int32(out.0), Int32(out.1), 2, 0)
            needed = out
        case .fill, .smartFill:
            var scale = scales.max() ?? 1
            if !request.upscale { scale = min(scale, 1) }
            (width, height) = (request.width.map(Int32.init) ?? Self.free, request.height.map(Int32.init) ?? Self.free)
            size = request.upscale ? 1 : 0
            crop = mode == .fill ? 1 : 2
            needed = (w * scale, h * scale)
        }
        // libjpeg's shrink works on the stored (unturned) sides and rounds up.
        let (neededW, neededH) = turned ? (needed.1, needed.0) : (needed.0, needed.1)
        var shrink = 1
        for candidate in [8, 4, 2] {
            let shrunk = (
                (Double(header.width) / Double(candidate)).rounded(.up),
                (Double(header.height) / Double(candidate)).rounded(.up)
            )
            if shrunk.0 >= neededW.rounded(.up), shrunk.1 >= neededH.rounded(.up) {
                shrink = candidate
                break
            }
        }
        jpegShrink = Int32(shrink)
    }
}

/// Makes libvips sources over an input, each one from its start.
enum VipsSources {
    static func with<T>(
        _ input: ImageInput,
        _ body: (() -> UnsafeMutablePointer<VipsSource>?) throws(ImageCacheError) -> T
    ) throws(ImageCacheError) -> T {
        switch input {
        case .data(let data):
            return try data.withUnsafeBytes { raw in
                Result { () throws(ImageCacheError) in
                    try body { cvips_source_new_from_memory(raw.baseAddress, raw.count) }
                }
            }.get()
        case .descriptor(let descriptor):
            return try body {
                // libvips dups the descriptor, and the copy shares its offset: start over.
                guard lseek(descriptor, 0, SEEK_SET) == 0 else { return nil }
                return cvips_source_new_from_descriptor(descriptor)
            }
        }
    }
}

extension ResizeRequest {
    /// The largest side asked for: 16384 pixels (a side beyond is a mistake, and WebP and
    /// JPEG cannot hold much more).
    public static let largestSide = 16_384

    /// `WxH`, `Wx` or `xH`.
    public var sizeDescription: String { "\(width.map(String.init) ?? "")x\(height.map(String.init) ?? "")" }

    /// Throws ``ImageCacheError/Code/configuration`` for a request that cannot be made: no
    /// side, a side out of range, a quality out of 1–100, a background channel out of 0–255,
    /// or AVIF where this libvips cannot encode it.
    public func validate() throws(ImageCacheError) {
        let sides = [width, height].compactMap { $0 }
        guard !sides.isEmpty, sides.allSatisfy({ (1...Self.largestSide).contains($0) }) else {
            throw ImageCacheError(
                code: .configuration,
                message:
                    "the size \(sizeDescription) needs a width or a height from 1 to \(Self.largestSide), such as 720x, x480 or 720x480"
            )
        }
        if let quality, !(1...100).contains(quality) {
            throw ImageCacheError(
                code: .configuration, message: "the quality \(quality) is not from 1 to 100; write it as 80")
        }
        for channel in [background.red, background.green, background.blue] where !(0...255).contains(channel) {
            throw ImageCacheError(
                code: .configuration, message: "a background channel of \(channel) is not from 0 to 255")
        }
        if format == .avif, !ImageFormat.isAVIFAvailable {
            throw ImageCacheError(
                code: .configuration,
                message:
                    "this libvips cannot encode AVIF (its libheif has no AV1 encoder); ask for webp, jpeg or png")
        }
    }

    /// About how many pixels the output of a `sourceWidth` × `sourceHeight` image has.
    func outputPixels(sourceWidth: Int, sourceHeight: Int) -> Double {
        let (sourceW, sourceH) = (Double(max(1, sourceWidth)), Double(max(1, sourceHeight)))
        if mode == .force, let width, let height { return Double(width) * Double(height) }
        // Force with a free side has nothing to force: it is a fit.
        let fits = mode == .fit || mode == .force
        let scales = [width.map { Double($0) / sourceW }, height.map { Double($0) / sourceH }].compactMap { $0 }
        var scale = (fits ? scales.min() : scales.max()) ?? 1
        if !upscale { scale = min(scale, 1) }
        let (outW, outH) = ((sourceW * scale).rounded(), (sourceH * scale).rounded())
        // Fill crops to the box.
        return fits
            ? outW * outH : min(outW, Double(width ?? Int(outW))) * min(outH, Double(height ?? Int(outH)))
    }
}
