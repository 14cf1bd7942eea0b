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
}

/// The limits an untrusted image is held to before a pixel is decoded.
public struct ImageLimits: Sendable, Equatable {
    /// The most pixels, width × height × pages. Default 50 million (imgproxy's default).
    public var maxPixels = 50_000_000
    /// The largest source in bytes. Default 64 MiB.
    public var maxBytes = 64 << 20

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

    private static func header(of raw: UnsafeRawBufferPointer, source: String, limits: ImageLimits)
        throws(ImageCacheError) -> ImageHeader
    {
        guard let loader = cvips_find_load_buffer(raw.baseAddress, raw.count).map({ String(cString: $0) }) else {
            _ = VipsRuntime.takeError()
            throw ImageCacheError(
                code: .refused,
                message:
                    "\(source) is not an image this cache accepts (JPEG, PNG, WebP or GIF, by its bytes; SVG, PDF and HEIF only when VipsRuntime.Options allow them)"
            )
        }
        guard let image = cvips_image_new_from_buffer(raw.baseAddress, raw.count, 1) else {
            throw ImageCacheError(
                code: .refused, message: "\(source) is a damaged image: \(VipsRuntime.takeError())")
        }
        defer { cvips_unref(image) }
        let header = ImageHeader(
            format: Self.format(ofLoader: loader), width: Int(cvips_image_width(image)),
            height: Int(cvips_image_height(image)), bands: Int(cvips_image_bands(image)),
            pages: max(1, Int(cvips_image_pages(image))))
        let pixels = header.width.multipliedReportingOverflow(by: header.height)
        let total = pixels.partialValue.multipliedReportingOverflow(by: header.pages)
        guard !pixels.overflow, !total.overflow, total.partialValue <= limits.maxPixels else {
            throw ImageCacheError(
                code: .refused,
                message:
                    "\(source) is \(header.width)×\(header.height) pixels × \(header.pages) pages, over the \(limits.maxPixels)-pixel limit (ImageLimits.maxPixels)"
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
