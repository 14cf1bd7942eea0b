/// The directives of a `Cache-Control` field value (RFC 9111 §5.2), parsed by the list grammar
/// of RFC 9110 §5.6: `name[=token|"quoted string"]`, comma-separated, with optional whitespace.
/// Names are case-insensitive; a comma inside a quoted string (`no-cache="a, b"`) does not end
/// the directive. A repeated directive keeps every value, in order.
public struct CacheDirectives: Sendable, Equatable {
    /// One directive: its lower-cased name and its argument, if it had one.
    public struct Directive: Sendable, Equatable {
        /// The name, lower-cased.
        public var name: String
        /// The argument: nil without `=`; `""` for `name=`.
        public var argument: String?
        /// Whether the argument was a quoted string.
        public var quoted: Bool
    }

    /// Every directive, in order.
    public var directives: [Directive]

    /// The directives of `value` (a combined `Cache-Control` value, or nil for none).
    public init(_ value: String?) {
        directives = value.map(Self.parse) ?? []
    }

    /// Whether a directive named `name` (lower-case) is present, with or without an argument.
    public func has(_ name: String) -> Bool {
        directives.contains { $0.name == name }
    }

    /// A delta-seconds directive's value (RFC 9111 §1.2.2).
    public enum Seconds: Sendable, Equatable {
        /// Not present.
        case absent
        /// Present with a valid value; one too big to hold is 2^31 (§1.2.2).
        case value(Int)
        /// Present without a value (`max-stale`), where that is allowed.
        case bare
        /// Present but not a valid delta-seconds: quoted (`max-age="60"`, a form senders must
        /// not use), empty, signed, not digits, or repeated with different values.
        case invalid
    }

    /// The value of the delta-seconds directive `name` (lower-case).
    public func seconds(_ name: String) -> Seconds {
        let found = directives.filter { $0.name == name }
        guard let first = found.first else { return .absent }
        let values = found.map { Self.deltaSeconds($0) }
        // §4.2.1: with several values, use the first or treat the response as stale; different
        // values are read as invalid (stale), the safer of the two.
        guard values.allSatisfy({ $0 == values[0] }) else { return .invalid }
        if first.argument == nil { return .bare }
        return values[0]
    }

    /// The largest delta-seconds kept: 2^31 (RFC 9111 §1.2.2).
    public static let largestSeconds = 2_147_483_648

    /// A delta-seconds value: one or more digits, nothing else; an overflow is 2^31.
    public static func deltaSeconds(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        var value = 0
        for byte in text.utf8 {
            value = value * 10 + Int(byte - 0x30)
            if value >= largestSeconds { return largestSeconds }
        }
        return value
    }

    private static func deltaSeconds(_ directive: Directive) -> Seconds {
        guard let argument = directive.argument else { return .bare }
        guard !directive.quoted, let value = deltaSeconds(Substring(argument)) else { return .invalid }
        return .value(value)
    }

    private static func parse(_ value: String) -> [Directive] {
        var result: [Directive] = []
        let bytes = Array(value.utf8)
        var index = 0
        func skipSpace() { while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x09 { index += 1 } }
        while index < bytes.count {
            skipSpace()
            // The name: up to `=`, `,` or whitespace.
            let nameStart = index
            while index < bytes.count, bytes[index] != 0x3D, bytes[index] != 0x2C, bytes[index] != 0x20,
                bytes[index] != 0x09
            {
                index += 1
            }
            let name = String(decoding: bytes[nameStart..<index], as: UTF8.self).lowercased()
            skipSpace()
            var argument: String?
            var quoted = false
            if index < bytes.count, bytes[index] == 0x3D {
                index += 1
                skipSpace()
                if index < bytes.count, bytes[index] == 0x22 {
                    quoted = true
                    index += 1
                    var text: [UInt8] = []
                    while index < bytes.count, bytes[index] != 0x22 {
                        if bytes[index] == 0x5C, index + 1 < bytes.count { index += 1 }
                        text.append(bytes[index])
                        index += 1
                    }
                    index += 1
                    argument = String(decoding: text, as: UTF8.self)
                } else {
                    let start = index
                    while index < bytes.count, bytes[index] != 0x2C { index += 1 }
                    var end = index
                    while end > start, bytes[end - 1] == 0x20 || bytes[end - 1] == 0x09 { end -= 1 }
                    argument = String(decoding: bytes[start..<end], as: UTF8.self)
                }
            }
            // Whatever is left up to the next comma belongs to no directive.
            while index < bytes.count, bytes[index] != 0x2C { index += 1 }
            index += 1
            if !name.isEmpty { result.append(Directive(name: name, argument: argument, quoted: quoted)) }
        }
        return result
    }
}

extension CacheDirectives {
    /// The directives of a request with `headers` (names in any case): its `Cache-Control`, or,
    /// without one, `Pragma: no-cache` read as `no-cache` (RFC 9111 §5.4).
    public static func ofRequest(_ headers: [String: String]) -> CacheDirectives {
        guard !headers.isEmpty else { return CacheDirectives(nil) }
        var cacheControl: String?
        var pragma: String?
        for (name, value) in headers {
            switch name.lowercased() {
            case "cache-control": cacheControl = cacheControl.map { $0 + ", " + value } ?? value
            case "pragma": pragma = value
            default: break
            }
        }
        if let cacheControl { return CacheDirectives(cacheControl) }
        if let pragma, CacheDirectives(pragma).has("no-cache") { return CacheDirectives("no-cache") }
        return CacheDirectives(nil)
    }
}
