import Foundation

/// What is known of a stored image (an original or a variant), kept in its item's metadata so
/// it is read without decoding: its size, format, orientation, byte count, digest, and the
/// caller's own dictionary (NBImageCache's metadata).
public struct ImageMetadata: Sendable, Equatable {
    /// Width and height in pixels, as stored (a variant is upright; an original's EXIF
    /// ``orientation`` still applies to it).
    public var width: Int, height: Int
    /// `jpeg`, `png`, `webp`, `avif`, `gif`…, by the bytes.
    public var format: String
    /// The EXIF orientation, 1–8 (1 for a variant: it is made upright and stripped).
    public var orientation: Int
    /// The stored bytes.
    public var bytes: Int64
    /// The SHA-256 of the bytes, hex (originals; it keys their variants).
    public var sha256: String?
    /// The caller's own metadata. Names beginning `image.` are the cache's own and are refused.
    public var custom: [String: String]

    /// Metadata from its fields.
    public init(
        width: Int, height: Int, format: String, orientation: Int = 1, bytes: Int64, sha256: String? = nil,
        custom: [String: String] = [:]
    ) {
        (self.width, self.height, self.format, self.orientation) = (width, height, format, orientation)
        (self.bytes, self.sha256, self.custom) = (bytes, sha256, custom)
    }

    /// The prefix of the cache's own metadata names.
    public static let reservedPrefix = "image."
    /// The name under which a variant records its original's SHA-256 (to drop the variants of
    /// an original's old bytes).
    package static let originalDigestName = "image.original-sha256"
    /// The name under which a variant of a mirrored folder's file records that file's URL
    /// (`file:///srv/mirror/photo.jpg`): such an original is read in place, never stored, so a
    /// listing shows the variant under it by this.
    public static let originalFileName = "image.original-file"
    /// The name under which a variant records the request that made it
    /// (``ResizeRequest/identifier``), for listings.
    public static let variantName = "image.variant"

    /// The item metadata that holds these facts: `image.width` and so on, and ``custom``.
    public var stored: [String: String] {
        var stored = custom.filter { !$0.key.hasPrefix(Self.reservedPrefix) }
        stored["image.width"] = String(width)
        stored["image.height"] = String(height)
        stored["image.format"] = format
        stored["image.orientation"] = String(orientation)
        if let sha256 { stored["image.sha256"] = sha256 }
        return stored
    }

    /// The facts in an item's metadata; nil when it holds none (an item not stored by the image
    /// cache) or a damaged value (a hostile row). The byte count is the item's own size.
    public init?(stored: [String: String], bytes: Int64) {
        guard let width = stored["image.width"].flatMap(Int.init),
            let height = stored["image.height"].flatMap(Int.init),
            (1...ImageMetadata.largestSide).contains(width), (1...ImageMetadata.largestSide).contains(height),
            let format = stored["image.format"], !format.isEmpty, format.count <= 16,
            format.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) })
        else { return nil }
        let orientation = stored["image.orientation"].flatMap(Int.init) ?? 1
        let sha256 = stored["image.sha256"].flatMap { $0.count == 64 && $0.allSatisfy(\.isHexDigit) ? $0 : nil }
        self.init(
            width: width, height: height, format: format, orientation: (1...8).contains(orientation) ? orientation : 1,
            bytes: bytes, sha256: sha256, custom: stored.filter { !$0.key.hasPrefix(Self.reservedPrefix) })
    }

    /// The largest side a stored record may claim (libvips' own limit, VIPS_MAX_COORD).
    package static let largestSide = 10_000_000
}
