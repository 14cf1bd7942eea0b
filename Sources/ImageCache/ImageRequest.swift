import Foundation
import ItemCache

import enum Transport.Redaction

/// Where an image comes from.
public enum ImageSource: Sendable, Equatable {
    /// An `http`, `https` or `file` URL, fetched through the item cache (so with its HTTP
    /// freshness, revalidation and cross-process coalescing). A `file` URL of a folder that
    /// ContentSync mirrors is read in place and keyed by its content digest: a new version
    /// of the file gets new variants, and the old ones go.
    case url(URL)
    /// An image saved under an id with ``ImagePipeline/save(_:id:metadata:)`` (made locally);
    /// never fetched.
    case id(String)

    /// The source for `text`: an absolute URL (`https://…`, `file:///…`); nil for anything else.
    public static func url(parsing text: String) -> ImageSource? {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(),
            ["http", "https", "file"].contains(scheme)
        else { return nil }
        return .url(url)
    }

    /// The source as messages show it: a URL without its password or token.
    public var shown: String {
        switch self {
        case .url(let url): url.isFileURL ? url.path : Redaction.url(url)
        case .id(let id): "image id '\(id)'"
        }
    }
}

/// One image asked for: its source and the variant (size, mode, format, quality, upscale,
/// background), with how the cache and the network may be used.
public struct ImageRequest: Sendable {
    /// Where the original comes from.
    public var source: ImageSource
    /// The box: a side of nil is free (`720x`, `x480`). At least one side is set.
    public var width: Int?, height: Int?
    /// How to fit the box. Default ``ResizeMode/fit``.
    public var mode: ResizeMode = .fit
    /// The output format; nil for the source's own when JPEG, PNG or WebP, else PNG (which
    /// keeps alpha).
    public var format: ImageFormat?
    /// The quality, 1–100; nil for the format's default (JPEG 80, WebP 80, AVIF 60).
    public var quality: Int?
    /// Whether a source smaller than the box is enlarged. Default false.
    public var upscale = false
    /// The colour alpha is flattened onto for JPEG, 0–255 a channel. Default white.
    public var background: (red: Double, green: Double, blue: Double) = (255, 255, 255)
    /// Cache or network for the original: `LoadPolicy/offline` never touches the network (a
    /// variant of a stored original is still made). Default `LoadPolicy/useCache`.
    public var policy: LoadPolicy = .useCache
    /// Request headers sent for the original (authorization, accept…). An original fetched with a
    /// credential is kept for that credential alone (or for ``account``, when given).
    public var headers: [String: String] = [:]
    /// Whose image this is, for an app that loads for several accounts: the original (and its
    /// variants) is kept for that account alone, whatever credential it sent, so a refreshed
    /// token still finds it (`LoadOptions.account`). Default nil.
    public var account: String?
    /// The caller's metadata, stored with a newly fetched original.
    public var metadata: [String: String] = [:]

    /// A request for `source` fitted into `width` × `height` (either may be nil).
    public init(source: ImageSource, width: Int?, height: Int?) {
        (self.source, self.width, self.height) = (source, width, height)
    }

    /// The resize for an original of `format`.
    public func resize(forSource format: String) -> ResizeRequest {
        var resize = ResizeRequest(
            width: width, height: height, format: self.format ?? ImageFormat.defaultOutput(forSource: format))
        resize.mode = mode
        resize.quality = quality
        resize.upscale = upscale
        resize.background = background
        return resize
    }

    /// `WxH`, `Wx` or `xH` as a width and a height; nil for anything else (a side of 0, a
    /// sign, a number past ``ResizeRequest/largestSide``).
    public static func size(parsing text: String) -> (width: Int?, height: Int?)? {
        let parts = text.lowercased().split(separator: "x", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        func side(_ part: Substring) -> Int?? {
            if part.isEmpty { return .some(nil) }
            guard part.allSatisfy(\.isASCII), part.allSatisfy(\.isNumber), part.count <= 6, let value = Int(part),
                (1...ResizeRequest.largestSide).contains(value)
            else { return nil }
            return .some(value)
        }
        guard let width = side(parts[0]), let height = side(parts[1]), width != nil || height != nil else {
            return nil
        }
        return (width, height)
    }

    /// `white`, `black`, `#rgb`, `#rrggbb` or `r,g,b` (0–255) as channels; nil for anything else.
    public static func color(parsing text: String) -> (red: Double, green: Double, blue: Double)? {
        let text = text.lowercased().trimmingCharacters(in: .whitespaces)
        switch text {
        case "white": return (255, 255, 255)
        case "black": return (0, 0, 0)
        default: break
        }
        if text.hasPrefix("#") {
            let hex = Array(text.dropFirst())
            guard hex.allSatisfy(\.isHexDigit), hex.count == 3 || hex.count == 6 else { return nil }
            let digits = hex.count == 3 ? hex.flatMap { [$0, $0] } : hex
            let values = stride(from: 0, to: 6, by: 2).compactMap { UInt8(String(digits[$0...$0 + 1]), radix: 16) }
            return (Double(values[0]), Double(values[1]), Double(values[2]))
        }
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        let values = parts.compactMap { Int($0.trimmingCharacters(in: .whitespaces)) }.filter { (0...255).contains($0) }
        guard values.count == 3 else { return nil }
        return (Double(values[0]), Double(values[1]), Double(values[2]))
    }
}
