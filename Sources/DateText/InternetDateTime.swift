import Foundation

/// RFC 3339's internet date-time, read exactly: `2026-12-31T23:59:59Z`, with an optional
/// fraction (`.250`) and `Z` or a `±HH:MM` offset. `T` and `Z` may be lower case, and a space may
/// stand for `T` (§5.6's note). Every field must be in range: no 30 February, hour 24, minute
/// 60 or offset of 24 hours (Foundation's `ISO8601DateFormatter` rolls those over into other
/// days). A leap second (`:60`) reads as `:59`, as `HTTPDate` reads it.
package enum InternetDateTime {
    /// The instant `text` names, or nil when it is not an internet date-time.
    package static func parse(_ text: String) -> Date? {
        let b = Array(text.utf8)
        guard b.count >= 20, let year = CivilTime.digits(b, 0, 4), b[4] == UInt8(ascii: "-"),
            let month = CivilTime.digits(b, 5, 2), b[7] == UInt8(ascii: "-"), let day = CivilTime.digits(b, 8, 2),
            [UInt8(ascii: "T"), UInt8(ascii: "t"), UInt8(ascii: " ")].contains(b[10]),
            let time = CivilTime.secondOfDay(b, at: 11),
            let whole = CivilTime.seconds(year: year, month: month, day: day, secondOfDay: time)
        else { return nil }
        var index = 19
        var fraction = 0.0
        if b[index] == UInt8(ascii: ".") {
            let start = index + 1
            index = start
            while index < b.count, b[index] >= UInt8(ascii: "0"), b[index] <= UInt8(ascii: "9") { index += 1 }
            guard index > start else { return nil }
            // Nine digits are nanoseconds, past what a Date holds; more are read and ignored.
            let digits = min(index - start, 9)
            fraction = Double(CivilTime.digits(b, start, digits)!) / pow(10, Double(digits))
        }
        guard index < b.count else { return nil }
        let offset: Int
        switch b[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            guard index + 1 == b.count else { return nil }
            offset = 0
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard index + 6 == b.count, let hours = CivilTime.digits(b, index + 1, 2),
                b[index + 3] == UInt8(ascii: ":"), let minutes = CivilTime.digits(b, index + 4, 2), hours <= 23,
                minutes <= 59
            else { return nil }
            offset = (hours * 60 + minutes) * 60 * (b[index] == UInt8(ascii: "-") ? -1 : 1)
        default: return nil
        }
        return Date(timeIntervalSince1970: Double(whole - Int64(offset)) + fraction)
    }

    /// `date` in UTC as `2026-12-31T23:59:59Z`, with the fraction of a second to the
    /// microsecond (trailing zeros dropped) when it has one. Years outside 0000–9999, which the
    /// format cannot hold, are clamped to its first or last second.
    package static func format(_ date: Date) -> String {
        let given = date.timeIntervalSince1970
        let time = given.isNaN ? Double(first) : min(max(given, Double(first)), Double(last))
        let whole = Int64(time.rounded(.down))
        var micros = Int(((time - Double(whole)) * 1_000_000).rounded())
        var seconds = whole
        if micros == 1_000_000 { (seconds, micros) = (whole + 1, 0) }
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = Int(seconds - days * 86_400)
        let (year, month, day) = CivilTime.civil(fromDays: days)
        var text =
            "\(CivilTime.padded(year, 4))-\(CivilTime.padded(month, 2))-\(CivilTime.padded(day, 2))T"
            + "\(CivilTime.padded(secondOfDay / 3600, 2)):\(CivilTime.padded(secondOfDay / 60 % 60, 2)):"
            + CivilTime.padded(secondOfDay % 60, 2)
        if micros > 0 {
            var digits = CivilTime.padded(micros, 6)
            while digits.hasSuffix("0") { digits.removeLast() }
            text += "." + digits
        }
        return text + "Z"
    }

    /// `date` in UTC to the whole second, the fraction dropped (`2026-12-31T23:59:59Z`), as
    /// messages, listings and logs show times: never a second later than the time itself.
    package static func formatWholeSeconds(_ date: Date) -> String {
        let seconds = date.timeIntervalSince1970
        return format(Date(timeIntervalSince1970: seconds.isFinite ? seconds.rounded(.down) : seconds))
    }

    private static let first = CivilTime.daysFromCivil(year: 0, month: 1, day: 1) * 86_400
    private static let last = CivilTime.daysFromCivil(year: 9999, month: 12, day: 31) * 86_400 + 86_399
}
