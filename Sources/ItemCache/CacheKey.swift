import FileKit
import Foundation
import PercentDecoding
import Transport

/// What identifies a cached item: a URL with its parameters, normalized so that spellings of one
/// request share one entry, or a custom name for an item made locally.
///
/// Normalization (``init(url:parameters:varyingHeaders:context:)``):
/// - the scheme and host are lower-cased, a default port (80 for http, 443 for https) and the
///   fragment are dropped, and an empty path is `/`;
/// - the URL's query items and `parameters` are merged and sorted by name (stable: the values of
///   one name keep their order, which a server may read as a list), so the order of names does
///   not matter;
/// - percent-encoding is made canonical as RFC 3986 §6.2.2 allows: an escaped unreserved
///   character (letters, digits, `-._~`) is decoded (`%7e`, `%7E` and `~` are one key), other
///   escapes get upper-case hex, and bytes that may not appear literally (space, non-ASCII) are
///   escaped; a reserved character written literally (`+`, `;`, `,`…) stays literal and apart
///   from its escape, since a server may read them differently (`+` is a space to a form
///   decoder, `%2B` a plus sign). `parameters` are text, escaped byte for byte;
/// - literal `.` and `..` path segments are removed (RFC 3986 §5.2.4) as libcurl removes them
///   from what it sends, so `/a/./b/../c` and `/a/c` are one key; an escaped dot segment
///   (`%2E%2E`), which libcurl sends as it is, keeps a key of its own;
/// - user info is never kept: `user:password@` becomes `user:***@` and a token alone `***@`
///   (`Redaction`), so no secret reaches the index or a listing;
/// - headers that vary the response (`Accept`, say) join the key with lower-cased names and
///   trimmed values, sorted by name; a credential's value (`Authorization`, `Cookie`, a name
///   holding `token`, `key`, `auth`…) as a digest (`sha256-…`), so no secret reaches the index;
/// - a context name (ISCache's contexts) keeps otherwise equal keys apart;
/// - the loader keeps what a load that sent a credential fetched under the key plus
///   ` as sha256-…` (``sentWith(headers:url:account:)``), so it is never served to another credential.
///
/// The index stores the whole key (``rawValue``); only the blob file is named by a hash of it
/// (``fileName``), so two keys never share an entry even when hashes would collide.
public struct CacheKey: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The canonical key, as the index stores it.
    public let rawValue: String
    /// The context it belongs to; empty for none.
    public let context: String
    /// The normalized URL with its sorted query (no context, no varying headers); nil for a
    /// custom key.
    public let url: String?

    /// The key of `url` fetched with `parameters` (merged into its query), where the response
    /// varies by `varyingHeaders`, in `context`. Throws for a URL without a scheme or host, or a
    /// context name with spaces or control characters.
    public init(
        url: URL, parameters: RequestParameters = [:], varyingHeaders: [String: String] = [:],
        context: String = ""
    ) throws(ItemCacheError) {
        try Self.checkContext(context)
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: true),
            let scheme = components.scheme?.lowercased(), !scheme.isEmpty
        else {
            throw ItemCacheError(
                code: .invalidKey,
                message: "'\(Redaction.url(url))' has no scheme; give an absolute URL such as https://host/path")
        }
        var text = scheme + ":"
        let host = components.percentEncodedHost.flatMap { $0.isEmpty ? nil : Self.canonicalHost($0) }
        if let host {
            text += "//"
            if let user = components.percentEncodedUser.map(Self.canonical) {
                // The secret never enters the key: the index and every listing show this. A
                // user name that is itself a token (`TOKEN:x-oauth-basic@`) joins as its digest.
                if let password = components.percentEncodedPassword {
                    let secret = Redaction.userIsSecret(ArraySlice(user.utf8), password: ArraySlice(password.utf8))
                    text += (secret ? Self.digest(user) : user) + ":" + Redaction.mask + "@"
                } else {
                    text += Redaction.mask + "@"
                }
            }
            text += host
            if let port = components.port, port != Self.defaultPort(scheme) { text += ":\(port)" }
        } else if scheme == "http" || scheme == "https" {
            throw ItemCacheError(
                code: .invalidKey,
                message: "'\(Redaction.url(url))' has no host; give an absolute URL such as https://host/path")
        } else if components.percentEncodedHost != nil {
            // An empty authority (`file:///p`, `x://` + a path): kept, or a path starting with
            // `//` would read back as an authority (found by `make fuzz`).
            text += "//"
        }
        // libcurl sends `/a/./../b` as `/b` (RFC 3986 §5.2.4) but `/a/%2E%2E/b` as it is, and a
        // server may answer that spelling otherwise (a 404, say), so the key follows libcurl: the
        // literal dot segments go, and an escaped one stays escaped (a fixed point). A path with
        // no segment starting with a dot (nearly all) takes neither step.
        var path = Self.canonical(
            host == nil ? components.percentEncodedPath : Self.removingDotSegments(components.percentEncodedPath))
        if host != nil, Self.hasDotSegmentStart(path) {
            path = path.split(separator: "/", omittingEmptySubsequences: false)
                .map { $0 == "." ? "%2E" : $0 == ".." ? "%2E%2E" : String($0) }.joined(separator: "/")
        }
        if Self.mayHoldPathParameters(path), Self.redacts(path) {
            // A path parameter holding a secret (`/a;jsessionid=…/b`): its segment joins as a digest.
            path = path.split(separator: "/", omittingEmptySubsequences: false)
                .map { Self.redacts("/" + $0) ? Self.digest(String($0)) : String($0) }.joined(separator: "/")
        }
        text += path.isEmpty && host != nil ? "/" : path
        // A name without `=` stays so (`?x` and `?x=` are two URIs a server may tell apart,
        // RFC 3986 §6.2.3), and so does an empty query (`/?` is not `/`).
        var items: [(String, String?)] = (components.percentEncodedQueryItems ?? []).map {
            (Self.canonical($0.name), $0.value.map(Self.canonical))
        }
        for (name, value) in parameters.pairs {
            items.append((Self.encode(Array(name.utf8)), Self.encode(Array(value.utf8))))
        }
        if !items.isEmpty {
            // Stable by name: the values of one name keep their order.
            items = items.enumerated().sorted { lhs, rhs in
                lhs.element.0 != rhs.element.0
                    ? lhs.element.0.utf8.lexicographicallyPrecedes(rhs.element.0.utf8) : lhs.offset < rhs.offset
            }.map(\.element)
            // A secret's value (`?access_token=…`, a nested URL's password) joins as a digest, as
            // a credential header's does.
            text +=
                "?"
                + items.map { name, value in
                    value.map { "\(name)=\(Self.isSecret($0, named: name) ? Self.digest($0) : $0)" } ?? name
                }.joined(separator: "&")
        } else if components.percentEncodedQuery != nil {
            text += "?"
        }
        let headers =
            varyingHeaders
            .map {
                (
                    $0.key.lowercased().trimmingCharacters(in: .whitespaces),
                    $0.value.trimmingCharacters(in: .whitespaces)
                )
            }
            .sorted { $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) }
        self.context = context
        self.url = text
        // A credential's value (`Authorization`, `Cookie`, `X-Api-Key`…) joins the key as a
        // digest, as a server's `Vary` values do (CacheKey+Variant.swift): never in the index,
        // a listing or an error.
        let headerText =
            headers.isEmpty
            ? ""
            : " "
                + headers.map { name, value in
                    let shown = Self.isCredentialHeader(name) ? Self.digest(value) : value
                    return "\(Self.encode(Array(name.utf8)))=\(Self.encode(Array(shown.utf8)))"
                }.joined(separator: "&")
        self.rawValue = (context.isEmpty ? "" : context + " ") + text + headerText
    }

    /// Whether a varying header named `name` carries a credential (``HTTPRequest``'s rule:
    /// `cookie`, or a name `Redaction` takes for a secret's: `authorization`, `x-api-key`).
    static func isCredentialHeader(_ name: String) -> Bool {
        HTTPRequest.isCredentialHeader(name)
    }

    /// An absolute path without its literal `.` and `..` segments (RFC 3986 §5.2.4), as
    /// libcurl sends it: `/a/./b/../c` is `/a/c`, a `..` above the root stays at the root, and a
    /// path ending in a dot segment keeps its final `/`. Escapes are not read (`%2E%2E` and
    /// `..%2F` are segments of their own); a path that is empty or relative is returned as it is.
    static func removingDotSegments(_ path: String) -> String {
        // A dot segment starts after a `/`: a path without `/.` has none.
        guard path.hasPrefix("/"), hasDotSegmentStart(path) else { return path }
        var output: [Substring] = []
        let segments = path.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        for (index, segment) in segments.enumerated() {
            let last = index == segments.count - 1
            switch segment {
            case ".": if last { output.append("") }
            case "..":
                _ = output.popLast()
                if last { output.append("") }
            default: output.append(segment)
            }
        }
        return "/" + output.joined(separator: "/")
    }

    /// Whether `path` holds `/.` (where a dot segment could start), on the bytes: Foundation's
    /// `contains` was a tenth of making a key.
    static func hasDotSegmentStart(_ path: String) -> Bool {
        var previous: UInt8 = 0
        for byte in path.utf8 {
            if previous == UInt8(ascii: "/") && byte == UInt8(ascii: ".") { return true }
            previous = byte
        }
        return false
    }

    /// What starts a credential's digest in a key.
    static let digestMark = "sha256-"

    /// How a secret joins a key: `sha256-` and the first 96 bits of its SHA-256, in hex. Keys
    /// with different secrets stay apart (a token may pick what the server answers), and the
    /// index never holds the secret itself. A short secret (a PIN) can be guessed back from its
    /// digest: the cache folder is the app's own (docs/security.md).
    static func digest(_ secret: String) -> String {
        digestMark + FileDigest.sha256(Data(secret.utf8)).prefix(24)
    }

    /// Whether a query parameter's `value` is a secret ``redacts(_:)`` would mask: its name
    /// says so, or the value holds a URL with one (only a value with `://`, escaped or not, or
    /// `@` is looked into: a key is made on every memory hit).
    static func isSecret(_ value: String, named name: String) -> Bool {
        if Redaction.isSecretName(name.utf8) { return true }
        guard value.utf8.contains(UInt8(ascii: "@")) || contains(value, "://", "%3a") else { return false }
        return redacts("/?\(name)=\(value)")
    }

    /// Whether `path` may hold a path parameter (`;name=value`, the `;` plain or escaped): only
    /// such a path is looked into.
    static func mayHoldPathParameters(_ path: String) -> Bool {
        contains(path, ";", "%3b")
    }

    /// Whether `text` holds `plain` as it is, or `escaped` (`%` and two characters, the letter
    /// in either case): on the bytes, as a key is made on every memory hit.
    private static func contains(_ text: String, _ plain: StaticString, _ escaped: StaticString) -> Bool {
        let bytes = Array(text.utf8)
        let plain = UnsafeBufferPointer(start: plain.utf8Start, count: plain.utf8CodeUnitCount)
        let escaped = UnsafeBufferPointer(start: escaped.utf8Start, count: escaped.utf8CodeUnitCount)
        for start in bytes.indices {
            if bytes.count - start >= plain.count, plain.indices.allSatisfy({ bytes[start + $0] == plain[$0] }) {
                return true
            }
            if bytes.count - start >= 3, bytes[start] == UInt8(ascii: "%"), bytes[start + 1] == escaped[1],
                bytes[start + 2] | 0x20 == escaped[2]
            {
                return true
            }
        }
        return false
    }

    /// Whether `Redaction` would mask any of `pathAndQuery` (a secret parameter's value, a
    /// nested URL's password): such a part joins the key as its ``digest(_:)``.
    static func redacts(_ pathAndQuery: String) -> Bool {
        let probe = "http://h" + pathAndQuery
        return Redaction.urls(probe) != probe
    }

    /// The key of an item made locally (RXWebCache's wrapper items, NBImageCache's ids): any
    /// name, kept apart from every URL key.
    public static func custom(_ name: String, context: String = "") throws(ItemCacheError) -> CacheKey {
        try checkContext(context)
        return CacheKey(
            rawValue: (context.isEmpty ? "" : context + " ") + "custom:" + encode(Array(name.utf8)), context: context,
            url: nil)
    }

    /// A key as the index stored it.
    init(rawValue: String, context: String, url: String?) {
        self.rawValue = rawValue
        self.context = context
        self.url = url
    }

    /// A stable 64-bit number for the key (the first bytes of its SHA-256): the key's slot in
    /// the cross-process lock file.
    var slotHash: UInt64 {
        UInt64(fileName.prefix(16), radix: 16) ?? 0
    }

    /// Keys are equal when their canonical text is: ``context`` and ``url`` are parts of it.
    public static func == (lhs: CacheKey, rhs: CacheKey) -> Bool { lhs.rawValue == rhs.rawValue }

    /// Hashes the canonical text only (the memory tier hashes keys on every hit).
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }

    /// The name of the item's blob file: the SHA-256 of ``rawValue``, in hex.
    public var fileName: String { FileDigest.sha256(Data(rawValue.utf8)) }

    /// The key as stored.
    public var description: String { rawValue }

    /// Keys sort by their canonical text, byte by byte.
    public static func < (lhs: CacheKey, rhs: CacheKey) -> Bool {
        lhs.rawValue.utf8.lexicographicallyPrecedes(rhs.rawValue.utf8)
    }

    // MARK: - Canonical percent-encoding

    static func defaultPort(_ scheme: String) -> Int? {
        switch scheme {
        case "http", "ws": 80
        case "https", "wss": 443
        default: nil
        }
    }

    private static func checkContext(_ context: String) throws(ItemCacheError) {
        if context.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F })
        {
            throw ItemCacheError(
                code: .invalidKey,
                message:
                    "context '\(context)' has spaces or control characters; name contexts with one word such as 'thumbnails'"
            )
        }
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
            || byte == UInt8(ascii: "~")
    }

    private static let hex = Array("0123456789ABCDEF".utf8)

    /// Raw bytes, escaped canonically (`/` too, unless `keepSlashes`).
    static func encode(_ bytes: [UInt8], keepSlashes: Bool = false) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        for byte in bytes {
            if isUnreserved(byte) || (keepSlashes && byte == UInt8(ascii: "/")) {
                out.append(byte)
            } else {
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// An already percent-encoded component made canonical (RFC 3986 §6.2.2): an escaped
    /// unreserved byte is decoded, any other escape keeps its byte escaped (upper-case hex), a
    /// literal reserved character (`+`, `/`, `;`, `,`, `:`, `@`, …) stays literal, and any
    /// other literal byte (space, non-ASCII, a stray `%`) is escaped. So `+` and `%2B`, and a
    /// path's `/` and `%2F`, stay apart: a server may read them differently.
    static func canonical(_ encoded: String) -> String {
        var out: [UInt8] = []
        var input = Array(encoded.utf8)[...]
        while let byte = input.popFirst() {
            if byte == UInt8(ascii: "%"), input.count >= 2,
                let high = PercentDecoding.hexValue(input[input.startIndex]),
                let low = PercentDecoding.hexValue(input[input.startIndex + 1])
            {
                let value = high << 4 | low
                input = input.dropFirst(2)
                if isUnreserved(value) {
                    out.append(value)
                } else {
                    out += [UInt8(ascii: "%"), hex[Int(value >> 4)], hex[Int(value & 0x0F)]]
                }
            } else if isUnreserved(byte) || isReservedLiteral(byte) {
                out.append(byte)
            } else {
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// A host as it was written (percent-encoded), made canonical: escapes as ``canonical(_:)``
    /// makes them, letters lower-cased (RFC 3986 §6.2.2.1), an IP literal (`[::1]`) kept as it is
    /// but lower-cased. The decoded host would let an escaped `\` or `/` into the key, which then
    /// reads back as another URL.
    static func canonicalHost(_ encoded: String) -> String {
        if encoded.hasPrefix("[") { return encoded.lowercased() }
        // ``canonical(_:)`` leaves only ASCII: letters outside escapes are lower-cased by byte.
        var out = Array(canonical(encoded).utf8)
        var escapeLeft = 0
        for index in out.indices {
            if out[index] == UInt8(ascii: "%") {
                escapeLeft = 2
            } else if escapeLeft > 0 {
                escapeLeft -= 1
            } else if out[index] >= UInt8(ascii: "A") && out[index] <= UInt8(ascii: "Z") {
                out[index] |= 0x20
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// RFC 3986's sub-delims and the `:`, `@`, `/`, `?` a path or query may hold literally.
    /// (`&` and `=` never reach here inside a query item: they separate items.)
    private static func isReservedLiteral(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
            UInt8(ascii: ")"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="),
            UInt8(ascii: ":"),
            UInt8(ascii: "@"), UInt8(ascii: "/"), UInt8(ascii: "?"):
            true
        default:
            false
        }
    }
}
