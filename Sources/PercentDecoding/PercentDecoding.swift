/// Byte-exact percent-decoding of one URL path component, shared by the client (change paths)
/// and `StorageServer` (request paths).
///
/// Foundation's `removingPercentEncoding` drops a leading U+FEFF, so a name starting with one
/// would map to another file (found by the fuzzer). This decodes every `%XX` to its byte, keeps
/// every other byte, and requires the result to be UTF-8.
public enum PercentDecoding {
    /// `text` with every `%XX` decoded, or nil when an escape is malformed or the bytes are not UTF-8.
    public static func decode<Text: StringProtocol>(_ text: Text) -> String? {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = text.utf8.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                bytes.append(byte)
                continue
            }
            guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else {
                return nil
            }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    /// The value of one hexadecimal digit (`0`–`9`, `a`–`f`, `A`–`F`), or nil for any other byte.
    public static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
