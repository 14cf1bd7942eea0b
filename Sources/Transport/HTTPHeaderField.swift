/// One header field line of a response, as the server sent it: the name lower-cased, the value
/// with its surrounding whitespace removed.
///
/// ``HTTPResponse/headerFields`` keeps every line in order, repeated names included;
/// ``HTTPResponse/headers`` holds their RFC 9110 §5.3 combination.
public struct HTTPHeaderField: Sendable, Equatable, Hashable {
    /// The field name, lower-cased (`cache-control`).
    public var name: String
    /// The field value as sent (ISO-8859-1 bytes read as code points).
    public var value: String

    /// A field line from its parts; `name` is lower-cased.
    public init(name: String, value: String) {
        self.name = name.lowercased()
        self.value = value
    }

    /// One header line as it came off the wire (`Name: value` with or without its CR LF), read
    /// as the transport reads it; nil for a status line, the empty line, or a line with no colon.
    public static func parse(line bytes: [UInt8]) -> HTTPHeaderField? {
        bytes.withUnsafeBytes { raw in
            guard case .field(let name, let value) = HeaderLine(raw) else { return nil }
            return HTTPHeaderField(name: name, value: value)
        }
    }

    /// The lines combined by name as RFC 9110 §5.3 says: the values of lines with one name,
    /// in order, joined by `", "` into one list. Empty values add nothing to the list (an empty
    /// list element is ignored, §5.6.1). `Set-Cookie` cannot be combined (RFC 6265 §3): its
    /// last line stands, and ``HTTPResponse/headerFields`` keeps every one.
    public static func combined(_ fields: [HTTPHeaderField]) -> [String: String] {
        var headers: [String: String] = [:]
        for field in fields { combine(field, into: &headers) }
        return headers
    }

    /// The content codings a `Content-Encoding` value lists (RFC 9110 §8.4), in the order they
    /// were applied, lower-cased and trimmed, without `identity` and empty members: empty for an
    /// unencoded body (or no value).
    public static func contentCodings(_ value: String?) -> [String] {
        guard let value else { return [] }
        return value.split(separator: ",").map { $0.trimmingHTTPWhitespace().lowercased() }
            .filter { !$0.isEmpty && $0 != "identity" }
    }

    /// Adds one line to `headers`, combined with the lines of its name already there.
    static func combine(_ field: HTTPHeaderField, into headers: inout [String: String]) {
        guard let existing = headers[field.name], field.name != "set-cookie" else {
            headers[field.name] = field.value
            return
        }
        if field.value.isEmpty { return }
        headers[field.name] = existing.isEmpty ? field.value : existing + ", " + field.value
    }
}
