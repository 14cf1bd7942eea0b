internal import DateText
import Foundation
import ItemCache
import Transport

/// The item cache's HTTP parsers under the fuzzer: header lines and their combination, the
/// `Cache-Control` directive parser, HTTP dates and the cache key normalizer. None may crash,
/// and each keeps the promise its documentation makes.
extension FuzzChecks {
    /// Every HTTP check on `bytes`.
    static func http(_ bytes: [UInt8]) {
        headerLines(bytes)
        let text = String(decoding: bytes, as: UTF8.self)
        cacheControl(text)
        httpDate(text)
        internetDateTime(text)
        cacheKey(text)
    }

    /// Each line of `bytes` through the transport's header-line reader, then combined: names
    /// come out lower-case, values without surrounding whitespace or line ends, and the
    /// combination of a name holds each of its non-empty values in order (RFC 9110 §5.3).
    static func headerLines(_ bytes: [UInt8]) {
        var fields: [HTTPHeaderField] = []
        for line in bytes.split(separator: 0x0A, omittingEmptySubsequences: false) {
            guard let field = HTTPHeaderField.parse(line: Array(line) + [0x0A]) else { continue }
            precondition(field.name == field.name.lowercased(), "name '\(field.name)' is not lower-cased")
            for edge in [field.value.unicodeScalars.first, field.value.unicodeScalars.last].compactMap({ $0 }) {
                precondition(![" ", "\t", "\r", "\n"].contains(edge), "value '\(field.value)' keeps whitespace")
            }
            fields.append(field)
        }
        let combined = HTTPHeaderField.combined(fields)
        for name in Set(fields.map(\.name)) where name != "set-cookie" {
            let values = fields.filter { $0.name == name && !$0.value.isEmpty }.map(\.value)
            precondition(
                combined[name]
                    == (values.isEmpty ? fields.last { $0.name == name }!.value : values.joined(separator: ", ")),
                "'\(name)' combined as '\(combined[name] ?? "nil")'")
        }
    }

    /// `Cache-Control`: names lower-case and free of separators; delta-seconds within 0...2^31;
    /// and the directives, written back out, read back the same.
    static func cacheControl(_ text: String) {
        let parsed = CacheDirectives(text)
        for directive in parsed.directives {
            precondition(!directive.name.isEmpty, "an empty directive name")
            precondition(
                directive.name == directive.name.lowercased() && !directive.name.contains(",")
                    && !directive.name.contains("=") && !directive.name.contains(" ") && !directive.name.contains("\t"),
                "directive name '\(directive.name)'")
            if case .value(let seconds) = parsed.seconds(directive.name) {
                precondition(seconds >= 0 && seconds <= CacheDirectives.largestSeconds, "\(directive.name)=\(seconds)")
            }
        }
        let written = parsed.directives.map { directive -> String in
            guard let argument = directive.argument else { return directive.name }
            if directive.quoted {
                let escaped = argument.replacingOccurrences(of: "\\", with: "\\\\")
                    .replacingOccurrences(of: "\"", with: "\\\"")
                return directive.name + "=\"" + escaped + "\""
            }
            return directive.name + "=" + argument
        }.joined(separator: ", ")
        let again = CacheDirectives(written)
        precondition(again == parsed, "'\(text)' → '\(written)' reads back as \(again.directives)")
    }

    /// An HTTP date that parses formats as an IMF-fixdate that parses to the same instant.
    static func httpDate(_ text: String) {
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        guard let date = HTTPDate.parse(text, now: now) else { return }
        let formatted = HTTPDate.format(date)
        precondition(HTTPDate.parse(formatted, now: now) == date, "'\(text)' → '\(formatted)' does not read back")
    }

    /// An RFC 3339 date-time that parses (an `--expires`, a signature's expiry) formats as one
    /// that parses to the same instant, to the microsecond the format keeps.
    static func internetDateTime(_ text: String) {
        guard let date = InternetDateTime.parse(text) else { return }
        let seconds = date.timeIntervalSince1970
        // An offset can carry a date of year 0 or 9999 out of the range the format clamps to.
        guard seconds >= -62_167_219_200, seconds < 253_402_300_800 else { return }
        let formatted = InternetDateTime.format(date)
        guard let again = InternetDateTime.parse(formatted) else {
            preconditionFailure("'\(text)' → '\(formatted)' does not parse")
        }
        precondition(abs(again.timeIntervalSince1970 - seconds) < 1e-6, "'\(text)' → '\(formatted)' moves")
    }

    /// A URL's key is a fixed point (its URL makes the same key again) and keeps no password.
    static func cacheKey(_ text: String) {
        guard let url = URL(string: text), let key = try? CacheKey(url: url), let normalized = key.url else { return }
        if let password = URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedPassword,
            !password.isEmpty, let start = normalized.range(of: "://")
        {
            // The authority (what comes before the path) holds `user:***@` at most; the same
            // text may appear in the path, which is not a secret's place.
            let authority = normalized[start.upperBound...].prefix { $0 != "/" && $0 != "?" }
            precondition(!authority.contains(":" + password + "@"), "the key of '\(text)' keeps its password")
        }
        guard let again = URL(string: normalized) else {
            preconditionFailure("the key of '\(text)' is no URL: '\(normalized)'")
        }
        let second = try? CacheKey(url: again)
        precondition(second?.rawValue == key.rawValue, "'\(text)' → '\(key.rawValue)' → '\(second?.rawValue ?? "nil")'")
    }
}
