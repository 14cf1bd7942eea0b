import Foundation
import Transport

/// What the cache keeps of the HTTP response an item came from: its status, its header lines
/// (less those that framed the bytes on the wire) and its age base, so that a later use judges
/// freshness from the headers (``HTTPFreshnessModel``), a `304` updates them (RFC 9111 §4.3.4),
/// and `sync-agent cache get --include` shows them.
public struct HTTPResponseRecord: Sendable, Equatable {
    /// The status code the item was stored with (200, or a cached 404, 410, 301…).
    public var status: Int
    /// The header lines, names lower-cased, in order, repeated names included.
    public private(set) var headerFields: [HTTPHeaderField]
    /// The lines combined by name (RFC 9110 §5.3).
    public private(set) var headers: [String: String]
    /// The age base: the response time less its corrected initial age (RFC 9111 §4.2.3).
    public var born: Date
    /// Where the response came from when redirects led there: a digest of the URL the last
    /// redirect named (``target(of:through:)``), never the URL itself (it may hold a token).
    /// Nil when the URL asked answered. A `304` reached elsewhere does not confirm the stored
    /// body: its validators were another resource's.
    public var target: String?

    /// Fields a stored response does not keep: hop-by-hop fields and those that framed the
    /// body on the wire (the stored value is the decoded body, RFC 9111 §3.1, §3.2), and
    /// `Set-Cookie`: a session secret meant for the one response, which a cache that replays
    /// it would hand out again (and `--include` would print). The proxy's own fields go too
    /// (RFC 9111 §3.1), and so does every field a response's `Connection` names (hop-by-hop by
    /// its say, RFC 9110 §7.6.1; ``keptFields(_:)``).
    public static let unstoredFields: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade",
        "content-length", "content-encoding", "content-range", "set-cookie", "set-cookie2",
        "proxy-authenticate", "proxy-authentication-info", "proxy-authorization",
    ]

    /// `fields` less ``unstoredFields`` and the fields their `Connection` lines name.
    public static func keptFields(_ fields: [HTTPHeaderField]) -> [HTTPHeaderField] {
        var dropped = unstoredFields
        for field in fields where field.name == "connection" {
            for option in field.value.split(separator: ",") {
                dropped.insert(option.trimmingCharacters(in: .whitespaces).lowercased())
            }
        }
        return fields.filter { !dropped.contains($0.name) }
    }

    /// The most bytes of header text a record keeps (`encoded`): an origin that sends more
    /// (thousands of lines, huge values) gets only the fields caching reads, each up to
    /// ``largestKeptValue`` bytes, so no response can grow the index past the folder's budget.
    public static let largestKeptHeaders = 16 << 10
    /// The longest value of a field kept from an oversized head.
    public static let largestKeptValue = 4 << 10
    /// The fields caching reads, kept from an oversized head.
    public static let essentialFields: Set<String> = [
        "cache-control", "expires", "date", "age", "etag", "last-modified", "vary", "content-type", "pragma",
    ]

    /// A record of a `status` response with `fields`, its age counted from `born`, reached
    /// through redirects to `target` (``target(of:through:)``) when not nil.
    public init(status: Int, headerFields: [HTTPHeaderField], born: Date, target: String? = nil) {
        self.status = status
        self.target = target
        var kept = Self.keptFields(headerFields)
        if kept.reduce(0, { $0 + $1.name.utf8.count + $1.value.utf8.count + 2 }) > Self.largestKeptHeaders {
            kept = kept.filter {
                Self.essentialFields.contains($0.name) && $0.value.utf8.count <= Self.largestKeptValue
            }
            while kept.reduce(0, { $0 + $1.name.utf8.count + $1.value.utf8.count + 2 }) > Self.largestKeptHeaders {
                kept.removeLast()
            }
        }
        self.headerFields = kept
        self.headers = HTTPHeaderField.combined(self.headerFields)
        self.born = born
    }

    /// The record after a `304` with `fields` (RFC 9111 §4.3.4, §3.2): each name the 304
    /// carries replaces every stored line of that name; the other stored lines stay.
    public func updated(with fields: [HTTPHeaderField], born: Date) -> HTTPResponseRecord {
        let kept = Self.keptFields(fields)
        let replaced = Set(kept.map(\.name))
        return HTTPResponseRecord(
            status: status, headerFields: headerFields.filter { !replaced.contains($0.name) } + kept, born: born,
            target: target)
    }

    /// Where `url` led through `redirects` (each `Location` resolved against the URL before
    /// it), as a digest (`sha256-` and 24 hex digits); nil without redirects, or when the last
    /// names no URL.
    public static func target(of url: URL?, through redirects: [HTTPRedirect]) -> String? {
        guard !redirects.isEmpty else { return nil }
        var current = url
        for redirect in redirects {
            guard let location = redirect.headers["location"] else { return nil }
            current = URL(string: location.trimmingCharacters(in: .whitespaces), relativeTo: current)?.absoluteURL
        }
        return current.map { CacheKey.digest($0.absoluteString) }
    }

    // MARK: - Stored form

    /// The record as the index stores it: a version line, the status, the age base, then one
    /// `name:value` line per field with `\`, CR, LF and NUL escaped. A redirected response's
    /// record is version 2, whose fourth line is its ``target``: an older version sharing the
    /// folder uses such an item without its headers, and every other record stays version 1.
    var encoded: String {
        var text =
            target.map { "2\n\(status)\n\(born.timeIntervalSince1970)\n\($0)\n" }
            ?? "1\n\(status)\n\(born.timeIntervalSince1970)\n"
        for field in headerFields {
            text += field.name + ":" + Self.escape(field.value) + "\n"
        }
        return text
    }

    /// The record in `text`, or nil when it is not one (a row from a newer version, damage):
    /// the item is then used without its headers.
    init?(encoded text: String) {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        if lines.last == "" { lines.removeLast() }
        guard lines.count >= 3, lines[0] == "1" || lines[0] == "2", let status = Int(lines[1]),
            (100...999).contains(status), let born = Double(lines[2]), born.isFinite
        else { return nil }
        let target = lines[0] == "2" ? lines.count > 3 ? String(lines[3]) : nil : nil
        if lines[0] == "2" && target?.hasPrefix("sha256-") != true { return nil }
        var fields: [HTTPHeaderField] = []
        for line in lines.dropFirst(target == nil ? 3 : 4) {
            guard let colon = line.firstIndex(of: ":") else { return nil }
            fields.append(
                HTTPHeaderField(name: String(line[..<colon]), value: Self.unescape(line[line.index(after: colon)...])))
        }
        self.init(status: status, headerFields: fields, born: Date(timeIntervalSince1970: born), target: target)
    }

    private static func escape(_ value: String) -> String {
        guard value.unicodeScalars.contains(where: { $0 == "\\" || $0 == "\r" || $0 == "\n" || $0 == "\0" })
        else { return value }
        var out = ""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\r": out += "\\r"
            case "\n": out += "\\n"
            case "\0": out += "\\0"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func unescape(_ value: Substring) -> String {
        guard value.contains("\\") else { return String(value) }
        var out = ""
        var escaping = false
        for scalar in value.unicodeScalars {
            if escaping {
                switch scalar {
                case "r": out += "\r"
                case "n": out += "\n"
                case "0": out += "\0"
                default: out.unicodeScalars.append(scalar)
                }
                escaping = false
            } else if scalar == "\\" {
                escaping = true
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
