/// The reader behind ``JSONValue/parse(_:)`` and ``ChangeListReader``: a cursor over UTF-8 bytes
/// that either builds values or checks and skips them without allocating.
///
/// Both ways run the same code, so a document fails at the same byte with the same reason
/// whether it is built or skipped. `bytes` must stay valid while the parser is used: callers
/// hold it inside `withUnsafeBytes`.
package struct JSONParser {
    package let bytes: UnsafeRawBufferPointer
    package var index = 0
    package var depth = 0

    package init(bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
        // Skip a UTF-8 byte order mark.
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { index = 3 }
    }

    /// A string as it stands in the text: `start` is its opening quote.
    package struct StringToken: Equatable {
        var start: Int
        /// The bytes between the quotes.
        var contents: Range<Int>
        /// Whether it holds a backslash escape (otherwise its bytes are its UTF-8, as checked).
        var escaped: Bool
    }

    package mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        let value = try readValue(build: true)!
        try finishDocument()
        return value
    }

    package mutating func finishDocument() throws(JSONParseError) {
        skipWhitespace()
        if index != bytes.count { throw fail("unexpected text after the end of the document") }
    }

    /// The error at the cursor; for a text in UTF-16 or UTF-32 (saved so by an editor or a shell
    /// such as PowerShell), that encoding instead, which is what the publisher must fix.
    package func fail(_ reason: String) -> JSONParseError {
        if let encoding = Self.wideEncoding(of: bytes) {
            return JSONParseError(
                offset: 0, reason: "the text is \(encoding), not UTF-8 (RFC 8259 §8.1); save it as UTF-8")
        }
        return JSONParseError(offset: index, reason: reason)
    }

    /// `UTF-16LE`, `UTF-16BE`, `UTF-32LE` or `UTF-32BE` for a text in that encoding, by its byte
    /// order mark or by the zero bytes that a JSON text's first (ASCII) characters have in it
    /// (RFC 4627 §3); nil otherwise. No UTF-8 JSON text starts with a zero byte, `FE` or `FF`.
    static func wideEncoding(of bytes: UnsafeRawBufferPointer) -> String? {
        let head = Array(bytes.prefix(4))
        func starts(_ pattern: [UInt8?]) -> Bool {
            head.count >= pattern.count
                && zip(head, pattern).allSatisfy { byte, expected in
                    expected.map { $0 == byte } ?? (byte != 0)
                }
        }
        // nil in a pattern: any byte but zero.
        if starts([0x00, 0x00, 0xFE, 0xFF]) || starts([0x00, 0x00, 0x00, nil]) { return "UTF-32BE" }
        if starts([0xFF, 0xFE, 0x00, 0x00]) || starts([nil, 0x00, 0x00, 0x00]) { return "UTF-32LE" }
        if starts([0xFE, 0xFF]) || starts([0x00, nil]) { return "UTF-16BE" }
        if starts([0xFF, 0xFE]) || starts([nil, 0x00]) { return "UTF-16LE" }
        return nil
    }

    package mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// The first byte of the next value, after whitespace; nil at the end.
    package mutating func peek() -> UInt8? {
        skipWhitespace()
        return index < bytes.count ? bytes[index] : nil
    }

    /// Reads one value. With `build` false it is only checked and skipped, and nil is returned.
    package mutating func readValue(build: Bool) throws(JSONParseError) -> JSONValue? {
        skipWhitespace()
        guard index < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try readObject(build: build)
        case UInt8(ascii: "["): return try readArray(build: build)
        case UInt8(ascii: "\""):
            let token = try scanString()
            return build ? .string(try decode(token)) : nil
        case UInt8(ascii: "t"):
            try expectWord("true")
            return build ? .bool(true) : nil
        case UInt8(ascii: "f"):
            try expectWord("false")
            return build ? .bool(false) : nil
        case UInt8(ascii: "n"):
            try expectWord("null")
            return build ? .null : nil
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            let range = try scanNumber()
            return build ? .number(text(range)) : nil
        default: throw fail("unexpected character '\(Unicode.Scalar(bytes[index]))'")
        }
    }

    /// Checks and skips one value.
    package mutating func skipValue() throws(JSONParseError) {
        _ = try readValue(build: false)
    }

    package mutating func expectWord(_ word: StaticString) throws(JSONParseError) {
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count,
            UnsafeRawBufferPointer(rebasing: bytes[index..<index + count]).elementsEqual(
                UnsafeRawBufferPointer(start: word.utf8Start, count: count))
        else {
            throw fail("expected '\(word)'")
        }
        index += count
    }

    package mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > JSONValue.maxDepth { throw fail("nesting deeper than \(JSONValue.maxDepth) levels") }
    }

    // MARK: - Objects and arrays, one member at a time

    /// At a `{`: enters the object. Then call ``nextMember(_:)`` until it returns nil.
    package mutating func beginObject() throws(JSONParseError) {
        try enter()
        index += 1
    }

    /// The next member's key, with the cursor on its value; nil after the closing `}`. The caller
    /// must read or skip each value before asking for the next member. `first` starts true.
    package mutating func nextMember(_ first: inout Bool) throws(JSONParseError) -> StringToken? {
        skipWhitespace()
        if first {
            first = false
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                depth -= 1
                return nil
            }
        } else {
            guard index < bytes.count else { throw fail("unexpected end of input inside an object") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                skipWhitespace()
            } else if bytes[index] == UInt8(ascii: "}") {
                index += 1
                depth -= 1
                return nil
            } else {
                throw fail("expected ',' or '}' in an object")
            }
        }
        guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
            throw fail("expected a member name in quotes")
        }
        let key = try scanString()
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else {
            throw fail("expected ':' after member name")
        }
        index += 1
        return key
    }

    /// At a `[`: enters the array. Then call ``nextElement(_:)`` until it returns false.
    package mutating func beginArray() throws(JSONParseError) {
        try enter()
        index += 1
    }

    /// Whether another element follows, with the cursor on it; false after the closing `]`. The
    /// caller must read or skip each element. `first` starts true.
    package mutating func nextElement(_ first: inout Bool) throws(JSONParseError) -> Bool {
        skipWhitespace()
        if first {
            first = false
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                depth -= 1
                return false
            }
            return true
        }
        guard index < bytes.count else { throw fail("unexpected end of input inside an array") }
        if bytes[index] == UInt8(ascii: ",") {
            index += 1
            return true
        }
        if bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return false
        }
        throw fail("expected ',' or ']' in an array")
    }

    package mutating func readObject(build: Bool) throws(JSONParseError) -> JSONValue? {
        try beginObject()
        var members: [String: JSONValue] = [:]
        var first = true
        while let key = try nextMember(&first) {
            if build {
                let name = try decode(key)
                members[name] = try readValue(build: true)
            } else {
                try skipValue()
            }
        }
        return build ? .object(members) : nil
    }

    package mutating func readArray(build: Bool) throws(JSONParseError) -> JSONValue? {
        try beginArray()
        var elements: [JSONValue] = []
        var first = true
        while try nextElement(&first) {
            if build { elements.append(try readValue(build: true)!) } else { try skipValue() }
        }
        return build ? .array(elements) : nil
    }

    // MARK: - Scalars

    /// The bytes of a number literal, checked.
    package mutating func scanNumber() throws(JSONParseError) -> Range<Int> {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        func digits(_ parser: inout JSONParser) -> Int {
            let from = parser.index
            while parser.index < parser.bytes.count,
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(parser.bytes[parser.index])
            {
                parser.index += 1
            }
            return parser.index - from
        }
        guard digits(&self) > 0 else { throw fail("a number needs digits") }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits(&self) > 0 else { throw fail("a number needs digits after '.'") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard digits(&self) > 0 else { throw fail("a number needs digits in its exponent") }
        }
        return start..<index
    }

    /// The text of checked UTF-8 bytes.
    package func text(_ range: Range<Int>) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self)
    }

    /// Checks the string at the cursor (its opening quote) and moves past it.
    package mutating func scanString() throws(JSONParseError) -> StringToken {
        let start = index
        var ignored: String.UnicodeScalarView?
        let escaped = try readString(into: &ignored)
        return StringToken(start: start, contents: start + 1..<index - 1, escaped: escaped)
    }

    /// The value of a string checked by ``scanString()``.
    package func decode(_ token: StringToken) throws(JSONParseError) -> String {
        if !token.escaped { return text(token.contents) }
        var reader = self
        reader.index = token.start
        var scalars: String.UnicodeScalarView? = String.UnicodeScalarView()
        _ = try reader.readString(into: &scalars)
        return String(scalars!)
    }

    /// Whether a checked string is exactly `literal` (ASCII).
    package func token(_ token: StringToken, is literal: StaticString) throws(JSONParseError) -> Bool {
        if !token.escaped {
            return token.contents.count == literal.utf8CodeUnitCount
                && UnsafeRawBufferPointer(rebasing: bytes[token.contents]).elementsEqual(
                    UnsafeRawBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
        }
        return try decode(token) == literal.description
    }

    /// Reads a string from its opening quote, checking it; appends its scalars to `scalars`
    /// when that is not nil. Returns whether it held an escape.
    private mutating func readString(into scalars: inout String.UnicodeScalarView?) throws(JSONParseError) -> Bool {
        index += 1
        var run = index
        var highBits: UInt8 = 0
        var escaped = false
        func flush(_ parser: JSONParser, upTo end: Int, into scalars: inout String.UnicodeScalarView?)
            throws(JSONParseError)
        {
            guard run < end else { return }
            let slice = UnsafeRawBufferPointer(rebasing: parser.bytes[run..<end])
            if highBits & 0x80 != 0, !isValidUTF8(slice) {
                throw JSONParseError(offset: run, reason: "invalid UTF-8 in a string")
            }
            if scalars != nil { scalars!.append(contentsOf: String(decoding: slice, as: UTF8.self).unicodeScalars) }
        }
        while true {
            guard index < bytes.count else { throw fail("unterminated string") }
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                try flush(self, upTo: index, into: &scalars)
                index += 1
                return escaped
            }
            if byte < 0x20 { throw fail("control character in a string") }
            if byte != UInt8(ascii: "\\") {
                highBits |= byte
                index += 1
                continue
            }
            escaped = true
            try flush(self, upTo: index, into: &scalars)
            highBits = 0
            index += 1
            guard index < bytes.count else { throw fail("unterminated escape") }
            let escape = bytes[index]
            index += 1
            let scalar: Unicode.Scalar
            switch escape {
            case UInt8(ascii: "\""): scalar = "\""
            case UInt8(ascii: "\\"): scalar = "\\"
            case UInt8(ascii: "/"): scalar = "/"
            case UInt8(ascii: "b"): scalar = "\u{08}"
            case UInt8(ascii: "f"): scalar = "\u{0C}"
            case UInt8(ascii: "n"): scalar = "\n"
            case UInt8(ascii: "r"): scalar = "\r"
            case UInt8(ascii: "t"): scalar = "\t"
            case UInt8(ascii: "u"):
                var code = try parseHex4()
                if (0xD800..<0xDC00).contains(code) {
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                        bytes[index + 1] == UInt8(ascii: "u")
                    else {
                        throw fail("unpaired surrogate in \\u escape")
                    }
                    index += 2
                    let low = try parseHex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw fail("invalid low surrogate in \\u escape") }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let decoded = Unicode.Scalar(code) else { throw fail("invalid \\u escape") }
                scalar = decoded
            default:
                throw fail("unknown escape '\\\(Unicode.Scalar(escape))'")
            }
            if scalars != nil { scalars!.append(scalar) }
            run = index
        }
    }

    private mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail("short \\u escape") }
        var value: UInt32 = 0
        for byte in bytes[index..<index + 4] {
            value <<= 4
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value |= UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value |= UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): value |= UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw fail("invalid hex digit in \\u escape")
            }
        }
        index += 4
        return value
    }
}

