/// Text that stays on its line: log lines, systemd's `STATUS=` and the CLI's one-line errors quote
/// what storages, servers and hooks wrote, and a newline there would forge a line of its own
/// (`1.0\nlevel=critical …`), a carriage return or an escape sequence would rewrite a terminal.
public enum LogText {
    /// `text` with every control character escaped, the rest unchanged: `\n`, `\r` and `\t` by
    /// name; other C0 controls, DEL, C1 controls (U+0080 to U+009F: U+0085 is a line break, U+009B
    /// a terminal's CSI) and the line and paragraph separators U+2028 and U+2029 as `\u{…}`.
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var escaped = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": escaped.append(contentsOf: #"\n"#.unicodeScalars)
            case "\r": escaped.append(contentsOf: #"\r"#.unicodeScalars)
            case "\t": escaped.append(contentsOf: #"\t"#.unicodeScalars)
            case _ where needsEscape(scalar):
                escaped.append(contentsOf: "\\u{\(String(scalar.value, radix: 16, uppercase: true))}".unicodeScalars)
            default: escaped.append(scalar)
            }
        }
        return String(escaped)
    }

    /// A metadata value for a `key=value` line (logfmt): ``escaped(_:)``, and quoted (`"…"`,
    /// with `"` and `\\` escaped) when it is empty or holds a space, `=` or `"`, so that a value
    /// cannot forge fields of its own (a folder named `x storage=fake level=critical`).
    public static func field(_ text: String) -> String {
        guard text.isEmpty || text.contains(where: { $0 == " " || $0 == "=" || $0 == "\"" }) else {
            return escaped(text)
        }
        let quoted = text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        return "\"" + escaped(quoted) + "\""
    }

    /// Whether `scalar` is one ``escaped(_:)`` rewrites.
    public static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029
    }
}
