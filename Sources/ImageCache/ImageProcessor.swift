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
    case jpeg, png, webp

    /// The default quality: JPEG 80, WebP 80 (PNG has none).
    var defaultQuality: Int { 80 }
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
        guard request.width.map({ $0 > 0 }) ?? true, request.height.map({ $0 > 0 }) ?? true,
            request.width != nil || request.height != nil
        else {
            throw ImageCacheError(
                code: .configuration, message: "a size needs a positive width or height, such as 720x or 720x480")
        }
        _ = try ImageProbe.header(of: data, source: source, limits: limits)
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
