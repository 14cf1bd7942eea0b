/// One request head as a client sent it (RFC 9112 §3 and §5), read strictly: what a static host
/// would refuse is refused here with the status to answer, never guessed at.
struct RequestHead: Sendable, Equatable {
    /// The method, case as sent (`GET`); methods are case-sensitive.
    var method: String
    /// The path of the target up to its query, still percent-encoded (`/a%20b.zip`); an
    /// absolute-form target (`http://host/a`) is reduced to its path.
    var path: String
    /// The `x` of `HTTP/1.x`.
    var minorVersion: Int
    /// The header lines in order, names lower-cased, values without surrounding blanks.
    var headers: [Header]

    struct Header: Sendable, Equatable {
        var name: String
        var value: String
    }

    /// Why a head was refused, and the status that says so.
    enum Refusal: Error, Equatable {
        /// A line that is not HTTP/1.1's grammar: 400.
        case malformed(String)
        /// A major version other than 1 (`HTTP/2.0`, `HTTP/0.9`): 505. A later 1.x is served as
        /// 1.1, as RFC 9110 §2.5 asks.
        case unsupportedVersion

        var status: Int {
            switch self {
            case .malformed: 400
            case .unsupportedVersion: 505
            }
        }
    }

    /// The lines of `field`, joined with `, ` as RFC 9110 §5.3 allows, or nil when absent.
    /// `name` is lower case.
    func value(_ name: String) -> String? {
        var joined: String?
        for header in headers where header.name == name {
            joined = joined.map { $0 + ", " + header.value } ?? header.value
        }
        return joined
    }

    /// Whether the connection stays open after the answer: HTTP/1.1 unless the client says
    /// `Connection: close`; HTTP/1.0 never (this server does not offer 1.0 keep-alive).
    var keepsAlive: Bool {
        guard minorVersion >= 1 else { return false }
        let options = (value("connection") ?? "").lowercased().split(separator: ",")
        return !options.contains { $0.trimmingCharacters(in: .whitespaces) == "close" }
    }

    /// The head in `bytes`: the request line and the header lines, each ending in CRLF or LF,
    /// without the empty line that ends the head. Empty lines before the request line are
    /// skipped (RFC 9112 §2.2).
    static func parse(_ bytes: ArraySlice<UInt8>) throws(Refusal) -> RequestHead {
        var lines = Self.lines(bytes)
        while let first = lines.first, first.isEmpty { lines.removeFirst() }
        guard let requestLine = lines.first else { throw .malformed("no request line") }
        let parts = requestLine.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw .malformed("the request line is not METHOD TARGET HTTP/1.1")
        }
        guard parts[0].allSatisfy(Self.isTokenByte) else { throw .malformed("the method is not a token") }
        guard parts[1].allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw .malformed("the target holds a blank, a control or a non-ASCII byte")
        }
        let version = Array(parts[2])
        guard version.count == 8, version.starts(with: Array("HTTP/".utf8)), version[6] == UInt8(ascii: "."),
            (0x30...0x39).contains(version[5]), (0x30...0x39).contains(version[7])
        else { throw .malformed("the version is not HTTP/x.y") }
        guard version[5] == UInt8(ascii: "1") else { throw .unsupportedVersion }
        guard let path = Self.path(ofTarget: String(decoding: parts[1], as: UTF8.self)) else {
            throw .malformed("the target is neither /path nor http://host/path")
        }

        var headers: [Header] = []
        for line in lines.dropFirst() {
            // A line folded onto the one before (obs-fold) is refused, as RFC 9112 §5.2 allows.
            guard let first = line.first, first != UInt8(ascii: " "), first != UInt8(ascii: "\t") else {
                throw .malformed("a header line starts with a blank (a folded line)")
            }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex,
                line[..<colon].allSatisfy(Self.isTokenByte)
            else { throw .malformed("a header line has no NAME: before its value") }
            let value = line[line.index(after: colon)...]
            guard value.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else {
                throw .malformed("a header value holds a control byte")
            }
            headers.append(
                Header(
                    name: String(decoding: line[..<colon], as: UTF8.self).lowercased(),
                    value: String(decoding: Self.trimmingBlanks(value), as: UTF8.self)))
        }
        return RequestHead(
            method: String(decoding: parts[0], as: UTF8.self), path: path,
            minorVersion: Int(version[7] - 0x30), headers: headers)
    }

    /// Where the head in `bytes` ends: the index just past the empty line after the header
    /// lines (`\r\n\r\n`, or `\n\n` with bare line feeds), searching from `start` on; nil
    /// when it has not all arrived. The caller drops the empty lines a client may send before
    /// the request line first (``leadingLineEnds(in:)``), or they would end an empty head.
    static func end(in bytes: [UInt8], from start: Int) -> Int? {
        var index = max(start, 1)
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "\n") {
                let before = bytes[index - 1]
                if before == UInt8(ascii: "\n")
                    || (before == UInt8(ascii: "\r") && index >= 2 && bytes[index - 2] == UInt8(ascii: "\n"))
                {
                    return index + 1
                }
            }
            index += 1
        }
        return nil
    }

    /// How many CR and LF bytes `bytes` starts with: empty lines before a request line, which
    /// RFC 9112 §2.2 lets a server ignore.
    static func leadingLineEnds(in bytes: [UInt8]) -> Int {
        bytes.prefix { $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\n") }.count
    }

    /// The lines of `bytes`, split at LF with a CR before it dropped. A CR anywhere else stays
    /// in its line and fails the checks.
    private static func lines(_ bytes: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
        var lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            .map { $0.last == UInt8(ascii: "\r") ? $0.dropLast() : $0 }
        // The empty line that ends the head, when the bytes hold it.
        while lines.last?.isEmpty == true { lines.removeLast() }
        return lines
    }

    /// The path of an origin-form (`/a?q`) or absolute-form (`http://host/a?q`) target, up to
    /// its query; nil for any other form.
    static func path(ofTarget target: String) -> String? {
        var rest = Substring(target)
        if !rest.hasPrefix("/") {
            let lowered = rest.lowercased()
            guard let schemeEnd = ["http://", "https://"].first(where: { lowered.hasPrefix($0) }) else { return nil }
            rest = rest.dropFirst(schemeEnd.count)
            guard let slash = rest.firstIndex(of: "/") else {
                // `http://host` and `http://host?q` name the root.
                return "/"
            }
            rest = rest[slash...]
        }
        return String(rest.prefix { $0 != "?" && $0 != "#" })
    }

    /// RFC 9110 §5.6.2's `tchar`.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    private static func trimmingBlanks(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        let isBlank = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
        guard let first = bytes.firstIndex(where: { !isBlank($0) }), let last = bytes.lastIndex(where: { !isBlank($0) })
        else { return [] }
        return bytes[first...last]
    }
}
