/// Lower-case hex of a digest, the one encoding every fingerprint and tree digest uses.
///
/// Built from a table rather than `String(format:)` per byte: it runs for every file a sync
/// downloads or checks.
public enum HexDigest {
    private static let digits = Array("0123456789abcdef".utf8)

    /// `bytes` as lower-case hex, two digits a byte.
    public static func string<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> String {
        var text: [UInt8] = []
        text.reserveCapacity(64)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Whether `byte` is one of the digits ``string(_:)`` writes (`0-9`, `a-f`).
    public static func isLowerHex(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
    }
}