/// Well-formed UTF-8 (Unicode Table 3-7): no overlong forms, no surrogates, nothing past U+10FFFF;
/// the rule `String(validating:)` applies.
package func isValidUTF8(_ bytes: UnsafeRawBufferPointer) -> Bool {
    var index = 0
    let count = bytes.count
    func continuation(_ offset: Int, _ range: ClosedRange<UInt8> = 0x80...0xBF) -> Bool {
        index + offset < count && range.contains(bytes[index + offset])
    }
    while index < count {
        let lead = bytes[index]
        switch lead {
        case 0x00...0x7F: index += 1
        case 0xC2...0xDF:
            guard continuation(1) else { return false }
            index += 2
        case 0xE0...0xEF:
            let second: ClosedRange<UInt8> = lead == 0xE0 ? 0xA0...0xBF : (lead == 0xED ? 0x80...0x9F : 0x80...0xBF)
            guard continuation(1, second), continuation(2) else { return false }
            index += 3
        case 0xF0...0xF4:
            let second: ClosedRange<UInt8> = lead == 0xF0 ? 0x90...0xBF : (lead == 0xF4 ? 0x80...0x8F : 0x80...0xBF)
            guard continuation(1, second), continuation(2), continuation(3) else { return false }
            index += 4
        default:
            return false
        }
    }
    return true
}
