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
    /// Exactly the box, aspect changed.
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

/// The libvips resize: shrink-on-load from the bytes, EXIF orientation applied, colour to sRGB,
/// alpha flattened for JPEG, metadata stripped.
public enum ImageProcessor {
    /// `request` applied to the image in `data` (named `source` in messages); throws
    /// ``ImageCacheError/Code/refused`` for input that is not an allowed, whole image.
    public static func resize(_ data: Data, source: String, request: ResizeRequest, limits: ImageLimits = ImageLimits())
        throws(ImageCacheError) -> ProcessedImage
    {
        try request.validate()
        let header = try ImageProbe.header(of: data, source: source, limits: limits)
        let pixels = request.outputPixels(sourceWidth: header.width, sourceHeight: header.height)
        guard pixels <= Double(limits.maxPixels) else {
            throw ImageCacheError(
                code: .configuration,
                message:
                    "resizing \(source) (\(header.width)×\(header.height)) to \(request.sizeDescription) would make about \(Int(pixels)) pixels, over the \(limits.maxPixels)-pixel limit (ImageLimits.maxPixels); ask for a smaller size"
            )
        }
        return try data.withUnsafeBytes { raw in
            Result { () throws(ImageCacheError) in try resize(raw, source: source, request: request) }
        }.get()
    }

    private static func resize(_ raw: UnsafeRawBufferPointer, source: String, request: ResizeRequest)
        throws(ImageCacheError) -> ProcessedImage
    {
        let free = Int32(10_000_000) // VIPS_MAX_COORD: a free side.
        let width = request.width.map(Int32.init) ?? free
        let height = request.height.map(Int32.init) ?? free
        let size: Int32 = request.mode == .force ? 2 : (request.upscale ? 1 : 0)
        let crop: Int32 =
            switch request.mode {
            case .fill: 1
            case .smartFill: 2
            case .fit, .force: 0
            }
        var thumbnail: UnsafeMutablePointer<VipsImage>?
        guard cvips_thumbnail_buffer(raw.baseAddress, raw.count, &thumbnail, width, height, size, crop) == 0,
            var image = thumbnail
        else {
            throw ImageCacheError(code: .refused, message: "\(source) cannot be decoded: \(VipsRuntime.takeError())")
        }
        defer { cvips_unref(image) }
        if request.format == .jpeg, cvips_image_hasalpha(image) != 0 {
            var flat: UnsafeMutablePointer<VipsImage>?
            let background = request.background
            guard cvips_flatten(image, &flat, background.red, background.green, background.blue) == 0, let flat
            else {
                throw ImageCacheError(
                    code: .processing, message: "flattening \(source): \(VipsRuntime.takeError())")
            }
            cvips_unref(image)
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
            throw ImageCacheError(
                code: .processing, message: "encoding \(source) as \(request.format): \(VipsRuntime.takeError())")
        }
        defer { cvips_free(buffer) }
        return ProcessedImage(
            data: Data(bytes: buffer, count: length), width: Int(cvips_image_width(image)),
            height: Int(cvips_image_height(image)), format: request.format)
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
        if mode == .force {
            return Double(width ?? sourceWidth) * Double(height ?? sourceHeight)
        }
        let scales = [width.map { Double($0) / sourceW }, height.map { Double($0) / sourceH }].compactMap { $0 }
        var scale = (mode == .fit ? scales.min() : scales.max()) ?? 1
        if !upscale { scale = min(scale, 1) }
        let (outW, outH) = ((sourceW * scale).rounded(), (sourceH * scale).rounded())
        // Fill crops to the box.
        return mode == .fit
            ? outW * outH : min(outW, Double(width ?? Int(outW))) * min(outH, Double(height ?? Int(outH)))
    }
}
