import Foundation
import Testing

import enum Transport.HTTPDate

@testable import StorageServer

/// Request path decoding, range parsing, tag comparison and HTTP dates, without sockets.
@Suite(.timeLimit(.minutes(3)))
struct PureLogicTests {
    @Test(arguments: [
        ("/a.txt", ["a.txt"]),
        ("/dir/sub/file.bin", ["dir", "sub", "file.bin"]),
        ("/a%20b/%C3%A9.txt", ["a b", "é.txt"]),
        ("/", []),
        ("/..a/b..", ["..a", "b.."]),
        ("/%252e%252e", ["%2e%2e"]),
    ])
    func requestPathDecodesEachComponent(raw: String, components: [String]) {
        #expect(RequestPath(percentEncoded: raw)?.components == components)
    }

    @Test(arguments: [
        "", "a.txt", "/..", "/../x", "/a/../b", "/./a", "/%2e%2e/x", "/%2E%2e", "/.%2e/x",
        "/a%2fb", "/a%2F..%2Fb", "/a%00b", "//a", "/a//b", "/a/", "/bad%zzescape",
    ])
    func requestPathRefusesAnythingThatCouldLeaveTheRoot(raw: String) {
        #expect(RequestPath(percentEncoded: raw) == nil)
    }

    @Test(arguments: [
        ("bytes=0-9", 100, ByteRange.partial(0..<10)),
        ("bytes=90-200", 100, .partial(90..<100)),
        // The largest end a position can hold, and past it: `end + 1` trapped `serve`.
        ("bytes=0-9223372036854775807", 100, .partial(0..<100)),
        ("bytes=5-9223372036854775807", 6, .partial(5..<6)),
        ("bytes=0-99999999999999999999", 100, .whole),
        ("bytes=99-", 100, .partial(99..<100)),
        ("bytes=-10", 100, .partial(90..<100)),
        ("bytes=-500", 100, .partial(0..<100)),
        (" bytes=5-5 ", 100, .partial(5..<6)),
        ("bytes = 5-5", 100, .whole),
        ("BYTES=1-2", 100, .partial(1..<3)),
        ("bytes=100-", 100, .unsatisfiable),
        ("bytes=100-200", 100, .unsatisfiable),
        ("bytes=-0", 100, .unsatisfiable),
        ("bytes=-5", 0, .unsatisfiable),
        ("bytes=0-", 0, .unsatisfiable),
        ("bytes=5-1", 100, .whole),
        ("bytes=0-1,3-4", 100, .whole),
        ("bytes=-", 100, .whole),
        ("bytes=a-b", 100, .whole),
        ("bytes=+1-2", 100, .whole),
        ("lines=0-9", 100, .whole),
    ])
    func byteRangeFollowsRFC9110(header: String, size: Int, expected: ByteRange) {
        #expect(ByteRange(header: header, size: size) == expected)
    }

    @Test func missingRangeHeaderMeansTheWholeFile() {
        #expect(ByteRange(header: nil, size: 10) == .whole)
    }

    @Test func entityTagComparesWeaklyForIfNoneMatchAndStronglyForIfRange() {
        let tag = EntityTag(inode: 0xabc, size: 10, modificationNanoseconds: 0x1f)
        #expect(tag.value == "\"abc-a-1f\"")
        #expect(tag.matches(ifNoneMatch: "\"abc-a-1f\""))
        #expect(tag.matches(ifNoneMatch: "W/\"abc-a-1f\""))
        #expect(tag.matches(ifNoneMatch: "\"x\", \"abc-a-1f\""))
        #expect(tag.matches(ifNoneMatch: " * "))
        #expect(!tag.matches(ifNoneMatch: "\"abc-a-20\""))
        #expect(tag.matches(ifRange: "\"abc-a-1f\""))
        #expect(!tag.matches(ifRange: "W/\"abc-a-1f\""))
        #expect(!tag.matches(ifRange: "Wed, 21 Oct 2015 07:28:00 GMT"))
    }

    @Test func entityTagsDifferWhenAnyIdentityPartDiffers() {
        let base = EntityTag(inode: 1, size: 2, modificationNanoseconds: 3)
        #expect(base != EntityTag(inode: 9, size: 2, modificationNanoseconds: 3))
        #expect(base != EntityTag(inode: 1, size: 9, modificationNanoseconds: 3))
        #expect(base != EntityTag(inode: 1, size: 2, modificationNanoseconds: 9))
    }

    @Test(arguments: [
        ("index.json", "application/json"),
        ("A.ZIP", "application/zip"),
        ("notes.txt", "text/plain; charset=utf-8"),
        ("noextension", "application/octet-stream"),
        (".hidden", "application/octet-stream"),
        ("archive.unknownext", "application/octet-stream"),
    ])
    func contentTypeIsChosenByExtension(name: String, type: String) {
        #expect(ContentType.forFileName(name) == type)
    }

