import Foundation

/// HTTP dates (RFC 9110 §5.6.7) as whole seconds since 1970, in UTC.
///
/// Written by hand rather than with `DateFormatter`, whose parsing depends on the locale and
/// whose Linux implementation is slow on the handler's hot path.
enum HTTPDate {
    private static let dayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let longDayNames = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
    private static let monthNames = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]

    /// The IMF-fixdate for `seconds`, such as `Sun, 06 Nov 1994 08:49:37 GMT`. Years outside
    /// 0...9999, which the format cannot hold, are clamped to its first or last second.
    static func format(_ seconds: Int64) -> String {
        let clamped = min(max(seconds, firstFormattable), lastFormattable)
        let days = clamped >= 0 ? clamped / 86_400 : (clamped - 86_399) / 86_400
        let secondOfDay = clamped - days * 86_400
        let (year, month, day) = civil(fromDays: days)
        // 1970-01-01 was a Thursday.
        let weekday = Int(((days % 7) + 11) % 7)
        return "\(dayNames[weekday]), \(pad(day, 2)) \(monthNames[month - 1]) \(pad(year, 4)) "
            + "\(pad(Int(secondOfDay / 3600), 2)):\(pad(Int(secondOfDay / 60 % 60), 2)):\(pad(Int(secondOfDay % 60), 2)) GMT"
    }

    /// The seconds an HTTP date names, or `nil` when `text` is not one. Accepts the three forms
    /// recipients must accept: IMF-fixdate, RFC 850 (two-digit year, read as the latest year at
    /// most 50 years after `currentYear`) and asctime. The weekday must be a day name but is not
    /// checked against the date.
    static func parse(_ text: String, currentYear: Int = currentYear()) -> Int64? {
        let tokens = text.split(separator: " ")
        guard let first = tokens.first else { return nil }
        let year: Int
        let month: Int
        let day: Int
        let time: Substring
        if first.hasSuffix(","), tokens.count == 6, dayNames.contains(String(first.dropLast())) {
            // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
            guard tokens[5] == "GMT", tokens[1].utf8.count == 2, tokens[3].utf8.count == 4,
                let parsedDay = number(tokens[1]), let parsedMonth = monthIndex(tokens[2]),
                let parsedYear = number(tokens[3])
            else { return nil }
            (year, month, day, time) = (parsedYear, parsedMonth, parsedDay, tokens[4])
        } else if first.hasSuffix(","), tokens.count == 4, longDayNames.contains(String(first.dropLast())) {
            // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
            let parts = tokens[1].split(separator: "-", omittingEmptySubsequences: false)
            guard tokens[3] == "GMT", parts.count == 3, parts[0].utf8.count == 2, parts[2].utf8.count == 2,
                let parsedDay = number(parts[0]), let parsedMonth = monthIndex(parts[1]),
                let twoDigits = number(parts[2])
            else { return nil }
            var fullYear = currentYear - currentYear % 100 + twoDigits
            if fullYear > currentYear + 50 { fullYear -= 100 }
            (year, month, day, time) = (fullYear, parsedMonth, parsedDay, tokens[2])
        } else if tokens.count == 5, dayNames.contains(String(first)) {
            // asctime: Sun Nov  6 08:49:37 1994
            guard (1...2).contains(tokens[2].utf8.count), tokens[4].utf8.count == 4,
                let parsedMonth = monthIndex(tokens[1]), let parsedDay = number(tokens[2]),
                let parsedYear = number(tokens[4])
            else { return nil }
            (year, month, day, time) = (parsedYear, parsedMonth, parsedDay, tokens[3])
        } else {
            return nil
        }
        let clock = time.split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, clock.allSatisfy({ $0.utf8.count == 2 }),
            let hour = number(clock[0]), let minute = number(clock[1]), let second = number(clock[2]),
            hour < 24, minute < 60, second <= 60,
            day >= 1, day <= daysIn(month: month, year: year)
        else { return nil }
        return days(fromCivil: year, month, day) * 86_400 + Int64(hour * 3600 + minute * 60 + second)
    }

    /// The current year in UTC, for reading RFC 850 two-digit years.
    static func currentYear() -> Int {
        civil(fromDays: Int64(Date().timeIntervalSince1970) / 86_400).year
    }

    private static let firstFormattable = days(fromCivil: 0, 1, 1) * 86_400
    private static let lastFormattable = days(fromCivil: 9999, 12, 31) * 86_400 + 86_399

    private static func number(_ digits: Substring) -> Int? {
        guard !digits.isEmpty, digits.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            return nil
        }
        return Int(digits)
    }

    /// 1 for `Jan` through 12 for `Dec`; month names are case-sensitive in HTTP dates.
    private static func monthIndex(_ name: Substring) -> Int? {
        monthNames.firstIndex(of: String(name)).map { $0 + 1 }
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
    static func days(fromCivil year: Int, _ month: Int, _ day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = Int64((153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1)
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The date `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`).
    static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = Int(dayOfYear - (153 * shiftedMonth + 2) / 5 + 1)
        let month = Int(shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9)
        let year = Int(yearOfEra + era * 400) + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }
}
