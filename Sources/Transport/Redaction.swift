import Foundation
import PercentDecoding
import Synchronization

/// Secrets out of what people and logs see: a URL's user info is a password or a token
/// (`https://TOKEN@host/`, `https://alice:S3cret@host/`), and so is a query parameter such as
/// GitHub raw's `?token=`, S3's `X-Amz-Signature` or Azure's `sig`; every URL shown in a
/// message, a listing or a log line goes through here first.
///
/// - `user:password@` becomes `user:***@` (the user name helps tell accounts apart), and
///   `***:***@` when the user name is the token (``userIsSecret(_:password:)``);
/// - a user part alone becomes `***@` (alone, it is usually a token);
/// - the value of a query or fragment parameter whose name says it holds a secret
///   (``isSecretName(_:)``) becomes `***`: `?token=***&path=a.txt`, `#access_token=***`;
/// - the same holds for a URL percent-encoded once, as a cache key or another URL's query
///   carries one (`https%3A%2F%2Fhost%2Fx%3Ftoken%3D***`).
public enum Redaction {
    /// What replaces a secret.
    public static let mask = "***"

    /// `url` as text with its user info redacted.
    public static func url(_ url: URL) -> String {
        text(url.absoluteString)
    }

    /// `text` with the user info of every `scheme://user:password@host` in it redacted, and the
    /// values of its secret query (and fragment) parameters; the rest is unchanged. Used on URLs
    /// typed by people, on messages that quote one and on cache keys. A URL percent-encoded once
    /// (`https%3A%2F%2Fhost%2Fx%3Ftoken%3DT`, inside a cache key or another URL's query) is
    /// redacted too: its escaped delimiters read as the delimiters.
    public static func text(_ text: String) -> String {
        // A proxy variable's URL, wherever a message quotes it: libcurl quotes one it cannot
        // read as it was given (a password with a space, which ends the authority for the URL
        // rules below), so the value itself is replaced by its masked form.
        var text = text
        for (quoted, masked) in proxyValues where text.contains(quoted) {
            text = text.replacingOccurrences(of: quoted, with: masked)
        }
        let secrets = knownSecrets.withLock { $0.longestFirst }
        for secret in secrets where text.contains(secret) {
            text = text.replacingOccurrences(of: secret, with: mask)
        }
        if !secrets.isEmpty, text.utf8.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }) {
            text = maskEscaped(secrets, in: text, plusIsSpace: false)
            text = maskEscaped(secrets, in: text, plusIsSpace: true)
        }
        return urls(text)
    }

    /// `text` with each of `secrets` masked where it appears percent-encoded, however the
    /// server escaped it: the text is read with its `%XX` escapes decoded (either case, any
    /// byte escaped or not; `+` as a space when `plusIsSpace`), and each match's whole original
    /// span is masked. An echo written `%2f` or with `-` escaped was shown where only one
    /// spelling was looked for.
    private static func maskEscaped(_ secrets: [String], in text: String, plusIsSpace: Bool) -> String {
        let scan = Scan(text, decoding: .everything(plusIsSpace: plusIsSpace))
        guard scan.bytes.count < scan.raw.count || plusIsSpace else { return text }
        var spans: [Range<Int>] = []
        for secret in secrets {
            let needle = Array(secret.utf8)
            var from = 0
            while from + needle.count <= scan.bytes.count, let found = scan.bytes[from...].firstRange(of: needle) {
                spans.append(scan.rawRange(found))
                from = found.upperBound
            }
        }
        guard !spans.isEmpty else { return text }
        var out: [UInt8] = []
        var position = 0
        for span in spans.sorted(by: { $0.lowerBound < $1.lowerBound }) where span.upperBound > position {
            out += scan.raw[position..<max(position, span.lowerBound)]
            if span.lowerBound >= position { out += Array(mask.utf8) }
            position = span.upperBound
        }
        out += scan.raw[position...]
        return String(decoding: out, as: UTF8.self)
    }

    /// Values registered as secrets (``registerSecrets(_:)``), longest first.
    private static let knownSecrets = Mutex(KnownSecrets())

    /// The registered secrets: the newest ``KnownSecrets/limit`` of them.
    private struct KnownSecrets {
        /// How many are kept: a long-running app that sends a new token with each request
        /// (rotating credentials) grows the list no further; the oldest go first.
        static let limit = 1_024
        var byAge: [String] = []
        var members: Set<String> = []
        var longestFirst: [String] = []
    }

    /// Makes ``text(_:)`` mask each of `values` (and its percent-encoded form) wherever it
    /// appears from now on, in this process: the values of configured request headers and
    /// passwords, which an origin can echo back where no rule by name finds them (a redirect to
    /// `?echo=<the Authorization value>` was logged and stored). Values under 4 bytes are not
    /// looked for: masking every `abc` would garble messages and hide nothing.
    public static func registerSecrets(_ values: some Sequence<String>) {
        // As written; an escaped echo of one is found by decoding the text (``maskEscaped``).
        let added = values.filter { $0.utf8.count >= 4 }
        guard !added.isEmpty else { return }
        knownSecrets.withLock { known in
            let new = added.filter { known.members.insert($0).inserted }
            guard !new.isEmpty else { return }
            known.byAge += new
            if known.byAge.count > KnownSecrets.limit {
                let dropped = known.byAge.count - KnownSecrets.limit
                known.members.subtract(known.byAge.prefix(dropped))
                known.byAge.removeFirst(dropped)
            }
            known.longestFirst = known.byAge.sorted { ($0.utf8.count, $0) > ($1.utf8.count, $1) }
        }
    }

    /// Registers (``registerSecrets(_:)``) what of a request an origin could echo back: the
    /// values of its credential headers (``HTTPRequest/isCredentialHeader(_:)``, with the
    /// token after a scheme word) and the secrets of its URL's user info
    /// (``userInfoSecrets(of:)``). Every transfer does, before it starts: an app of the
    /// library had an echoed `Authorization` value in its messages and stored failures.
    package static func registerSecrets(of request: HTTPRequest, url: URL) {
        var secrets = request.headers.filter { HTTPRequest.isCredentialHeader($0.key) }.values.flatMap {
            secretParts(ofHeaderValue: $0)
        }
        if hasUserInfo(url) { secrets += userInfoSecrets(of: url) }
        registerSecrets(secrets)
    }

    /// The parts of a header's value looked for as secrets: the whole value, and its last
    /// word when that is a token of 8 bytes or more after a scheme (`Bearer <token>`).
    public static func secretParts(ofHeaderValue value: String) -> [String] {
        var parts = [value]
        if let last = value.split(whereSeparator: \.isWhitespace).last, last.count >= 8, last.count < value.count {
            parts.append(String(last))
        }
        return parts
    }

    /// What `url`'s user info holds that is secret, as written and percent-decoded: its
    /// password, its user name when that is the token (`TOKEN:x-oauth-basic@`, `TOKEN@`), and
    /// the `Basic` credentials libcurl sends for them (base64 of the decoded `user:password`),
    /// which an origin can echo back as it got them.
    public static func userInfoSecrets(of url: URL) -> [String] {
        guard let parts = URLComponents(url: url, resolvingAgainstBaseURL: false),
            let user = parts.percentEncodedUser
        else { return [] }
        let password = parts.percentEncodedPassword
        var secrets: [String] = []
        if password == nil || userIsSecret(ArraySlice(user.utf8), password: ArraySlice((password ?? "").utf8)) {
            secrets += [user, user.removingPercentEncoding ?? user]
        }
        if let password, !isPlaceholderPassword(password) {
            secrets += [password, password.removingPercentEncoding ?? password]
        }
        // As libcurl sends it, and as an echo may write it: without its `=` padding, and in the
        // URL-safe alphabet (`-` and `_`).
        let decoded = (user.removingPercentEncoding ?? user) + ":" + ((password ?? "").removingPercentEncoding ?? "")
        let basic = Data(decoded.utf8).base64EncodedString()
        let unpadded = String(basic.prefix { $0 != "=" })
        let urlSafe = String(unpadded.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
        secrets += [basic, unpadded, urlSafe]
        return Array(Set(secrets.filter { !$0.isEmpty }))
    }

    /// The environment variables libcurl reads a proxy from, in both cases.
    package static let proxyVariables = ["http_proxy", "https_proxy", "all_proxy", "ftp_proxy", "socks_proxy"].flatMap {
        [$0, $0.uppercased()]
    }

    /// The URLs in this process's proxy variables (`http_proxy`, `HTTPS_PROXY`, `ALL_PROXY`…,
    /// as libcurl reads them) that hold user info, as written and percent-decoded, each with its
    /// masked form (`http://user:***@host:port`, the user masked too when it is a token). Whole
    /// values, so that a password (however short, or however common a word) is masked only
    /// where the proxy's URL is quoted. Read once.
    static let proxyValues: [(quoted: String, masked: String)] = {
        let environment = ProcessInfo.processInfo.environment
        var values: [String: String] = [:]
        for name in proxyVariables {
            guard let value = environment[name] else { continue }
            for quoted in Set([value, value.removingPercentEncoding ?? value]) {
                guard let scheme = quoted.range(of: "://"), let at = quoted.range(of: "@", options: .backwards),
                    scheme.upperBound < at.lowerBound
                else { continue }
                let userInfo = quoted[scheme.upperBound..<at.lowerBound]
                let colon = userInfo.firstIndex(of: ":")
                let user = userInfo[..<(colon ?? userInfo.endIndex)]
                let password = colon.map { userInfo[userInfo.index(after: $0)...] } ?? ""
                let shownUser =
                    colon == nil || userIsSecret(ArraySlice(user.utf8), password: ArraySlice(password.utf8))
                    ? mask : String(user)
                values[quoted] =
                    String(quoted[..<scheme.upperBound]) + shownUser + (colon == nil ? "" : ":" + mask) + "@"
                    + String(quoted[at.upperBound...])
            }
        }
        // Longest first: a value that holds another is masked whole.
        return values.map { ($0.key, $0.value) }.sorted { $0.0.utf8.count > $1.0.utf8.count }
    }()

    /// ``text(_:)`` by the URL rules alone, whatever this process's environment holds: what
    /// decides a cache key's parts (`CacheKey`), which must not change with a proxy variable.
    package static func urls(_ text: String) -> String {
        // Fast path: no authority, plain or escaped, or nothing after one that can hold a secret.
        let escapedAuthority = text.contains("%") && text.range(of: "%3A%2F%2F", options: .caseInsensitive) != nil
        guard
            escapedAuthority
                || ((text.contains("@") || text.contains("?") || text.contains("#")) && text.contains("://"))
                || (text.contains("@") && text.contains(":")) || (text.contains(",") && text.contains("="))
                || ((text.contains("?") || text.contains("#")) && text.contains("="))
                || ((text.contains(";") || text.contains("%3")) && text.contains("://"))
        else { return text }
        // Twice: first the URLs as written, whose escapes are their own (a password's `%2F` is
        // part of the password, not where its authority ends), then the URLs written escaped
        // once, whose escaped delimiters are their delimiters.
        var plain = redact(text, decodingDelimiters: false)
        if plain.contains(","), plain.contains("=") { plain = maskSecretOptions(plain) }
        return escapedAuthority ? redact(plain, decodingDelimiters: true) : plain
    }

    /// `text` with the value of each `,name=value` whose name says it holds a secret masked: an
    /// rclone connection string's `pass=`, `client_secret=`, `key=` (`:webdav,url=…,pass=…:path`).
    private static func maskSecretOptions(_ text: String) -> String {
        let bytes = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: ","), let (value, end) = secretOption(bytes, at: index) {
                out += bytes[index..<value]
                out += Array(mask.utf8)
                index = end
                continue
            }
            out.append(bytes[index])
            index += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// One pass of ``text(_:)``: with `decodingDelimiters`, escaped delimiters read as the
    /// delimiters they stand for.
    private static func redact(_ text: String, decodingDelimiters: Bool) -> String {
        let scan = Scan(text, decoding: decodingDelimiters ? .delimiters : .nothing)
        var out: [UInt8] = []
        out.reserveCapacity(scan.raw.count)
        let bytes = scan.bytes
        var index = 0
        while index < bytes.count {
            // `user:password@host` with no scheme (a base URL typed without `https://`).
            if !decodingDelimiters, index == 0 || startsToken(after: bytes[index - 1]),
                let (secret, at) = schemelessUserInfo(bytes, from: index)
            {
                if userIsSecret(bytes[index..<secret - 1], password: bytes[secret..<at]) {
                    out += Array((mask + ":").utf8)
                } else {
                    scan.copy(index..<secret, into: &out)
                }
                out += Array(mask.utf8)
                index = at
                continue
            }
            // "://" starts an authority.
            if index + 2 < bytes.count, bytes[index] == UInt8(ascii: ":"), bytes[index + 1] == UInt8(ascii: "/"),
                bytes[index + 2] == UInt8(ascii: "/")
            {
                scan.copy(index..<index + 3, into: &out)
                let start = index + 3
                var end = start
                while end < bytes.count, !endsAuthority(bytes[end]) { end += 1 }
                // A password typed with a raw `/`, `?` or `#` (`alice:pa#ss@host`): the
                // authority runs on to the `@` after it.
                if !bytes[start..<end].contains(UInt8(ascii: "@")), let at = rawDelimiterInPassword(bytes, start, end) {
                    end = at + 1
                    while end < bytes.count, !endsAuthority(bytes[end]) { end += 1 }
                }
                if let at = bytes[start..<end].lastIndex(of: UInt8(ascii: "@")) {
                    let info = bytes[start..<at]
                    if let colon = info.firstIndex(of: UInt8(ascii: ":")) {
                        if userIsSecret(bytes[start..<colon], password: bytes[colon + 1..<at]) {
                            out += Array((mask + ":").utf8)
                        } else {
                            scan.copy(start..<colon + 1, into: &out)
                        }
                        out += Array(mask.utf8)
                    } else {
                        out += Array(mask.utf8)
                    }
                    scan.copy(at..<end, into: &out)
                } else {
                    scan.copy(start..<end, into: &out)
                }
                index = redactQuery(scan, from: end, into: &out)
                continue
            }
            // A query or fragment of a URL without an authority (`mailto:a@b?password=…`, a
            // relative reference): its secret parameters, as after one.
            if !decodingDelimiters, index > 0, bytes[index - 1] > 0x20,
                bytes[index] == UInt8(ascii: "?") || bytes[index] == UInt8(ascii: "#")
            {
                index = redactQuery(scan, from: index, into: &out)
                continue
            }
            scan.copy(index..<index + 1, into: &out)
            index += 1
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The text as the redaction reads it: `bytes`, where an escape it decodes is the one byte
    /// it stands for, and for each of them where it starts in `raw`, the text's own bytes,
    /// which are what is copied out.
    private struct Scan {
        /// Which escapes are read as their byte.
        enum Decoding: Equatable {
            case nothing
            /// An escaped delimiter (`%3A`, `%2F`, `%3F`, `%23`, `%40`, `%26`, `%3D`, `%3B`, in
            /// either case): the URL rules then see a URL percent-encoded once.
            case delimiters
            /// Every `%XX`, and `+` as a space when asked: where an echoed secret is looked for.
            case everything(plusIsSpace: Bool)
        }

        let raw: [UInt8]
        private(set) var bytes: [UInt8] = []
        private var starts: [Int] = []

        init(_ text: String, decoding: Decoding) {
            raw = Array(text.utf8)
            bytes.reserveCapacity(raw.count)
            starts.reserveCapacity(raw.count + 1)
            var plusIsSpace = false
            if case .everything(let plus) = decoding { plusIsSpace = plus }
            var index = 0
            while index < raw.count {
                starts.append(index)
                if decoding != .nothing, raw[index] == UInt8(ascii: "%"), index + 2 < raw.count,
                    let high = PercentDecoding.hexValue(raw[index + 1]),
                    let low = PercentDecoding.hexValue(raw[index + 2]),
                    decoding != .delimiters || Self.delimiters.contains(high << 4 | low)
                {
                    bytes.append(high << 4 | low)
                    index += 3
                } else {
                    bytes.append(plusIsSpace && raw[index] == UInt8(ascii: "+") ? UInt8(ascii: " ") : raw[index])
                    index += 1
                }
            }
            starts.append(raw.count)
        }

        /// Where `range` of ``bytes`` lies in `raw`.
        func rawRange(_ range: Range<Int>) -> Range<Int> {
            starts[range.lowerBound]..<starts[range.upperBound]
        }

        /// The text's own bytes behind `range` of ``bytes``, appended to `out`.
        func copy(_ range: Range<Int>, into out: inout [UInt8]) {
            out += raw[rawRange(range)]
        }

        private static let delimiters: Set<UInt8> = Set(":/?#@&=;".utf8)
    }

    /// Whether the URL has user info (a name, a password or a token) that ``url(_:)`` hides.
    public static func hasUserInfo(_ url: URL) -> Bool {
        url.user != nil || url.password != nil
    }

    /// Whether a query parameter named `name` holds a secret: its name, in any case, holds
    /// `token`, `secret`, `pass`, `pwd`, `sig`, `key`, `auth`, `credential`, `session`, `sessid`,
    /// `jwt`, `code`, `ticket`, `bearer`, `hmac`, `cookie`, `saml`, `assertion`, or Akamai's
    /// `hdnts` or `hdnea` (`access_token`, `X-Amz-Signature`, `api_key`, `PHPSESSID`), or one
    /// of its words (split at anything but a letter or digit) is `sid`, `otp` or `pin`
    /// (`sid`, `user_sid`), short words that inside longer ones (`side`, `footprint`, `spin`)
    /// name no secret. A parameter named otherwise is shown: it tells requests apart (`?w=200`).
    /// The name is read with its escapes decoded (`%74oken` is `token`), as the server reads it.
    ///
    /// Read on the bytes, ASCII letters in any case (the parts are ASCII): a cache key asks this
    /// of every query parameter on every memory hit, and Foundation's string search made a key
    /// of four parameters cost 43 µs (`cache-bench keys`).
    public static func isSecretName(_ name: some Collection<UInt8>) -> Bool {
        var lowered = percentDecoded(Array(name))
        for index in lowered.indices where lowered[index] >= 0x41 && lowered[index] <= 0x5A {
            lowered[index] |= 0x20
        }
        return lowered.withUnsafeBufferPointer { bytes in
            if secretNameParts.contains(where: { contains(bytes, $0) }) { return true }
            // Words: runs of ASCII letters and digits.
            var start = 0
            for end in 0...bytes.count {
                let inWord =
                    end < bytes.count
                    && (bytes[end] >= 0x61 && bytes[end] <= 0x7A || bytes[end] >= 0x30 && bytes[end] <= 0x39)
                if inWord { continue }
                if end - start == 3, secretNameWords.contains(where: { $0.elementsEqual(bytes[start..<end]) }) {
                    return true
                }
                start = end + 1
            }
            return false
        }
    }

    /// Whether `needle` occurs in `bytes`.
    private static func contains(_ bytes: UnsafeBufferPointer<UInt8>, _ needle: [UInt8]) -> Bool {
        guard bytes.count >= needle.count, let first = needle.first else { return needle.isEmpty }
        var start = 0
        while start <= bytes.count - needle.count {
            if bytes[start] == first {
                var matched = 1
                while matched < needle.count, bytes[start + matched] == needle[matched] { matched += 1 }
                if matched == needle.count { return true }
            }
            start += 1
        }
        return false
    }

    private static let secretNameParts: [[UInt8]] = [
        "token", "secret", "pass", "pwd", "sig", "key", "auth", "credential", "creds", "session", "sessid", "jwt",
        "code",
        "ticket", "bearer", "hmac", "cookie", "saml", "assertion", "hdnts", "hdnea",
    ].map { Array($0.utf8) }
    private static let secretNameWords: [[UInt8]] = ["sid", "otp", "pin"].map { Array($0.utf8) }

    /// `bytes` with each well-formed `%XX` escape decoded (a stray `%` stays as it is).
    private static func percentDecoded(_ bytes: [UInt8]) -> [UInt8] {
        guard bytes.contains(UInt8(ascii: "%")) else { return bytes }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if bytes[index] == UInt8(ascii: "%"), index + 2 < bytes.count,
                let high = PercentDecoding.hexValue(bytes[index + 1]),
                let low = PercentDecoding.hexValue(bytes[index + 2])
            {
                out.append(high << 4 | low)
                index += 3
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return out
    }

    /// Copies the rest of a URL whose authority ends at `start` (its path, query and fragment)
    /// into `out`, with the value of each secret parameter masked, in the query and in the
    /// fragment (OAuth's implicit grant puts `#access_token=` there); returns where the URL ends.
    private static func redactQuery(_ scan: Scan, from start: Int, into out: inout [UInt8]) -> Int {
        let bytes = scan.bytes
        var index = start
        func at(_ position: Int, is ascii: Unicode.Scalar) -> Bool {
            position < bytes.count && bytes[position] == UInt8(ascii: ascii)
        }
        // The path, whose segments may carry parameters (`/app;jsessionid=…`, its `;` or `=`
        // written escaped too): a secret one's value is masked up to the next `/`, `;`, query
        // or fragment.
        /// The length of `;` (or `=`, for `equals`) at `position`, plain (1) or escaped (3).
        func separator(at position: Int, equals: Bool) -> Int? {
            if at(position, is: equals ? "=" : ";") { return 1 }
            guard position + 2 < bytes.count, bytes[position] == UInt8(ascii: "%"),
                bytes[position + 1] == UInt8(ascii: "3")
            else { return nil }
            return bytes[position + 2] | 0x20 == UInt8(ascii: equals ? "d" : "b") ? 3 : nil
        }
        func endsPathParameter(_ position: Int) -> Bool {
            endsURL(bytes, at: position) || at(position, is: "/") || at(position, is: "?") || at(position, is: "#")
                || separator(at: position, equals: false) != nil
        }
        while index < bytes.count, !endsURL(bytes, at: index), !at(index, is: "?"), !at(index, is: "#") {
            let opening = separator(at: index, equals: false) ?? 1
            scan.copy(index..<index + opening, into: &out)
            index += opening
            guard opening == 3 || at(index - 1, is: ";") else { continue }
            var equals = index
            while equals < bytes.count, !endsPathParameter(equals), separator(at: equals, equals: true) == nil {
                equals += 1
            }
            guard let equalsLength = separator(at: equals, equals: true), equals > index,
                isSecretName(bytes[index..<equals])
            else { continue }
            scan.copy(index..<equals + equalsLength, into: &out)
            index = equals + equalsLength
            let valueStart = index
            while index < bytes.count, !endsPathParameter(index) { index += 1 }
            if index > valueStart { out += Array(mask.utf8) }
            if endsWithProsePunctuation(bytes, valueStart..<index) { scan.copy(index - 1..<index, into: &out) }
        }
        // The query, then the fragment: `name=value` pairs, split by `&` or `;`, up to the next
        // part or the URL's end.
        while at(index, is: "?") || at(index, is: "#") {
            let fragment = at(index, is: "#")
            scan.copy(index..<index + 1, into: &out)
            index += 1
            func endsPart(_ position: Int) -> Bool {
                endsURL(bytes, at: position) || at(position, is: "&") || at(position, is: ";")
                    || (!fragment && at(position, is: "#"))
            }
            while index < bytes.count, !endsURL(bytes, at: index), fragment || !at(index, is: "#") {
                let nameStart = index
                while index < bytes.count, !endsPart(index), !at(index, is: "=") { index += 1 }
                scan.copy(nameStart..<index, into: &out)
                if at(index, is: "=") {
                    scan.copy(index..<index + 1, into: &out)
                    index += 1
                    let valueStart = index
                    while index < bytes.count, !endsPart(index) { index += 1 }
                    if index > valueStart, isSecretName(bytes[nameStart..<valueStart - 1]) {
                        out += Array(mask.utf8)
                        if endsWithProsePunctuation(bytes, valueStart..<index) {
                            scan.copy(index - 1..<index, into: &out)
                        }
                    } else if holdsAuthority(bytes[valueStart..<index]) {
                        // Another URL as the value (`?next=https://…`, plain or escaped): the
                        // caller's scan goes on from it, so it is redacted as a URL of its own.
                        return valueStart
                    } else {
                        scan.copy(valueStart..<index, into: &out)
                    }
                }
                if at(index, is: "&") || at(index, is: ";") {
                    scan.copy(index..<index + 1, into: &out)
                    index += 1
                }
            }
            if fragment { break }
        }
        return index
    }

    /// The punctuation a sentence puts right after a URL.
    private static let prosePunctuation: Set<UInt8> = Set(":,.)".utf8)

    /// Whether the masked value `value` of `bytes` ends in the prose's punctuation: a `:`, `,`,
    /// `.` or `)` right before white space, after a letter or digit ("…?token=T: refused"),
    /// shown after the mask. Not at the text's end: a key or a URL alone ends there.
    private static func endsWithProsePunctuation(_ bytes: [UInt8], _ value: Range<Int>) -> Bool {
        let end = value.upperBound
        return value.count > 1 && prosePunctuation.contains(bytes[end - 1]) && isLetterOrDigit(bytes[end - 2])
            && end < bytes.count && bytes[end] <= 0x20
    }

    /// Whether `byte` is an ASCII letter or digit.
    private static func isLetterOrDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
            || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20)
    }

    /// The `@` ending a user info whose password holds a raw `/`, `?` or `#`, for an authority
    /// that starts at `start` and seems to end at `end` (at that byte): when what comes before
    /// `end` is `user:` and something that is not a port (digits), and an `@` follows before the
    /// URL ends. `https://host/img@2x.png` and `https://host:8080/x?mail=a@b` keep their hosts.
    private static func rawDelimiterInPassword(_ bytes: [UInt8], _ start: Int, _ end: Int) -> Int? {
        guard end < bytes.count, [UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#")].contains(bytes[end]),
            start < end, bytes[start] != UInt8(ascii: "["),
            let colon = bytes[start..<end].firstIndex(of: UInt8(ascii: ":")), colon > start
        else { return nil }
        let password = bytes[(colon + 1)..<end]
        guard !password.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        var index = end
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "@") { return index }
            if endsAuthority(byte), byte != UInt8(ascii: "/"), byte != UInt8(ascii: "?"), byte != UInt8(ascii: "#") {
                return nil
            }
            index += 1
        }
        return nil
    }

    /// After the `,` at `comma`: `name=value` whose name says it holds a secret (rclone's
    /// `pass=`, `client_secret=`, `key=`, `token=`), as (where the value starts, where it
    /// ends). A quoted value (`'…'` or `"…"`, a doubled quote inside) ends after its closing
    /// quote, and is masked whole with its quotes; a bare one at the next `,`, `:` or white space.
    private static func secretOption(_ bytes: [UInt8], at comma: Int) -> (Int, Int)? {
        var index = comma + 1
        while index < bytes.count,
            bytes[index] == UInt8(ascii: "_") || bytes[index] == UInt8(ascii: "-")
                || (bytes[index] | 0x20 >= UInt8(ascii: "a") && bytes[index] | 0x20 <= UInt8(ascii: "z"))
                || (bytes[index] >= UInt8(ascii: "0") && bytes[index] <= UInt8(ascii: "9"))
        {
            index += 1
        }
        guard index > comma + 1, index < bytes.count, bytes[index] == UInt8(ascii: "="),
            isSecretName(bytes[(comma + 1)..<index])
        else { return nil }
        let value = index + 1
        guard value < bytes.count else { return nil }
        var end = value
        let quote = bytes[value]
        if quote == UInt8(ascii: "'") || quote == UInt8(ascii: "\"") {
            end = value + 1
            while end < bytes.count {
                if bytes[end] == quote {
                    if end + 1 < bytes.count, bytes[end + 1] == quote {
                        end += 2
                        continue
                    }
                    end += 1
                    break
                }
                end += 1
            }
        } else {
            while end < bytes.count, bytes[end] > 0x20, bytes[end] != UInt8(ascii: ","), bytes[end] != UInt8(ascii: ":")
            {
                end += 1
            }
        }
        return end > value ? (value, end) : nil
    }

    /// Whether a word may start after `byte`: white space, a quote, a bracket or `=`.
    private static func startsToken(after byte: UInt8) -> Bool {
        // `/` too: `//alice:pw@host` (no scheme) and `http:/alice:pw@host` (one slash) are refused
        // as URLs, and their messages quote them.
        byte <= 0x20 || "'\"(<[{=,/".utf8.contains(byte)
    }

    /// In a word starting at `start`: `name:password@` with no `//` after the colon (a name of
    /// letters, digits and `-._~%`), as (where the password starts, where its last `@` is).
    private static func schemelessUserInfo(_ bytes: [UInt8], from start: Int) -> (Int, Int)? {
        var index = start
        while index < bytes.count {
            let byte = bytes[index]
            let isNameByte =
                (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || "-._~%".utf8.contains(byte)
            if !isNameByte { break }
            index += 1
        }
        guard index > start, index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
        let secret = index + 1
        // Not `scheme://`: the authority pass handles it.
        if secret < bytes.count, bytes[secret] == UInt8(ascii: "/") { return nil }
        // Up to the host's path or the word's end; the last `@` there ends the password.
        index = secret
        var at: Int?
        while index < bytes.count {
            let byte = bytes[index]
            if byte <= 0x20 || byte == 0x7F || "\"'<>`{}|\\^/".utf8.contains(byte) { break }
            if byte == UInt8(ascii: "@") { at = index }
            index += 1
        }
        guard let at, at > secret else { return nil }
        return (secret, at)
    }

    /// Whether the user name of `user:password@` is itself the secret, so that it is masked
    /// too: GitHub's `TOKEN:x-oauth-basic@` (and `TOKEN:x-oauth-token@`), a name with an empty
    /// password (`TOKEN:@`), a name that starts as a known token does (`ghp_`, `github_pat_`,
    /// `glpat-`, …), or one as long as a token (32 bytes or more; account names are shorter).
    public static func userIsSecret(_ user: ArraySlice<UInt8>, password: ArraySlice<UInt8>) -> Bool {
        if password.isEmpty || user.count >= 32 || isPlaceholderPassword(String(decoding: password, as: UTF8.self)) {
            return true
        }
        let name = String(decoding: user, as: UTF8.self)
        return tokenPrefixes.contains { name.hasPrefix($0) }
    }

    /// Whether `password` is the placeholder GitHub documents beside a token in the user name
    /// (`TOKEN:x-oauth-basic@`): no secret itself.
    public static func isPlaceholderPassword(_ password: String) -> Bool {
        ["x-oauth-basic", "x-oauth-token"].contains(password.lowercased())
    }

    /// How the tokens of the common forges start: GitHub's personal, OAuth, user-to-server,
    /// server-to-server and refresh tokens and its fine-grained ones, GitLab's personal tokens.
    private static let tokenPrefixes = ["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-"]

    /// Whether `bytes` hold `://`.
    private static func holdsAuthority(_ bytes: ArraySlice<UInt8>) -> Bool {
        var index = bytes.startIndex
        while index + 2 < bytes.endIndex {
            if bytes[index] == UInt8(ascii: ":"), bytes[index + 1] == UInt8(ascii: "/"),
                bytes[index + 2] == UInt8(ascii: "/")
            {
                return true
            }
            index += 1
        }
        return false
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
