import FileKit
import Foundation
import PercentDecoding

/// Where a storage's files live, and the rules that tie every URL it publishes to its
/// `RXCacheContent/` folder.
///
/// Storages write absolute URLs. When a storage is served somewhere other than where it was
/// published (a mirror, a loopback test server), the URLs still name the original place. Once
/// the status file is read, ``publishedBase`` holds that original base and every URL under it is
/// *rebased* onto ``baseURL``: the client fetches only from where it was told to.
public struct StorageLayout: Sendable, Equatable {
    /// The storage folder as configured, always with a trailing slash.
    public let baseURL: URL
    /// The base the storage's own URLs use, inferred from the status file; `nil` when it could
    /// not be inferred, in which case URLs are taken as they are.
    public var publishedBase: URL? {
        didSet {
            normalizedPublishedBase = publishedBase.map(Self.normalized)
            plainPrefix = normalizedPublishedBase.map { $0 + Self.contentFolder } ?? normalizedContentRoot
        }
    }
    /// ``normalized(_:)`` of the bases, computed once: every change path is compared with them.
    private var normalizedPublishedBase: String?
    /// What a change path the publisher wrote starts with (``plainRemainder(_:)``).
    private var plainPrefix: String
    private let normalizedBase: String
    private let normalizedContentRoot: String

    /// The layout of the storage at `baseURL`, an http(s) URL with a host and no query or fragment;
    /// a missing trailing `/` is added.
    public init(baseURL: URL) throws(StorageFormatError) {
        var text = baseURL.absoluteString
        guard let scheme = baseURL.scheme?.lowercased(), scheme == "http" || scheme == "https", baseURL.host != nil
        else {
            throw StorageFormatError(
                code: .invalidURL,
                message:
                    "base URL '\(text)' is not an http(s) URL; pass the storage folder, e.g. https://raw.githubusercontent.com/OWNER/REPO/BRANCH/"
            )
        }
        if baseURL.query != nil || baseURL.fragment != nil {
            throw StorageFormatError(
                code: .invalidURL, message: "base URL '\(text)' has a query or fragment; pass the plain folder URL")
        }
        if let port = baseURL.port, !(1...65_535).contains(port) {
            throw StorageFormatError(
                code: .invalidURL,
                message: "base URL '\(text)' names port \(port), outside 1–65535; pass the storage's real port")
        }
        if !text.hasSuffix("/") { text += "/" }
        self.baseURL = URL(string: text)!
        self.normalizedBase = Self.normalized(self.baseURL)
        self.contentRootURL = URL(string: Self.contentFolder, relativeTo: self.baseURL)!.absoluteURL
        self.contentRootText = contentRootURL.absoluteString
        self.normalizedContentRoot = Self.normalized(contentRootURL)
        self.plainPrefix = normalizedContentRoot
    }

    /// Where `cacheStatus.json` is, relative to the base URL.
    public static let statusPath = "RXCacheConfig/cacheStatus.json"
    /// Where the list of change lists is, relative to the base URL.
    public static let updateListPath = "RXCacheConfig/listOfURLsToUpdatesByVersion.json"
    /// The content folder, relative to the base URL, with its trailing `/`.
    public static let contentFolder = "RXCacheContent/"

    /// The absolute URL of `cacheStatus.json` under ``baseURL``.
    public var statusURL: URL { URL(string: Self.statusPath, relativeTo: baseURL)!.absoluteURL }
    /// `<base>/RXCacheContent/`, resolved once: every download URL starts with it.
    public let contentRootURL: URL
    private let contentRootText: String

    /// Learns the published base from the update-list URL the status file gives.
    public mutating func inferPublishedBase(fromUpdateListURL url: URL) {
        let text = Self.normalized(url)
        if text.hasSuffix(Self.updateListPath) {
            publishedBase = URL(string: String(text.dropLast(Self.updateListPath.count)))
        } else {
            publishedBase = nil
        }
    }

    /// `url` moved from ``publishedBase`` onto ``baseURL`` when it lies under the former.
    public func rebase(_ url: URL) -> URL {
        guard let prefix = normalizedPublishedBase else { return url }
        let text = Self.normalized(url)
        guard text.hasPrefix(prefix) else { return url }
        return URL(string: normalizedBase + text.dropFirst(prefix.count)) ?? url
    }

    /// Resolves a URL written in a storage file (absolute, or relative to `document`) and rebases it.
    public func resolve(_ text: String, relativeTo document: URL) -> URL? {
        guard let url = URL(string: text, relativeTo: document)?.absoluteURL,
            let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https"
        else { return nil }
        return rebase(url)
    }

    /// The content path a change URL names, refusing anything outside `RXCacheContent/`.
    /// An empty result is the content root itself.
    public func contentPath(ofURL text: String, in document: URL) throws(SafePathError) -> SafeRelativePath {
        try contentPath(ofURL: text, in: document, plainFastPath: true)
    }

