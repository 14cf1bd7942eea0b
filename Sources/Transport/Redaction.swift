import Foundation

/// Secrets out of what people and logs see: a URL's user info is a password or a token
/// (`https://TOKEN@host/`, `https://alice:S3cret@host/`), so every URL shown in a message, a
/// listing or a log line goes through here first.
///
/// - `user:password@` becomes `user:***@` (the user name helps tell accounts apart);
/// - a user part alone becomes `***@` (alone, it is usually a token).
public enum Redaction {
    /// What replaces a secret.
    public static let mask = "***"

    /// `url` as text with its user info redacted.
    public static func url(_ url: URL) -> String {
        text(url.absoluteString)
    }

    /// `text` with the user info of every `scheme://user:password@host` in it redacted; the
    /// rest is unchanged. Used on URLs typed by people and on messages that quote one.
    public static func text(_ text: String) -> String {
        // Fast path: no authority with user info anywhere.
        guard text.contains("@"), text.contains("://") else { return text }
        let bytes = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            // "://" starts an authority.
            if index + 2 < bytes.count, bytes[index] == UInt8(ascii: ":"), bytes[index + 1] == UInt8(ascii: "/"),
                bytes[index + 2] == UInt8(ascii: "/")
            {
                out += bytes[index...index + 2]
                let start = index + 3
                var end = start
                while end < bytes.count, !endsAuthority(bytes[end]) { end += 1 }
                if let at = bytes[start..<end].lastIndex(of: UInt8(ascii: "@")) {
                    let info = bytes[start..<at]
                    if let colon = info.firstIndex(of: UInt8(ascii: ":")) {
                        out += bytes[start..<colon]
                        out += Array(":\(mask)".utf8)
                    } else {
                        out += Array(mask.utf8)
                    }
                    out += bytes[at..<end]
                } else {
                    out += bytes[start..<end]
                }
                index = end
                continue
            }
            out.append(bytes[index])
            index += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether the URL has user info (a name, a password or a token) that ``url(_:)`` hides.
    public static func hasUserInfo(_ url: URL) -> Bool {
        text(url.absoluteString) != url.absoluteString
    }

    /// Where an authority ends: its path, query or fragment, or a byte no URL holds (white space,
    /// controls, a double quote, angle or curly brackets, a backquote, `|`, a backslash, `^`).
    /// Not `'`, `(`, `)` or `,`: RFC 3986 allows them in the user info (`alice:pa,ss@`), and
    /// ending there printed the rest of a password. A URL quoted as `'…'` or `(…)` in prose still
    /// ends at its path; without a path the closing quote stays after the host.
    private static func endsAuthority(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#"), UInt8(ascii: " "), UInt8(ascii: "\""),
            UInt8(ascii: "<"),
            UInt8(ascii: ">"), UInt8(ascii: "`"), UInt8(ascii: "{"), UInt8(ascii: "}"), UInt8(ascii: "|"),
            UInt8(ascii: "\\"),
            UInt8(ascii: "^"):
            true
        default:
            byte < 0x20 || byte == 0x7F
        }
    }
}
