internal import DateText
import Foundation

/// How long a stored item stays fresh.
///
/// An expiry is a point in time, a lifetime counted from when the item is stored, `never`, or
/// `dontStore` (the value is fetched and returned but not kept). A UNIX timestamp, as a number or
/// as a string, is a point in time. ``parse(_:)`` reads every form from text.
public enum Expiry: Sendable, Equatable, CustomStringConvertible {
    /// Fresh until this moment.
    case date(Date)
    /// Fresh for this long after it is stored.
    case lifetime(Duration)
    /// Always fresh (it still goes when the size limit needs the room).
    case never
    /// Returned to the caller but never stored.
    case dontStore

    /// The default lifetime: one day.
    public static let oneDay = Expiry.lifetime(.seconds(86_400))

    /// Fresh until the UNIX time `seconds` (seconds since 1970-01-01T00:00:00Z).
    public static func timestamp(_ seconds: Double) -> Expiry {
        .date(Date(timeIntervalSince1970: seconds))
    }

    /// Reads an expiry from text:
    /// - `never`; `dont-store`, `don't store` or `no-store`;
    /// - a lifetime: a number with a unit, `90s`, `15m`, `2h`, `7d` (or `1.5h`);
    /// - a UNIX timestamp: a bare number, `1767225600` or `1767225600.5`;
    /// - an RFC 3339 date: `2026-12-31T23:59:59Z` (fractional seconds and offsets allowed; every
    ///   field in range, so `2026-02-30` is refused rather than read as March 2).
    public static func parse(_ text: String) throws(ItemCacheError) -> Expiry {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        let word = trimmed.lowercased()
        switch word {
        case "never": return .never
        case "dont-store", "don't store", "dont store", "don't-store", "no-store": return .dontStore
        default: break
        }
        // A timestamp up to the last second of 9999, as far as a date is written (HTTPDate, ISO 8601).
        // Decimal only: `Double` also reads `0x10`, `1e9`, `nan` and `inf`.
        if let seconds = DecimalText.parse(trimmed), seconds <= 253_402_300_799 {
            return .timestamp(seconds)
        }
        if let unit = word.last, let scale = ["s": 1.0, "m": 60, "h": 3_600, "d": 86_400][String(unit)],
            let amount = DecimalText.parse(word.dropLast())
        {
            guard amount * scale <= longestLifetime else {
                throw ItemCacheError(
                    code: .invalidExpiry,
                    message:
                        "expiry '\(trimmed.count > 80 ? trimmed.prefix(80) + "…" : trimmed)' is longer than a lifetime may be (36500d, a hundred years); give 'never' to keep the item for good"
                )
            }
            return .lifetime(.milliseconds(Int64((amount * scale * 1000).rounded())))
        }
        if let date = InternetDateTime.parse(trimmed) { return .date(date) }
        throw ItemCacheError(
            code: .invalidExpiry,
            message:
                "expiry '\(text.count > 80 ? text.prefix(80) + "…" : text)' is not a date (2026-12-31T23:59:59Z), a UNIX timestamp (1767225600), "
                + "a lifetime with a unit (90s, 15m, 2h, 7d), 'never' or 'dont-store'")
    }

    /// When an item stored at `storedAt` stops being fresh; nil for ``never``, and `storedAt`
    /// itself for ``dontStore`` (it is never fresh in the cache). A date that is no time (NaN,
    /// -infinity) or a lifetime of zero or less is `storedAt` (stale at once, never "never");
    /// +infinity is nil.
    public func expirationDate(storedAt: Date) -> Date? {
        switch self {
        case .date(let date):
            let seconds = date.timeIntervalSince1970
            if seconds == .infinity { return nil }
            return seconds.isFinite ? date : storedAt
        case .lifetime(let duration):
            let seconds = duration.seconds
            return seconds > 0 ? storedAt.addingTimeInterval(seconds) : storedAt
        case .never: return nil
        case .dontStore: return storedAt
        }
    }

    /// The expiry as ``parse(_:)`` reads it back: a date before 1970 (or no time) as `0`, one
    /// past 9999 (or +infinity) as `never`; a lifetime of zero or less as `0s`, one past what
    /// `parse` reads (10¹² s, some 31,700 years) as `never`.
    public var description: String {
        switch self {
        case .date(let date):
            let seconds = date.timeIntervalSince1970
            if seconds.isNaN || seconds < 0 { return "0" }
            if seconds > 253_402_300_799 { return "never" }
            return InternetDateTime.format(date)
        case .lifetime(let duration):
            let seconds = duration.seconds
            if seconds <= 0 { return "0s" }
            if seconds > Self.longestLifetime { return "never" }
            return "\(seconds)s"
        case .never: return "never"
        case .dontStore: return "dont-store"
        }
    }

    /// The longest lifetime ``parse(_:)`` reads, and `sync-agent cache get --ttl`: a hundred years
    /// (3,153,600,000 s, as the agent's longest wait). A longer one describes itself as `never`.
    package static let longestLifetime = 3_153_600_000.0
}

extension Duration {
    /// The duration in nanoseconds (ImageCache's timers use it too).
    package var nanoseconds: Int64 { components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000 }
}
