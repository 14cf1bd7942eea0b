/// Percent-encoding of one URL path component, the inverse of ``PercentDecoding``: the client
/// builds every download URL with it and the publisher every URL it writes in a change list.
///
/// Kept as is: RFC 3986's unreserved characters and the sub-delimiters `!$&'()*+,=` plus `@`.
/// Everything else, every byte of a non-ASCII character included, becomes `%XX` with upper-case
/// hex. So `/` and `%` are always escaped, and so are `:` (a first component would otherwise read
/// as a scheme), `;`, `?` and `#`.
public enum PercentEncoding {
    public static func encodeComponent<Text: StringProtocol>(_ text: Text) -> String {
        let utf8 = text.utf8
        var escaped = 0
        for byte in utf8 where !isAllowed(byte) { escaped += 1 }
        if escaped == 0 { return String(text) }
        return String(unsafeUninitializedCapacity: utf8.count + 2 * escaped) { buffer in
            var out = 0
            for byte in utf8 {
                if isAllowed(byte) {
                    buffer[out] = byte
                    out += 1
                } else {
                    buffer[out] = UInt8(ascii: "%")
                    buffer[out + 1] = hexDigits[Int(byte >> 4)]
                    buffer[out + 2] = hexDigits[Int(byte & 0x0F)]
                    out += 3
                }
            }
            return out
        }
    }

    private static let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)

    /// Unreserved (`A–Z a–z 0–9 - . _ ~`) and `! $ & ' ( ) * + , = @`.
    public static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"),
            UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
            UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: "="),
            UInt8(ascii: "@"):
            true
        default:
            false
        }
    }
}
