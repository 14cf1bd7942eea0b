import DateText
import Foundation
import Testing
import Transport

/// RFC 3339's date-time read exactly: every field in range, no roll-over, the case and space
/// variants §5.6 allows, and a format that reads back.
@Suite("Internet date-times (RFC 3339) are read exactly")
struct InternetDateTimeTests {
    @Test(arguments: [
        ("2026-12-31T23:59:59Z", 1_798_761_599.0),
        ("2026-12-31t23:59:59z", 1_798_761_599),
        ("2026-12-31 23:59:59Z", 1_798_761_599),
        ("2026-12-31T23:59:59.250Z", 1_798_761_599.25),
        ("2026-12-31T23:59:59.5+00:00", 1_798_761_599.5),
        ("2027-01-01T01:59:59+02:00", 1_798_761_599),
        ("2026-12-31T18:29:59-05:30", 1_798_761_599),
        ("2026-12-31T23:59:59-00:00", 1_798_761_599),
        ("1970-01-01T00:00:00+23:59", -86_340),
        // A leap second reads as the last second of its minute, as HTTPDate reads it.
        ("2026-01-01T23:59:60Z", 1_767_311_999),
        ("2000-02-29T12:00:00Z", 951_825_600),
        ("2028-02-29T00:00:00Z", 1_835_395_200),
        ("0000-01-01T00:00:00Z", -62_167_219_200),
        ("9999-12-31T23:59:59Z", 253_402_300_799),
    ])
    func datesReadAsTheirInstants(text: String, seconds: Double) {
        #expect(InternetDateTime.parse(text)?.timeIntervalSince1970 == seconds, "\(text)")
    }

    @Test func fractionsKeepTheirDigitsUpToNanoseconds() throws {
        let date = try #require(InternetDateTime.parse("2026-12-31T23:59:59.1234567891234Z"))
        #expect(abs(date.timeIntervalSince1970 - 1_798_761_599.123456789) < 1e-6)
        #expect(InternetDateTime.parse("2026-12-31T23:59:59.000Z")?.timeIntervalSince1970 == 1_798_761_599)
    }

    @Test(arguments: [
        "", "2026", "2026-12-31", "2026-12-31T23:59:59", "2026-12-31T23:59Z", "2026-12-31T23:59:59ZZ",
        "2026-12-31T23:59:59.Z", "2026-12-31T23:59:59,5Z", "2026-12-31T23:59:59+0200", "2026-12-31T23:59:59+02",
        "2026-12-31T23:59:59+02:00Z", "2026-12-31X23:59:59Z", "2026-12-31T23:59:59Z\n", " 2026-12-31T23:59:59Z",
        "26-12-31T23:59:59Z", "2026-1-31T23:59:59Z", "+2026-12-31T23:59:59Z", "12026-12-31T23:59:59Z",
        "２０２６-12-31T23:59:59Z", "2026/12/31T23:59:59Z",
        // Fields out of range, which Foundation's formatter rolls over into other days.
        "2026-02-30T00:00:00Z", "2026-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2026-04-31T00:00:00Z",
        "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2026-01-00T00:00:00Z", "2026-01-01T24:00:00Z",
        "2026-01-01T23:60:00Z", "2026-01-01T23:59:61Z", "2026-01-01T00:00:00+24:00", "2026-01-01T00:00:00+01:60",
    ])
    func anythingElseIsNoDate(text: String) {
        #expect(InternetDateTime.parse(text) == nil, "\(text)")
    }

    @Test(arguments: [
        (1_798_761_599.0, "2026-12-31T23:59:59Z"),
        (1_798_761_599.25, "2026-12-31T23:59:59.25Z"),
        (0, "1970-01-01T00:00:00Z"),
        (-1, "1969-12-31T23:59:59Z"),
        (-0.5, "1969-12-31T23:59:59.5Z"),
        (1_798_761_599.9999999, "2027-01-01T00:00:00Z"),
        (1e300, "9999-12-31T23:59:59Z"),
        (-1e300, "0000-01-01T00:00:00Z"),
        (.infinity, "9999-12-31T23:59:59Z"),
        (.nan, "0000-01-01T00:00:00Z"),
    ])
    func formatWritesUTCAndClampsToTheYearsItHolds(seconds: Double, text: String) {
        #expect(InternetDateTime.format(Date(timeIntervalSince1970: seconds)) == text)
    }

    /// How listings, messages and logs show a time: the second it falls in, never the next one
    /// (Foundation's formatter showed 23:59:59.99999 as the next day), and proleptic Gregorian
    /// before 1582 (Foundation's showed 1500-01-01 as 1499-12-23).
    @Test(arguments: [
        (1_798_761_599.99999, "2026-12-31T23:59:59Z"),
        (1_798_761_599.0, "2026-12-31T23:59:59Z"),
        (-14_831_769_600.0, "1500-01-01T00:00:00Z"),
        (-62_167_219_200.0, "0000-01-01T00:00:00Z"),
        (-0.25, "1969-12-31T23:59:59Z"),
    ])
    func wholeSecondsAreTheSecondATimeFallsIn(seconds: Double, text: String) {
        #expect(InternetDateTime.formatWholeSeconds(Date(timeIntervalSince1970: seconds)) == text)
    }

    @Test func aFormattedDateReadsBackAndAgreesWithHTTPDate() throws {
        var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<2_000 {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let seconds = Double(Int64(seed >> 28) % 253_402_300_800) + Double(seed & 0xFFFF) / 65_536
            let text = InternetDateTime.format(Date(timeIntervalSince1970: seconds))
            let again = try #require(InternetDateTime.parse(text), "\(text)")
            #expect(abs(again.timeIntervalSince1970 - seconds) < 1e-6, "\(seconds) → \(text)")
            // The same instant, to the second, through the package's other date code.
            let http = HTTPDate.format(Date(timeIntervalSince1970: seconds))
            #expect(HTTPDate.parse(http, currentYear: 2026) == Int64(seconds.rounded(.down)), "\(http)")
            #expect(http.dropFirst(12).prefix(4) == text.prefix(4), "the same year: \(text) / \(http)")
        }
    }
}
