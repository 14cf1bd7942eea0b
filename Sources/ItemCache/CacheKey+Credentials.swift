import Foundation
import Transport

/// Keys of loads that send a credential: an `Authorization`, `Cookie` or API-key header
/// (``HTTPRequest``'s rule), or a URL's user part, which libcurl sends as Basic auth. What one
/// credential fetched is never served to a load with another credential or none (RFC 9111 §3.5
/// has a shared cache refuse such responses outright): the key of a load that sends any gets
/// ` as sha256-…`, a digest of every credential it sends, so each credential has entries of its
/// own, and a load without one never finds them. The secret itself never enters the key.
///
/// A credential that changes (an OAuth access token refreshed every hour, a new session cookie)
/// would leave what the old one fetched behind. A load that names its account
/// (``LoadOptions/account``) is kept under ` as account-sha256-…` instead, a digest of the
/// account's name, whatever credential it sends: the account's next token finds it.
extension CacheKey {
    /// What starts the credential part of a key. A URL key cannot hold a space (it is escaped),
    /// a custom name is escaped, and a varying header's part is ` name=value`: no other key has it.
    static let credentialMarker = " as "

    /// What starts the credential part of a key kept for an account (``LoadOptions/account``).
    public static let accountMark = "account-"

    /// This key for a load that sends `headers` to `url`: the key itself when nothing sent is a
    /// credential; otherwise the key with ` as sha256-…` (`digest(_:)` of the credential
    /// headers, by lower-cased name and normalized value, and of the URL's user part as
    /// written). With an `account` (not empty), the key with ` as account-sha256-…`, a digest of
    /// the account's name, whatever is sent. A key that has a credential part already is
    /// returned as it is.
    public func sentWith(headers: [String: String], url: URL?, account: String? = nil) -> CacheKey {
        guard !rawValue.contains(Self.credentialMarker) else { return self }
        let part: String
        if let account, !account.isEmpty {
            // Not a credential's text (each of those is a `name: value` line): the two never meet.
            part = Self.accountMark + Self.digest("account " + account)
        } else if let credentials = Self.credentialText(headers: headers, url: url) {
            part = Self.digest(credentials)
        } else {
            return self
        }
        return CacheKey(rawValue: rawValue + Self.credentialMarker + part, context: context, url: self.url)
    }

    /// The credential part of this key: `sha256-…` for a credential's, `account-sha256-…` for
    /// an account's; nil for a key without one.
    public var credentialDigest: String? {
        guard let marker = primary.rawValue.range(of: Self.credentialMarker) else { return nil }
        return String(primary.rawValue[marker.upperBound...])
    }

    /// This key without its credential part (and without a variant's): the key a caller names
    /// an item by, whatever credential loads of it sent.
    public var withoutCredentials: CacheKey {
        guard let marker = rawValue.range(of: Self.credentialMarker) else { return self }
        return CacheKey(rawValue: String(rawValue[..<marker.lowerBound]), context: context, url: url)
    }

    /// The credentials a load sends, as one text to digest: nil when it sends none.
    static func credentialText(headers: [String: String], url: URL?) -> String? {
        var lines: [String] = []
        // Every load asks (a memory hit too): the usual one, without a credential header or a
        // user part, costs a look at the names, `url.user` and `url.password` (28 ns here; a scan of
        // `absoluteString` for `@` was 130 ns, a tenth of a hit by key).
        if headers.keys.contains(where: HTTPRequest.isCredentialHeader) {
            for (name, value) in normalizedHeaders(headers) where HTTPRequest.isCredentialHeader(name) {
                lines.append(name + ": " + value)
            }
            lines.sort()
        }
        if let url, url.user != nil || url.password != nil, url.host != nil,
            let components = URLComponents(url: url, resolvingAgainstBaseURL: true),
            let user = components.percentEncodedUser
        {
            // Not a header name (a header's name has no `:`): it cannot meet one.
            lines.append(":userinfo: " + user + (components.percentEncodedPassword.map { ":" + $0 } ?? ""))
        }
        return lines.isEmpty ? nil : lines.joined(separator: "\n")
    }
}