    @Test(arguments: [
        ("v2/a b.zip", "/v2/a%20b.zip"),
        ("/v2/é.txt", "/v2/%C3%A9.txt"),
        ("a:b/c?d#e", "/a%3Ab/c%3Fd%23e"),
        ("/", "/"),
        ("100%.txt", "/100%25.txt"),
    ])
    func serverPathsArePercentEncodedPerComponent(path: String, encoded: String) {
        #expect(StorageServer.percentEncodedPath(path) == encoded)
    }

    @Test(arguments: [
        (Int64(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT"),
        (0, "Thu, 01 Jan 1970 00:00:00 GMT"),
        (-1, "Wed, 31 Dec 1969 23:59:59 GMT"),
        (951_782_400, "Tue, 29 Feb 2000 00:00:00 GMT"),
        (1_445_412_480, "Wed, 21 Oct 2015 07:28:00 GMT"),
        (4_102_444_800, "Fri, 01 Jan 2100 00:00:00 GMT"),
        (253_402_300_799, "Fri, 31 Dec 9999 23:59:59 GMT"),
        (.max, "Fri, 31 Dec 9999 23:59:59 GMT"),
        (.min, "Sat, 01 Jan 0000 00:00:00 GMT"),
    ])
    func httpDateFormatsIMFFixdate(seconds: Int64, text: String) {
        #expect(HTTPDate.format(seconds) == text)
    }

    @Test(arguments: [
        ("Sun, 06 Nov 1994 08:49:37 GMT", Int64(784_111_777)),
        ("Sunday, 06-Nov-94 08:49:37 GMT", 784_111_777),
        ("Sun Nov  6 08:49:37 1994", 784_111_777),
        ("Sun Nov 16 08:49:37 1994", 784_975_777),
        // Two-digit years: the latest year no more than 50 years after 2026.
        ("Sunday, 06-Nov-77 08:49:37 GMT", 247_654_177),
        ("Thursday, 01-Jan-76 00:00:00 GMT", 3_345_062_400),
        ("Tue, 29 Feb 2000 00:00:00 GMT", 951_782_400),
        ("Wed, 31 Dec 1969 23:59:59 GMT", -1),
    ])
    func httpDateParsesAllThreeForms(text: String, seconds: Int64) {
        #expect(HTTPDate.parse(text, currentYear: 2026) == seconds)
    }

    @Test(arguments: [
        "", "garbage", "1994-11-06T08:49:37Z",
        "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1994 08:49:37", "sun, 06 Nov 1994 08:49:37 GMT",
        "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 nov 1994 08:49:37 GMT", "Sun, 06 Nov 94 08:49:37 GMT",
        "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 29 Feb 1900 00:00:00 GMT", "Sun, 00 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:60:00 GMT", "Sun, 06 Nov 1994 8:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:+7 GMT", "Sun, 06 Nov 1994 08:49:37 GMT, Mon, 07 Nov 1994 08:49:37 GMT",
        "Sunday, 06-Nov-1994 08:49:37 GMT", "Sun Nov 6 08:49:37 94", "Funday, 06 Nov 1994 08:49:37 GMT",
    ])
    func httpDateRefusesAnythingElse(text: String) {
        #expect(HTTPDate.parse(text, currentYear: 2026) == nil)
    }

    /// Foundation's calendar is an independent implementation of the same arithmetic.
    @Test func httpDateAgreesWithFoundationAndRoundTrips() throws {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = try #require(TimeZone(identifier: "UTC"))
        let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        var generator = SystemRandomNumberGenerator()
        // 1900 to 9999: Foundation switches to the Julian calendar before 1582.
        for _ in 0..<5_000 {
            let seconds = Int64.random(in: -2_208_988_800...253_402_300_799, using: &generator)
            let parts = calendar.dateComponents(
                [.weekday, .day, .month, .year, .hour, .minute, .second],
                from: Date(timeIntervalSince1970: TimeInterval(seconds)))
            let two = { (value: Int?) in String(format: "%02d", value ?? -1) }
            let expected =
                "\(days[(parts.weekday ?? 1) - 1]), \(two(parts.day)) \(months[(parts.month ?? 1) - 1]) "
                + String(format: "%04d", parts.year ?? -1)
                + " \(two(parts.hour)):\(two(parts.minute)):\(two(parts.second)) GMT"
            #expect(HTTPDate.format(seconds) == expected)
            #expect(HTTPDate.parse(HTTPDate.format(seconds), currentYear: 2026) == seconds)
        }
    }
}
