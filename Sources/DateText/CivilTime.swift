/// The exact pieces every date reader of the package is built from: ASCII digit fields, a
/// `HH:MM:SS` time of day, and proleptic Gregorian day counting with real month lengths.
///
/// No field rolls over: a 30 February, hour 24 or minute 60 is no date, where Foundation's
/// formatters would read the next day or hour.
package enum CivilTime {
    /// The value of `count` ASCII digits at `start`, or nil when one is not a digit or the
    /// bytes end first.
    package static func digits(_ bytes: [UInt8], _ start: Int, _ count: Int) -> Int? {
        guard start >= 0, count > 0, start + count <= bytes.count else { return nil }
        var value = 0
        for byte in bytes[start..<start + count] {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value
    }

    /// `HH:MM:SS` at `start` as seconds of the day; hours 0–23, minutes 0–59, seconds 0–60. A
    /// leap second (60) is read as the last second of its minute.
    package static func secondOfDay(_ bytes: [UInt8], at start: Int) -> Int? {
        guard start + 8 <= bytes.count, let hour = digits(bytes, start, 2), bytes[start + 2] == UInt8(ascii: ":"),
            let minute = digits(bytes, start + 3, 2), bytes[start + 5] == UInt8(ascii: ":"),
            let second = digits(bytes, start + 6, 2), hour < 24, minute < 60, second <= 60
        else { return nil }
        return hour * 3600 + minute * 60 + min(second, 59)
    }

    /// Seconds since 1970-01-01T00:00:00Z of a UTC date and second of the day, or nil when the
    /// month is not 1–12 or the day is not one the month has (leap years counted).
    package static func seconds(year: Int, month: Int, day: Int, secondOfDay: Int) -> Int64? {
        guard (1...12).contains(month), (0..<86_400).contains(secondOfDay) else { return nil }
        let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
        let lengths = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard day >= 1, day <= lengths[month - 1] else { return nil }
        return daysFromCivil(year: year, month: month, day: day) * 86_400 + Int64(secondOfDay)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    package static func daysFromCivil(year: Int, month: Int, day: Int) -> Int64 {
        let y = Int64(month <= 2 ? year - 1 : year)
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let m = Int64(month)
        let dayOfYear = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + Int64(day) - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The proleptic Gregorian date `days` after 1970-01-01.
    package static func civil(fromDays days: Int64) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (Int(year), Int(month), Int(day))
    }

    /// `value` as decimal digits, left-padded with zeros to `width`.
    package static func padded(_ value: Int, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
