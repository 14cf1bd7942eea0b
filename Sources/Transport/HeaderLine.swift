/// One line of an HTTP/1 response head as libcurl hands it to the header callback, parsed on
/// the bytes: no Foundation string work on the transport's I/O thread, which runs this for every
/// header of every transfer.
///
/// Whitespace is HTTP's optional whitespace (space and tab) plus the line's CR LF; bytes are
/// ISO-8859-1, as RFC 9110 reads field values. A bare CR inside a value reads as a space (RFC
/// 9112 §2.2), so no part of a value is hidden behind it from what interprets the value.
enum HeaderLine: Equatable, Sendable {
    /// `HTTP/1.1 200 OK`: the start of a new response (after a redirect or `100 Continue` too).
    case status(Int)
    /// `Name: value`, the name lower-cased.
    case field(name: String, value: String)
    /// The empty line (`CR LF`) that ends a response's head; the body, if any, follows.
    case end
    /// A line starting with a space or tab: obsolete line folding (RFC 9112 §5.2), the rest of
    /// the field before it, its text trimmed. A user agent reads it as that field's value
    /// continued after one space.
    case continuation(String)
    /// A blank line that is not the end, or a line with no colon.
    case other

    init(_ bytes: UnsafeRawBufferPointer) {
        if (bytes.count == 2 && bytes[0] == 0x0D && bytes[1] == 0x0A) || (bytes.count == 1 && bytes[0] == 0x0A) {
            self = .end
            return
        }
        var start = 0
        var end = bytes.count
        while start < end, Self.isWhitespace(bytes[start]) { start += 1 }
        while end > start, Self.isWhitespace(bytes[end - 1]) { end -= 1 }
        guard start < end else {
            self = .other
            return
        }
        if bytes[0] == 0x20 || bytes[0] == 0x09 {
            self = .continuation(Self.latin1String(bytes[start..<end], lowercased: false))
            return
        }
        if end - start >= 5, bytes[start] == UInt8(ascii: "H"), bytes[start + 1] == UInt8(ascii: "T"),
            bytes[start + 2] == UInt8(ascii: "T"), bytes[start + 3] == UInt8(ascii: "P"),
            bytes[start + 4] == UInt8(ascii: "/")
        {
            // The code is the first run of digits after the first space.
            var index = start + 5
            while index < end, bytes[index] != UInt8(ascii: " ") { index += 1 }
            while index < end, bytes[index] == UInt8(ascii: " ") { index += 1 }
            var code = 0
            var digits = 0
            while index < end, digits < 3, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
                code = code * 10 + Int(bytes[index] - UInt8(ascii: "0"))
                index += 1
                digits += 1
            }
            self = .status(digits == 3 ? code : 0)
            return
        }
        guard let colon = (start..<end).first(where: { bytes[$0] == UInt8(ascii: ":") }) else {
            self = .other
            return
        }
        var valueStart = colon + 1
        while valueStart < end, Self.isWhitespace(bytes[valueStart]) { valueStart += 1 }
        let name = Self.latin1String(bytes[start..<colon], lowercased: true)
        let value = Self.latin1String(bytes[valueStart..<end], lowercased: false)
        self = .field(name: name, value: value)
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A
    }

    /// ISO-8859-1 bytes as a String (a byte over 0x7F is the code point of the same value).
    private static func latin1String(_ bytes: Slice<UnsafeRawBufferPointer>, lowercased: Bool) -> String {
        let high = bytes.reduce(0) { $0 + ($1 >= 0x80 ? 1 : 0) }
        return String(unsafeUninitializedCapacity: bytes.count + high) { buffer in
            var out = 0
            for var byte in bytes {
                if lowercased, byte >= UInt8(ascii: "A"), byte <= UInt8(ascii: "Z") { byte += 0x20 }
                if byte == 0x0D { byte = 0x20 }
                if byte < 0x80 {
                    buffer[out] = byte
                    out += 1
                } else {
                    buffer[out] = 0xC0 | (byte >> 6)
                    buffer[out + 1] = 0x80 | (byte & 0x3F)
                    out += 2
                }
            }
            return out
        }
    }
}
