import ItemCache

extension ResizeRequest {
    /// The request in a canonical form: every field that changes the output, defaults written
    /// out (a nil quality is the format's default), so two requests with one output share it.
    public var identifier: String {
        let quality = format == .png ? "-" : String(min(100, max(1, self.quality ?? format.defaultQuality)))
        // The background only matters where alpha is flattened (JPEG).
        let background =
            format == .jpeg
            ? "\(Int(self.background.red)),\(Int(self.background.green)),\(Int(self.background.blue))" : "-"
        return [
            "w=\(width.map(String.init) ?? "")", "h=\(height.map(String.init) ?? "")", "mode=\(mode.rawValue)",
            "format=\(format.rawValue)", "q=\(quality)", "upscale=\(upscale ? 1 : 0)", "bg=\(background)",
        ].joined(separator: ";")
    }
}

/// The keys of image variants: an original's key and content digest, the resize and the
/// pipeline's version, so that a new original (another digest) or new resize code (another
/// version) never serves an old variant.
public enum VariantKey {
    /// The version of the resize code: libvips' version and this pipeline's revision. A change
    /// of either gives every variant a new key.
    public static var pipelineVersion: String { "vips\(VipsRuntime.version)-r1" }

    /// The key of the variant of `original` (whose bytes have `digest`) made by `request` with
    /// `pipeline` (default ``pipelineVersion``), in the context `image-variant`.
    public static func key(
        original: CacheKey, digest: String, request: ResizeRequest, pipeline: String = pipelineVersion
    ) throws(ItemCacheError) -> CacheKey {
        try CacheKey.custom(
            [original.rawValue, "digest=\(digest)", request.identifier, "pipeline=\(pipeline)"].joined(separator: "|"),
            context: "image-variant")
    }
}
