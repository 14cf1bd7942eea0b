internal import DateText
import Foundation

/// RFC 9110 §5.6.7's HTTP-date, parsed exactly: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`),
/// the obsolete RFC 850 form (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime
/// (`Sun Nov  6 08:49:37 1994`). Anything else (`UTC` for `GMT`, no comma, a one-digit hour,
/// dots in the time, double spaces, trailing text, two dates) is not a date: the caller treats
/// it as invalid (an invalid `Expires` means already expired, RFC 9111 §5.3).
///
/// No Foundation formatter: they accept more than the grammar, depend on the locale, and cost
/// microseconds each. The one HTTP-date code of the package: the item cache's freshness, the
/// transport's `Retry-After` and the test server's `Last-Modified` all use it.
public enum HTTPDate {
    private static let days = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    private static let longDays = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// The date `text` names, or nil when it is not an HTTP-date. A two-digit RFC 850 year
    /// that would be more than 50 years after `now` is read as the latest earlier year with
    /// those digits (§5.6.7).
    public static func parse(_ text: String, now: Date = Date()) -> Date? {
        parse(
            text,
            currentYear: CivilTime.civil(fromDays: Int64((now.timeIntervalSince1970 / 86_400).rounded(.down))).year
        )
        .map { Date(timeIntervalSince1970: Double($0)) }
    }

    /// The whole seconds since 1970 that `text` names, or nil when it is not an HTTP-date; an
    /// RFC 850 two-digit year is read against `currentYear`.
    public static func parse(_ text: String, currentYear: Int) -> Int64? {
        let bytes = Array(text.utf8)
        return imfFixdate(bytes) ?? rfc850(bytes, currentYear: currentYear) ?? asctime(bytes)
    }

    /// `date` formatted as an IMF-fixdate, as a server sends `Date`.
    public static func format(_ date: Date) -> String {
        format(Int64(date.timeIntervalSince1970.rounded(.down)))
    }

    /// The IMF-fixdate of `seconds` since 1970, such as `Sun, 06 Nov 1994 08:49:37 GMT`. Years
    /// outside 0...9999, which the format cannot hold, are clamped to its first or last second.
    public static func format(_ seconds: Int64) -> String {
        let clamped = min(max(seconds, firstFormattable), lastFormattable)
        let days = clamped >= 0 ? clamped / 86_400 : (clamped - 86_399) / 86_400
        let secondOfDay = Int(clamped - days * 86_400)
        let (year, month, day) = CivilTime.civil(fromDays: days)
        let weekday = Int(((days % 7) + 7 + 3) % 7) // 1970-01-01 was a Thursday (index 3).
        return "\(Self.days[weekday]), \(CivilTime.padded(day, 2)) \(months[month - 1]) \(CivilTime.padded(year, 4)) "
            + "\(CivilTime.padded(secondOfDay / 3600, 2)):\(CivilTime.padded(secondOfDay / 60 % 60, 2)):\(CivilTime.padded(secondOfDay % 60, 2)) GMT"
    }

    /// The current year in UTC, for reading RFC 850 two-digit years.
    public static func currentYear() -> Int {
        CivilTime.civil(fromDays: Int64(Date().timeIntervalSince1970) / 86_400).year
    }

    private static let firstFormattable = CivilTime.daysFromCivil(year: 0, month: 1, day: 1) * 86_400
    private static let lastFormattable = CivilTime.daysFromCivil(year: 9999, month: 12, day: 31) * 86_400 + 86_399

    // MARK: - The three forms

    private static func imfFixdate(_ b: [UInt8]) -> Int64? {
        // "Sun, 06 Nov 1994 08:49:37 GMT": 29 bytes.
        guard b.count == 29, dayName(b, 0, 3, days) != nil, b[3] == c(","), b[4] == c(" "),
            let day = CivilTime.digits(b, 5, 2), b[7] == c(" "), let month = month(b, 8), b[11] == c(" "),
            let year = CivilTime.digits(b, 12, 4), b[16] == c(" "), let time = CivilTime.secondOfDay(b, at: 17),
            b[25] == c(" "),
            b[26] == c("G"), b[27] == c("M"), b[28] == c("T")
        else { return nil }
        return CivilTime.seconds(year: year, month: month, day: day, secondOfDay: time)
    }

    private static func rfc850(_ b: [UInt8], currentYear: Int) -> Int64? {
        // "Sunday, 06-Nov-94 08:49:37 GMT"
        guard let comma = b.firstIndex(of: c(",")), dayName(b, 0, comma, longDays) != nil else { return nil }
        let s = comma + 1
        guard b.count == s + 23, b[s] == c(" "), let day = CivilTime.digits(b, s + 1, 2), b[s + 3] == c("-"),
            let month = month(b, s + 4), b[s + 7] == c("-"), let shortYear = CivilTime.digits(b, s + 8, 2),
            b[s + 10] == c(" "), let time = CivilTime.secondOfDay(b, at: s + 11), b[s + 19] == c(" "),
            b[s + 20] == c("G"),
            b[s + 21] == c("M"), b[s + 22] == c("T")
        else { return nil }
        // §5.6.7: more than 50 years in the future is the most recent past year with those digits.
        var year = currentYear - currentYear % 100 + shortYear
        if year > currentYear + 50 { year -= 100 }
        return CivilTime.seconds(year: year, month: month, day: day, secondOfDay: time)
    }

    private static func asctime(_ b: [UInt8]) -> Int64? {
        // "Sun Nov  6 08:49:37 1994": 24 bytes; the day is two digits or a space and one.
        guard b.count == 24, dayName(b, 0, 3, days) != nil, b[3] == c(" "), let month = month(b, 4),
            b[7] == c(" "), b[10] == c(" "), let time = CivilTime.secondOfDay(b, at: 11), b[19] == c(" "),
            let year = CivilTime.digits(b, 20, 4)
        else { return nil }
        let day: Int
        if b[8] == c(" ") {
            guard let one = CivilTime.digits(b, 9, 1) else { return nil }
            day = one
        } else {
            guard let two = CivilTime.digits(b, 8, 2) else { return nil }
            day = two
        }
        return CivilTime.seconds(year: year, month: month, day: day, secondOfDay: time)
    }

    // MARK: - Pieces

    private static func c(_ character: Unicode.Scalar) -> UInt8 { UInt8(character.value) }

    private static func dayName(_ b: [UInt8], _ start: Int, _ end: Int, _ names: [String]) -> Int? {
        guard end <= b.count else { return nil }
        let word = b[start..<end]
        return names.firstIndex { Array($0.utf8)[...] == word }
    }

    private static func month(_ b: [UInt8], _ start: Int) -> Int? {
        guard start + 3 <= b.count else { return nil }
        let word = b[start..<start + 3]
        return months.firstIndex { Array($0.utf8)[...] == word }.map { $0 + 1 }
    }
}
