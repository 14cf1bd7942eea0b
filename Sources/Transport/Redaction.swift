import Foundation

/// Secrets out of what people and logs see: a URL's user info is a password or a token
/// (`https://TOKEN@host/`, `https://alice:S3cret@host/`), and so is a query parameter such as
/// GitHub raw's `?token=`, S3's `X-Amz-Signature` or Azure's `sig`; every URL shown in a
/// message, a listing or a log line goes through here first.
///
/// - `user:password@` becomes `user:***@` (the user name helps tell accounts apart);
/// - a user part alone becomes `***@` (alone, it is usually a token);
/// - the value of a query parameter whose name says it holds a secret (``isSecretName(_:)``)
///   becomes `***`: `?token=***&path=a.txt`.
public enum Redaction {
    /// What replaces a secret.
    public static let mask = "***"

    /// `url` as text with its user info redacted.
    public static func url(_ url: URL) -> String {
        text(url.absoluteString)
    }

    /// `text` with the user info of every `scheme://user:password@host` in it redacted, and the
    /// values of its secret query parameters; the rest is unchanged. Used on URLs typed by
    /// people and on messages that quote one.
    public static func text(_ text: String) -> String {
        // Fast path: no authority with user info, and no query, anywhere.
        guard text.contains("@") || text.contains("?"), text.contains("://") else { return text }
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
                index = redactQuery(bytes, from: end, into: &out)
                continue
            }
            out.append(bytes[index])
            index += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether the URL has user info (a name, a password or a token) that ``url(_:)`` hides.
    public static func hasUserInfo(_ url: URL) -> Bool {
        url.user != nil || url.password != nil
    }

    /// Whether a query parameter named `name` holds a secret: its name, in any case, holds
    /// `token`, `secret`, `pass`, `pwd`, `sig`, `key`, `auth`, `credential`, `session`, `jwt`,
    /// `code` or `ticket` (`access_token`, `X-Amz-Signature`, `api_key`, `sig`, `code`). A
    /// parameter named otherwise is shown: it tells requests apart (`?w=200`).
    public static func isSecretName(_ name: some Collection<UInt8>) -> Bool {
        let lowered = String(decoding: name, as: UTF8.self).lowercased()
        return secretNameParts.contains { lowered.contains($0) }
    }

    private static let secretNameParts = [
        "token", "secret", "pass", "pwd", "sig", "key", "auth", "credential", "session", "jwt", "code", "ticket",
    ]

    /// Copies the rest of a URL whose authority ends at `start` (its path, query and fragment)
    /// into `out`, with the value of each secret query parameter masked; returns where the URL
    /// ends.
    private static func redactQuery(_ bytes: [UInt8], from start: Int, into out: inout [UInt8]) -> Int {
        var index = start
        func at(_ position: Int, is ascii: Unicode.Scalar) -> Bool {
            position < bytes.count && bytes[position] == UInt8(ascii: ascii)
        }
        // The path.
        while index < bytes.count, !endsURL(bytes, at: index), !at(index, is: "?"), !at(index, is: "#") {
            out.append(bytes[index])
            index += 1
        }
        guard at(index, is: "?") else { return index }
        out.append(bytes[index])
        index += 1
        // The query: `name=value` pairs, split by `&` or `;`, up to the fragment or the URL's end.
        func endsPart(_ position: Int) -> Bool {
            endsURL(bytes, at: position) || at(position, is: "&") || at(position, is: ";") || at(position, is: "#")
        }
        while index < bytes.count, !endsURL(bytes, at: index), !at(index, is: "#") {
            let nameStart = index
            while index < bytes.count, !endsPart(index), !at(index, is: "=") { index += 1 }
            out += bytes[nameStart..<index]
            if at(index, is: "=") {
                out.append(bytes[index])
                index += 1
                let valueStart = index
                while index < bytes.count, !endsPart(index) { index += 1 }
                if index > valueStart, isSecretName(bytes[nameStart..<valueStart - 1]) {
                    out += Array(mask.utf8)
                } else {
                    out += bytes[valueStart..<index]
                }
            }
            if at(index, is: "&") || at(index, is: ";") {
                out.append(bytes[index])
                index += 1
            }
        }
        return index
    }

    /// Where a URL's path or query ends in prose: a byte no URL holds (``endsAuthority(_:)``
    /// without `/`, `?` and `#`), or quotes closing it (`'`s followed by the text's end or such
    /// a byte).
    private static func endsURL(_ bytes: [UInt8], at index: Int) -> Bool {
        var next = index
        while next < bytes.count, bytes[next] == UInt8(ascii: "'") { next += 1 }
        if next > index, next == bytes.count { return true }
        switch bytes[next] {
        case UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#"): return false
        default: return endsAuthority(bytes[next])
        }
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