    /// ``contentPath(ofURL:in:)``; `plainFastPath: false` forces the general way (tests compare both).
    package func contentPath(ofURL text: String, in document: URL, plainFastPath: Bool) throws(SafePathError)
        -> SafeRelativePath
    {
        let remainder: Substring
        if plainFastPath, let plain = plainRemainder(text) {
            remainder = plain
        } else {
            guard let url = resolve(text, relativeTo: document) else {
                throw SafePathError(path: text, reason: .notUnderContentRoot)
            }
            let normalizedURL = Self.normalized(url)
            let root = normalizedContentRoot
            if normalizedURL.hasPrefix(root) {
                remainder = Substring(normalizedURL.dropFirst(root.count))
            } else if normalizedURL == String(root.dropLast()) {
                remainder = ""
            } else {
                throw SafePathError(path: text, reason: .notUnderContentRoot)
            }
        }
        var decoded: [String] = []
        let trimmed = remainder.utf8.last == UInt8(ascii: "/") ? Substring(remainder.utf8.dropLast()) : remainder
        if trimmed.isEmpty { return .root }
        // Nothing escaped: the path is the text itself (most of a change list's thousands).
        if !trimmed.utf8.contains(UInt8(ascii: "%")) {
            do {
                return try SafeRelativePath(validating: String(trimmed))
            } catch {
                throw SafePathError(path: text, reason: error.reason)
            }
        }
        for part in trimmed.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).map(
            Substring.init)
        {
            guard let component = PercentDecoding.decode(part) else {
                throw SafePathError(path: text, reason: .badEncoding)
            }
            if component.utf8.contains(UInt8(ascii: "/")) {
                throw SafePathError(path: text, reason: .encodedSlash)
            }
            decoded.append(component)
        }
        do {
            return try SafeRelativePath(validating: decoded.joined(separator: "/"))
        } catch {
            throw SafePathError(path: text, reason: error.reason)
        }
    }

    /// The path part of `text` when it already has the form the general way would produce: it
    /// starts with the storage's own normalized content root, and the rest is only the
    /// characters ``PercentEncoding`` leaves, `/` and well-formed `%XX`, without empty, `.` or
    /// `..` segments (a trailing `/` aside). That is every URL a publisher writes, read without
    /// parsing a URL; anything else returns nil and goes the general way.
    private func plainRemainder(_ text: String) -> Substring? {
        let prefix = plainPrefix
        guard text.hasPrefix(prefix) else { return nil }
        let rest = text.utf8.dropFirst(prefix.utf8.count)
        var segmentLength = 0
        var segmentDots = 0
        var escapeDigits = 0 // hex digits still expected after a `%`
        var lastWasSlash = false
        for byte in rest {
            if escapeDigits > 0 {
                guard
                    (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                        || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
                        || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
                else { return nil }
                escapeDigits -= 1
                segmentLength += 1
                continue
            }
            lastWasSlash = false
            if byte == UInt8(ascii: "/") {
                if segmentLength == 0 || segmentLength == segmentDots { return nil } // empty, "." or ".."
                segmentLength = 0
                segmentDots = 0
                lastWasSlash = true
            } else if byte == UInt8(ascii: "%") {
                escapeDigits = 2
                segmentLength += 1
            } else if PercentEncoding.isAllowed(byte) {
                if byte == UInt8(ascii: ".") { segmentDots += 1 }
                segmentLength += 1
            } else {
                return nil
            }
        }
        if escapeDigits > 0 { return nil }
        if !lastWasSlash, segmentLength > 0, segmentLength == segmentDots { return nil }
        return Substring(rest)
    }

    /// The URL to download a content file from: each component percent-encoded, so that any
    /// safe path gives a valid URL (a `:` in a first component would otherwise read as a scheme).
    public func contentURL(for path: SafeRelativePath) -> URL {
        guard !path.isRoot else { return contentRootURL }
        let encoded = path.components.map { PercentEncoding.encodeComponent($0) }
        // Every byte outside RFC 3986's unreserved and sub-delims is escaped, so this parses.
        return URL(string: contentRootText + encoded.joined(separator: "/"))!
    }

    /// scheme://host[:port]/path with scheme and host lower-cased and query and fragment dropped.
    package static func normalized(_ url: URL) -> String {
        guard var parts = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return url.absoluteString }
        parts.scheme = parts.scheme?.lowercased()
        parts.host = parts.host?.lowercased()
        if (parts.scheme == "http" && parts.port == 80) || (parts.scheme == "https" && parts.port == 443) {
            parts.port = nil
        }
        parts.query = nil
        parts.fragment = nil
        return parts.url?.absoluteString ?? url.absoluteString
    }
}
