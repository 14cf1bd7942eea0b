import Foundation

/// How long a response stays fresh by the server's own word, as RFC 9111 §4.2 and §5.2.2 define
/// it for a private cache.
///
/// - `no-store` (§5.2.2.5): not stored at all.
/// - `no-cache` (§5.2.2.4): stored, but every use revalidates first.
/// - `max-age=N` (§5.2.2.1) wins over `Expires`; `s-maxage` is for shared caches and is ignored.
/// - The current age (§4.2.3) is `Age` plus the time since `Date`, when the server sent them;
///   the item expires `max-age − age` seconds from now.
/// - `Expires` (§5.3) counts from the server's `Date` when it sent one (so a skewed local clock
///   does not matter), else from now; an invalid `Expires` (`0`, `-1`) means already expired.
/// - With none of these the caller's default applies (no heuristic freshness, §4.2.2).
public enum HTTPFreshness: Equatable, Sendable {
    /// `no-store`: return it, keep nothing.
    case noStore
    /// Fresh until `expires` (nil: the server said nothing, use the default); `mustRevalidate`
    /// for `no-cache`.
    case fresh(expires: Date?, mustRevalidate: Bool)

    /// The freshness of a response with these headers (names lower-cased), received at `now`.
    public static func of(headers: [String: String], now: Date = Date()) -> HTTPFreshness {
        let directives = cacheControl(headers["cache-control"] ?? "")
        if directives["no-store"] != nil { return .noStore }
        let mustRevalidate = directives["no-cache"] != nil
        let date = headers["date"].flatMap(parseDate)
        var age = Double(headers["age"].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) } ?? 0)
        if let date { age = max(age, now.timeIntervalSince(date)) }
        if let maxAge = directives["max-age"].flatMap({ $0.flatMap { Int($0) } }) {
            return .fresh(expires: now.addingTimeInterval(Double(maxAge) - max(0, age)), mustRevalidate: mustRevalidate)
        }
        if let expiresText = headers["expires"] {
            guard let expires = parseDate(expiresText) else {
                return .fresh(expires: now, mustRevalidate: mustRevalidate)
            }
            let lifetime = expires.timeIntervalSince(date ?? now)
            return .fresh(
                expires: now.addingTimeInterval(lifetime - max(0, date == nil ? 0 : age)),
                mustRevalidate: mustRevalidate)
        }
        return .fresh(expires: nil, mustRevalidate: mustRevalidate)
    }

    /// The directives of a `Cache-Control` value, names lower-cased, values unquoted (nil for a
    /// directive with no value).
    static func cacheControl(_ value: String) -> [String: String?] {
        var directives: [String: String?] = [:]
        for part in value.split(separator: ",") {
            let pieces = part.split(separator: "=", maxSplits: 1)
            let name = pieces[0].trimmingCharacters(in: .whitespaces).lowercased()
            guard !name.isEmpty else { continue }
            let argument =
                pieces.count > 1
                ? pieces[1].trimmingCharacters(in: .whitespaces).trimmingCharacters(
                    in: CharacterSet(charactersIn: "\"")) : nil
            if directives[name] == nil { directives[name] = .some(argument) }
        }
        return directives
    }

    /// An HTTP date in any of RFC 9110's three forms (IMF-fixdate, RFC 850, asctime).
    static func parseDate(_ text: String) -> Date? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        for format in ["EEE, dd MMM yyyy HH:mm:ss zzz", "EEEE, dd-MMM-yy HH:mm:ss zzz", "EEE MMM d HH:mm:ss yyyy"] {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = format
            if let date = formatter.date(from: trimmed) { return date }
        }
        return nil
    }
}
