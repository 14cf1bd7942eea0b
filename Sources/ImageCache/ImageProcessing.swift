import Foundation

/// Makes a variant from an original's bytes. The pipeline runs it on its processing pool, off
/// Swift's cooperative threads.
public protocol ImageProcessing: Sendable {
    /// Names this processing's output; it is part of every variant key, so that new resize code
    /// never serves an old variant. Change it whenever the output changes.
    var identifier: String { get }

    /// The variant of the image in `original` (named `source` in messages) that `request`
    /// asks for. Throws ``ImageCacheError/Code/refused`` for input that is not an allowed,
    /// whole image within `limits`: nothing is cached for it.
    func process(_ original: ImageInput, source: String, request: ResizeRequest, limits: ImageLimits)
        throws(ImageCacheError) -> ProcessedImage
}

/// The default processing: libvips (``ImageProcessor``), keyed by ``VariantKey/pipelineVersion``.
public struct VipsImageProcessing: ImageProcessing {
    /// The libvips processing.
    public init() {}

    /// libvips' version and this pipeline's revision.
    public var identifier: String { VariantKey.pipelineVersion }

    /// Resizes `original` with libvips (``ImageProcessor``).
    public func process(_ original: ImageInput, source: String, request: ResizeRequest, limits: ImageLimits)
        throws(ImageCacheError) -> ProcessedImage
    {
        try ImageProcessor.resize(original, source: source, request: request, limits: limits)
    }
}
