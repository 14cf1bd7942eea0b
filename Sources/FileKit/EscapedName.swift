/// A file name as people can read it in a message: valid UTF-8 as it is, and each byte that is
/// not (or is a control character or backslash) as `\xHH`, so the name shown names the real file.
public enum EscapedName {
    /// `bytes` as text: valid UTF-8 kept, and each other byte, ASCII control character or backslash
    /// written as `\xHH` (upper-case hex).
    public static func text(_ bytes: [UInt8]) -> String {
        var out = ""
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            let length = byte < 0x80 ? 1 : byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 0
            if length > 0, index + length <= bytes.count,
                let scalar = String(validating: bytes[index..<index + length], as: UTF8.self),
                !(length == 1 && (byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "\\")))
            {
                out += scalar
                index += length
            } else {
                out += "\\x" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
                index += 1
            }
        }
        return out
    }
}

extension String {
    /// `self` with `0`s in front up to `width` characters; unchanged when already that long.
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
