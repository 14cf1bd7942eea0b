/// A strong entity tag built from a file's identity: inode, size and modification time.
///
/// Two snapshot folders hold different inodes, so switching the served root changes every tag even
/// when sizes and times happen to agree, the way a host's tags change with each published commit.
struct EntityTag: Hashable, Sendable {
    /// The tag as sent in `ETag`, quotes included.
    let value: String

    init(inode: UInt64, size: Int, modificationNanoseconds: Int64) {
        value = "\"\(Self.hex(inode))-\(Self.hex(size))-\(Self.hex(modificationNanoseconds))\""
    }

    private static func hex(_ number: some BinaryInteger) -> String {
        String(number, radix: 16)
    }

    /// Weak comparison against an `If-None-Match` list (RFC 9110 §13.1.2); `*` matches any file.
    func matches(ifNoneMatch header: String) -> Bool {
        Self.matches(value, ifNoneMatch: header)
    }

    /// Strong comparison against `If-Range` (RFC 9110 §13.1.5). A date or a weak tag never matches,
    /// so the client gets the whole file rather than bytes it cannot safely splice.
    func matches(ifRange header: String) -> Bool {
        Self.matches(value, ifRange: header)
    }

    /// ``matches(ifNoneMatch:)`` for a tag given as sent (quotes included), such as the tag of a
    /// compressed representation.
    static func matches(_ tag: String, ifNoneMatch header: String) -> Bool {
        let trimmed = header.trimmingWhitespace()
        if trimmed == "*" { return true }
        return trimmed.split(separator: ",").contains { candidate in
            var candidate = candidate.trimmingWhitespace()
            if candidate.hasPrefix("W/") { candidate.removeFirst(2) }
            return candidate == tag
        }
    }

    /// Strong comparison against an `If-Match` list (RFC 9110 §13.1.1); `*` matches any file, a
    /// weak tag never matches.
    static func matches(_ tag: String, ifMatch header: String) -> Bool {
        let trimmed = header.trimmingWhitespace()
        if trimmed == "*" { return true }
        guard !tag.hasPrefix("W/") else { return false }
        return trimmed.split(separator: ",").contains { $0.trimmingWhitespace() == tag }
    }

    /// ``matches(ifRange:)`` for a tag given as sent.
    static func matches(_ tag: String, ifRange header: String) -> Bool {
        header.trimmingWhitespace() == tag
    }
}
