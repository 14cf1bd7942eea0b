import FileKit
import Foundation

/// Keys of the variants of one URL (RFC 9111 §4.1): a response that names request headers in
/// `Vary` is stored under its primary key plus the values those headers had in the request
/// (its secondary key), so each variant has a row of its own, found by range from the primary
/// and removed with it.
extension CacheKey {
    /// What separates a primary key from a variant's secondary key. A URL key cannot hold a
    /// space (it is escaped), so no primary key has it.
    static let variantMarker = " vary "

    /// The key of the variant of this (primary) key selected by the request headers `request`
    /// (names in any case, values as sent) for the header names `names` (lower-case, sorted):
    /// each name with a digest of its value, whitespace-normalized (RFC 9111 §4.1), or alone
    /// when the request did not send it. A digest, not the value: a response that varies by
    /// `Authorization` or `Cookie` must not put the secret in the index or a listing.
    func variant(names: [String], request: [String: String]) -> CacheKey {
        let values = Self.normalizedHeaders(request)
        let parts = names.map { name -> String in
            guard let value = values[name] else { return Self.encode(Array(name.utf8)) }
            return Self.encode(Array(name.utf8)) + "=" + FileDigest.sha256(Data(value.utf8)).prefix(24)
        }
        return CacheKey(
            rawValue: rawValue + Self.variantMarker + parts.joined(separator: "&"), context: context, url: url)
    }

    /// The primary key of a variant's key (the URL's key, without the request headers that
    /// selected it); the key itself when it is no variant.
    public var primary: CacheKey {
        guard let marker = rawValue.range(of: Self.variantMarker) else { return self }
        return CacheKey(rawValue: String(rawValue[..<marker.lowerBound]), context: context, url: url)
    }

    /// The header names a variant key was selected by; nil for a key that is no variant.
    var variantNames: [String]? {
        guard let marker = rawValue.range(of: Self.variantMarker) else { return nil }
        return rawValue[marker.upperBound...].split(separator: "&").map {
            String($0.prefix { $0 != "=" }).removingPercentEncoding ?? String($0)
        }
    }

    /// Request headers by lower-cased name, lines of one name combined, runs of whitespace as
    /// one space and none at either end.
    static func normalizedHeaders(_ headers: [String: String]) -> [String: String] {
        var result: [String: String] = [:]
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            let normalized = value.split(whereSeparator: { $0 == " " || $0 == "\t" }).joined(separator: " ")
            let lowered = name.lowercased().trimmingCharacters(in: .whitespaces)
            result[lowered] = result[lowered].map { $0 + ", " + normalized } ?? normalized
        }
        return result
    }
}
