import FileKit
import Foundation
import Testing
import Transport

@testable import ItemCache

/// The freshness model row by row, each row with the RFC section it follows.
@Suite("The HTTP freshness model: storing, lifetimes, ages and verdicts, by RFC 9111, 9110 and 5861")
struct HTTPFreshnessModelTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000) // 2027-01-15T08:00:00Z
    static let imfNow = HTTPDate.format(now)
    static let model = HTTPFreshnessModel()

    // MARK: - HTTP dates (finding 2, 3)

    struct DateRow: Sendable, CustomTestStringConvertible {
        var why: String
        var text: String
        var expected: Date?
        var testDescription: String { why }
    }

    static let aug2050 = Date(timeIntervalSince1970: 2_544_400_878) // Thu, 18 Aug 2050 02:01:18 GMT

    static let dateRows: [DateRow] = [
        DateRow(why: "RFC 9110 §5.6.7: IMF-fixdate", text: "Thu, 18 Aug 2050 02:01:18 GMT", expected: aug2050),
        DateRow(
            why: "§5.6.7: RFC 850 with a two-digit year within 50 years is this century (finding 3)",
            text: "Thursday, 18-Aug-50 02:01:18 GMT", expected: aug2050),
        DateRow(why: "§5.6.7: asctime, day padded with a space", text: "Thu Aug 18 02:01:18 2050", expected: aug2050),
        DateRow(
            why: "§5.6.7: asctime with a one-digit day", text: "Sun Nov  6 08:49:37 1994",
            expected: Date(timeIntervalSince1970: 784_111_777)),
        DateRow(
            why: "§5.6.7: RFC 850 more than 50 years ahead is the previous century",
            text: "Sunday, 06-Nov-94 08:49:37 GMT", expected: Date(timeIntervalSince1970: 784_111_777)),
        DateRow(why: "finding 2: UTC is not GMT", text: "Thu, 18 Aug 2050 02:01:18 UTC", expected: nil),
        DateRow(why: "finding 2: no comma", text: "Thu 18 Aug 2050 02:01:18 GMT", expected: nil),
        DateRow(why: "finding 2: double spaces", text: "Thu,  18 Aug 2050 02:01:18 GMT", expected: nil),
        DateRow(why: "finding 2: dashes in an IMF-fixdate", text: "Thu, 18-Aug-2050 02:01:18 GMT", expected: nil),
        DateRow(why: "finding 2: dots in the time", text: "Thu, 18 Aug 2050 02.01.18 GMT", expected: nil),
        DateRow(why: "finding 2: a one-digit hour", text: "Thu, 18 Aug 2050 2:01:18 GMT", expected: nil),
        DateRow(
            why: "finding 2: two dates (two Expires lines combined)",
            text: "Thu, 18 Aug 2050 02:01:18 GMT, Thu, 18 Aug 2050 02:01:18 GMT", expected: nil),
        DateRow(why: "§5.3: 0 is no date", text: "0", expected: nil),
        DateRow(why: "a month that does not exist", text: "Thu, 18 Abc 2050 02:01:18 GMT", expected: nil),
        DateRow(why: "a day the month does not have", text: "Thu, 30 Feb 2050 02:01:18 GMT", expected: nil),
        DateRow(why: "an hour past 23", text: "Thu, 18 Aug 2050 24:01:18 GMT", expected: nil),
        DateRow(why: "trailing text", text: "Thu, 18 Aug 2050 02:01:18 GMT x", expected: nil),
        DateRow(
            why: "lower-case: the date is case-sensitive (§5.6.7)", text: "thu, 18 aug 2050 02:01:18 gmt", expected: nil
        ),
    ]

    @Test("HTTP dates", arguments: dateRows)
    func dates(row: DateRow) {
        #expect(HTTPDate.parse(row.text, now: Self.now) == row.expected)
    }

    @Test("an IMF-fixdate formats and parses back")
    func formatRoundTrip() {
        for seconds in [0.0, 784_111_777, 1_800_000_000, 2_544_400_878, 4_102_444_799] {
            let date = Date(timeIntervalSince1970: seconds)
            #expect(HTTPDate.parse(HTTPDate.format(date)) == date, "\(HTTPDate.format(date))")
        }
    }

    // MARK: - Cache-Control and Age (finding 4, 12)

    @Test("Cache-Control directives: quoted commas, case, arguments")
    func directives() {
        let parsed = CacheDirectives(#"No-Cache="set-cookie, x", MAX-AGE=60 , private, ext="a\"b""#)
        #expect(parsed.directives.map(\.name) == ["no-cache", "max-age", "private", "ext"])
        #expect(parsed.directives[0].argument == "set-cookie, x")
        #expect(parsed.seconds("max-age") == .value(60))
        #expect(parsed.directives[3].argument == "a\"b")
        // RFC 9111 §5.2.2.1: max-age takes the token form; the quoted one is invalid (finding 4).
        #expect(CacheDirectives(#"max-age="3600""#).seconds("max-age") == .invalid)
        #expect(CacheDirectives("max-age=").seconds("max-age") == .invalid)
        #expect(CacheDirectives("max-age=-1").seconds("max-age") == .invalid)
        #expect(CacheDirectives("max-age=1.5").seconds("max-age") == .invalid)
        #expect(CacheDirectives("max-age").seconds("max-age") == .bare)
        // §4.2.1: conflicting duplicates are read as stale; equal ones as the one value.
        #expect(CacheDirectives("max-age=5, max-age=10").seconds("max-age") == .invalid)
        #expect(CacheDirectives("max-age=5, max-age=5").seconds("max-age") == .value(5))
        // §1.2.2: an overflowing delta-seconds is 2^31 (finding 12).
        #expect(CacheDirectives("max-age=99999999999999999999").seconds("max-age") == .value(2_147_483_648))
    }

    @Test("Age (RFC 9111 §5.1): the first member of a list; an overflow is 2^31; junk is ignored")
    func ages() {
        #expect(HTTPFreshnessModel.age("7200, 0") == 7200) // finding 4
        #expect(HTTPFreshnessModel.age("99999999999999999999") == 2_147_483_648) // finding 12
        #expect(HTTPFreshnessModel.age("-5") == nil)
        #expect(HTTPFreshnessModel.age("abc") == nil)
        #expect(HTTPFreshnessModel.age(" 30 ") == 30)
    }

    // MARK: - Storing

    struct StoreRow: Sendable, CustomTestStringConvertible {
        var why: String
        var status: Int = 200
        var headers: [String: String]
        var request: String? = nil
        /// Seconds of freshness left at the response time; nil for never; `.nan` for not stored.
        var lifetime: Double?
        var revalidates = false
        var testDescription: String { why }
    }

    static let notStored = Double.nan

    static let storeRows: [StoreRow] = [
        StoreRow(why: "§5.2.2.1 max-age", headers: ["cache-control": "max-age=60"], lifetime: 60),
        StoreRow(
            why: "§4.2.3: max-age less Age", headers: ["cache-control": "max-age=100", "age": "40"], lifetime: 60),
        StoreRow(
            why: "§5.1, finding 4: a list-form Age counts its first member",
            headers: ["cache-control": "max-age=10000", "age": "7200, 0"], lifetime: 2800),
        StoreRow(
            why: "§1.2.2, finding 12: an overflowing Age makes max-age=600 stale",
            headers: ["cache-control": "max-age=600", "age": "99999999999999999999"], lifetime: -2_147_483_048),
        StoreRow(
            why: "§4.2.1, finding 4: a quoted max-age is invalid: stale, not the default",
            headers: ["cache-control": #"max-age="3600""#], lifetime: 0),
        StoreRow(why: "finding 4: an empty max-age is stale", headers: ["cache-control": "max-age="], lifetime: 0),
        StoreRow(
            why: "§5.2.2.10: s-maxage is for shared caches", headers: ["cache-control": "s-maxage=60"],
            lifetime: 86_400),
        StoreRow(
            why: "§5.3: Expires against Date",
            headers: ["date": imfNow, "expires": HTTPDate.format(now.addingTimeInterval(120))], lifetime: 120),
        StoreRow(
            why: "§5.3, finding 2: an invalid Expires is already expired",
            headers: ["expires": "Thu, 18 Aug 2050 02:01:18 UTC"], lifetime: 0),
        StoreRow(
            why: "§5.3: two Expires lines (combined) are invalid: expired",
            headers: ["expires": "Thu, 18 Aug 2050 02:01:18 GMT, Thu, 18 Aug 2050 02:01:18 GMT"], lifetime: 0),
        StoreRow(
            why: "§5.2.2.1: max-age wins over Expires",
            headers: ["cache-control": "max-age=30", "expires": HTTPDate.format(now.addingTimeInterval(9999))],
            lifetime: 30),
        StoreRow(
            why: "§4.2.2, finding 15: no freshness information: the heuristic (one day by default)", headers: [:],
            lifetime: 86_400),
        StoreRow(
            why: "§5.2.2.5 no-store: not stored", headers: ["cache-control": "no-store, max-age=60"],
            lifetime: notStored),
        StoreRow(
            why: "§5.3 finding 1: no-store on one line, max-age on the next (combined)",
            headers: ["cache-control": "no-store, max-age=3600"], lifetime: notStored),
        StoreRow(
            why: "§5.2.2.4 no-cache: stored, revalidated on every use", headers: ["cache-control": "no-cache"],
            lifetime: 86_400, revalidates: true),
        StoreRow(
            why: "§5.2.2.4: no-cache with field names is treated as no-cache",
            headers: ["cache-control": #"no-cache="set-cookie", max-age=60"#], lifetime: 60, revalidates: true),
        StoreRow(
            why: "§5.2.2.7 private: a private cache stores it", headers: ["cache-control": "private, max-age=60"],
            lifetime: 60),
        StoreRow(
            why: "§5.2.1.5: the request's no-store", headers: ["cache-control": "max-age=60"], request: "no-store",
            lifetime: notStored),
        StoreRow(why: "§4.1: Vary: * is never stored", headers: ["vary": "Accept, *"], lifetime: notStored),
        StoreRow(
            why: "RFC 9110 §15.1, finding 9: a 404 is cacheable by default", status: 404, headers: [:],
            lifetime: 86_400),
        StoreRow(
            why: "finding 9: a 204 is cacheable by default", status: 204, headers: ["cache-control": "max-age=5"],
            lifetime: 5),
        StoreRow(
            why: "§3: a 201 without explicit freshness is not stored", status: 201, headers: [:], lifetime: notStored),
        StoreRow(
            why: "§3: a 201 with max-age is stored", status: 201, headers: ["cache-control": "max-age=9"], lifetime: 9),
        StoreRow(
            why: "§3: a 500 with explicit freshness may be stored", status: 500,
            headers: ["cache-control": "max-age=9"],
            lifetime: 9),
        StoreRow(why: "§3: a 500 without is not", status: 500, headers: [:], lifetime: notStored),
        StoreRow(
            why: "issue 21: a 206 is never the whole item", status: 206, headers: ["cache-control": "max-age=60"],
            lifetime: notStored),
        StoreRow(
            why: "§5.2.2.3 must-understand: an understood status is stored despite no-store",
            headers: ["cache-control": "must-understand, no-store, max-age=60"], lifetime: 60),
        StoreRow(
            why: "§5.2.2.3: must-understand with a status not understood is not stored", status: 299,
            headers: ["cache-control": "must-understand, max-age=60"], lifetime: notStored),
    ]

    @Test("storing a response", arguments: storeRows)
    func storing(row: StoreRow) {
        let verdict = Self.model.storing(
            status: row.status, headers: row.headers, request: CacheDirectives(row.request), requestTime: Self.now,
            responseTime: Self.now)
        switch verdict {
        case .doNotStore(let reason):
            #expect(row.lifetime?.isNaN == true, "not stored: \(reason)")
        case .store(let expires, _, let revalidates, _):
            #expect(row.lifetime?.isNaN != true, "stored")
            #expect(expires.map { $0.timeIntervalSince(Self.now) } == row.lifetime)
            #expect(revalidates == row.revalidates)
        }
    }

    @Test("§4.2.2: the RFC heuristic is 10 % of the time since Last-Modified")
    func lastModifiedHeuristic() {
        let model = HTTPFreshnessModel(heuristic: .lastModifiedFraction(0.1))
        let headers = ["date": Self.imfNow, "last-modified": HTTPDate.format(Self.now.addingTimeInterval(-10_000))]
        guard
            case .store(let expires, _, _, let heuristic) = model.storing(
                status: 200, headers: headers, request: CacheDirectives(nil), requestTime: Self.now,
                responseTime: Self.now)
        else { return #expect(Bool(false)) }
        #expect(heuristic)
        #expect(expires == Self.now.addingTimeInterval(1000))
        // Without Last-Modified: no heuristic lifetime.
        guard
            case .store(let none, _, _, _) = model.storing(
                status: 200, headers: [:], request: CacheDirectives(nil), requestTime: Self.now,
                responseTime: Self.now)
        else { return #expect(Bool(false)) }
        #expect(none == Self.now)
    }

    @Test("§4.2.3: the corrected initial age counts Date, Age and the response delay")
    func born() {
        let requestTime = Self.now.addingTimeInterval(-2)
        // A Date 10 s before the response: apparent age 10.
        #expect(
            HTTPFreshnessModel.born(
                headers: ["date": HTTPDate.format(Self.now.addingTimeInterval(-10))], requestTime: requestTime,
                responseTime: Self.now) == Self.now.addingTimeInterval(-10))
        // Age 5 plus a 2 s delay: 7.
        #expect(
            HTTPFreshnessModel.born(headers: ["age": "5"], requestTime: requestTime, responseTime: Self.now)
                == Self.now.addingTimeInterval(-7))
    }

    // MARK: - Using

    struct UseRow: Sendable, CustomTestStringConvertible {
        var why: String
        /// Seconds until (positive) or since (negative) expiry.
        var expiresIn: Double?
        var age: Double = 10
        var cacheControl: String? = nil
        var revalidates = false
        var request: String? = nil
        var window: Double = 0
        var policy: StaleIfErrorPolicy = .whenPermitted
        var use: HTTPFreshnessModel.Use
        var staleOnError: Bool
        var testDescription: String { why }
    }

    static let useRows: [UseRow] = [
        UseRow(why: "§4.2: fresh", expiresIn: 60, use: .fresh, staleOnError: true),
        UseRow(why: "§4.2: stale at its expiry", expiresIn: 0, use: .revalidate, staleOnError: true),
        UseRow(why: "never expires", expiresIn: nil, use: .fresh, staleOnError: true),
        UseRow(
            why: "§5.2.2.4 no-cache: revalidate even when fresh", expiresIn: 60, revalidates: true, use: .revalidate,
            staleOnError: false),
        UseRow(
            why: "§4.2.4, finding 5: must-revalidate forbids stale on error", expiresIn: -5,
            cacheControl: "max-age=1, must-revalidate", use: .revalidate, staleOnError: false),
        UseRow(
            why: "§4.2.4, finding 5: no-cache forbids stale on error", expiresIn: -5, cacheControl: "no-cache",
            use: .revalidate, staleOnError: false),
        UseRow(
            why: "§5.2.2.8 proxy-revalidate is for shared caches", expiresIn: -5,
            cacheControl: "max-age=1, proxy-revalidate", use: .revalidate, staleOnError: true),
        UseRow(
            why: "RFC 5861 §3, finding 8: inside the response's stale-while-revalidate",
            expiresIn: -5, cacheControl: "max-age=1, stale-while-revalidate=30", use: .staleWhileRevalidate,
            staleOnError: true),
        UseRow(
            why: "RFC 5861 §3: past it", expiresIn: -31, cacheControl: "max-age=1, stale-while-revalidate=30",
            use: .revalidate, staleOnError: true),
        UseRow(
            why: "RFC 5861 §3: the caller's window when the response sets none", expiresIn: -5, window: 60,
            use: .staleWhileRevalidate, staleOnError: true),
        UseRow(
            why: "§4.2.4: never stale-while-revalidate under must-revalidate", expiresIn: -5,
            cacheControl: "max-age=1, must-revalidate, stale-while-revalidate=30", use: .revalidate,
            staleOnError: false),
        UseRow(
            why: "RFC 5861 §4: inside stale-if-error", expiresIn: -5, cacheControl: "max-age=1, stale-if-error=30",
            use: .revalidate, staleOnError: true),
        UseRow(
            why: "RFC 5861 §4: past stale-if-error", expiresIn: -31, cacheControl: "max-age=1, stale-if-error=30",
            use: .revalidate, staleOnError: false),
        UseRow(
            why: "RFC 5861 §4: the request's stale-if-error", expiresIn: -31, request: "stale-if-error=60",
            use: .revalidate, staleOnError: true),
        UseRow(
            why: "issue 21: the caller may always ask for stale data", expiresIn: -5,
            cacheControl: "max-age=1, must-revalidate", policy: .always, use: .revalidate, staleOnError: true),
        UseRow(
            why: "the caller may refuse stale data", expiresIn: -5, policy: .never, use: .revalidate,
            staleOnError: false),
        UseRow(
            why: "§5.2.1.4: the request's no-cache revalidates a fresh response", expiresIn: 60, request: "no-cache",
            use: .revalidate, staleOnError: true),
        UseRow(
            why: "§5.2.1.1: the request's max-age below the age", expiresIn: 60, age: 10, request: "max-age=5",
            use: .revalidate, staleOnError: true),
        UseRow(
            why: "§5.2.1.1: the request's max-age above the age", expiresIn: 60, age: 10, request: "max-age=50",
            use: .fresh, staleOnError: true),
        UseRow(
            why: "§5.2.1.1: the request's max-age=0 always validates", expiresIn: 60, age: 0, request: "max-age=0",
            use: .revalidate, staleOnError: true),
        UseRow(
            why: "§5.2.1.3: min-fresh more than is left", expiresIn: 60, request: "min-fresh=100", use: .revalidate,
            staleOnError: true),
        UseRow(
            why: "§5.2.1.3: min-fresh within what is left", expiresIn: 60, request: "min-fresh=30", use: .fresh,
            staleOnError: true),
        UseRow(
            why: "§5.2.1.2: max-stale without a value accepts any staleness", expiresIn: -500, request: "max-stale",
            use: .staleAccepted, staleOnError: true),
        UseRow(
            why: "§5.2.1.2: max-stale=N within N", expiresIn: -50, request: "max-stale=100", use: .staleAccepted,
            staleOnError: true),
        UseRow(
            why: "§5.2.1.2: max-stale=N past N", expiresIn: -150, request: "max-stale=100", use: .revalidate,
            staleOnError: true),
        UseRow(
            why: "§5.2.2.2: max-stale does not override must-revalidate", expiresIn: -50,
            cacheControl: "max-age=1, must-revalidate", request: "max-stale", use: .revalidate, staleOnError: false),
    ]

    @Test("using a stored response", arguments: useRows)
    func using(row: UseRow) {
        let stored = HTTPFreshnessModel.StoredResponse(
            expires: row.expiresIn.map { Self.now.addingTimeInterval($0) }, born: Self.now.addingTimeInterval(-row.age),
            revalidatesEveryUse: row.revalidates || CacheDirectives(row.cacheControl).has("no-cache"),
            directives: CacheDirectives(row.cacheControl))
        let verdict = HTTPFreshnessModel.verdict(
            for: stored, request: CacheDirectives(row.request), now: Self.now, staleWhileRevalidate: row.window,
            staleOnError: row.policy)
        #expect(verdict.use == row.use)
        #expect(verdict.mayServeStaleOnError == row.staleOnError)
    }

    // MARK: - Stored responses

    @Test("a stored response survives its encoding, control characters and all")
    func recordRoundTrip() {
        let record = HTTPResponseRecord(
            status: 404,
            headerFields: [
                .init(name: "ETag", value: "\"a\rb\""), .init(name: "x-list", value: "a=1"),
                .init(name: "x-list", value: "b=\\2\n\u{0}"), .init(name: "content-length", value: "9"),
                .init(name: "set-cookie", value: "session=s3cr3t"),
            ], born: Self.now)
        // Framing fields and Set-Cookie (a secret for one response) are not kept.
        #expect(record.headerFields.map(\.name) == ["etag", "x-list", "x-list"])
        #expect(HTTPResponseRecord(encoded: record.encoded) == record)
        #expect(record.encoded.hasPrefix("1\n"), "a response not redirected stays version 1")
        // A redirected one keeps the digest of where it came from (version 2), never the URL.
        let redirects = [
            HTTPRedirect(status: 302, headerFields: [.init(name: "location", value: "/v1/a?token=SECRET")])
        ]
        let target = HTTPResponseRecord.target(of: URL(string: "https://h.example/a"), through: redirects)
        #expect(target == "sha256-" + FileDigest.sha256(Data("https://h.example/v1/a?token=SECRET".utf8)).prefix(24))
        let redirected = HTTPResponseRecord(
            status: 200, headerFields: record.headerFields, born: Self.now, target: target)
        #expect(redirected.encoded.hasPrefix("2\n") && !redirected.encoded.contains("SECRET"))
        #expect(HTTPResponseRecord(encoded: redirected.encoded) == redirected)
        #expect(HTTPResponseRecord.target(of: URL(string: "https://h.example/a"), through: []) == nil)
        #expect(HTTPResponseRecord(encoded: "2\n200\n0\n") == nil)
        #expect(HTTPResponseRecord(encoded: "3\n200\n0\n") == nil)
        #expect(HTTPResponseRecord(encoded: "garbage") == nil)
    }

    @Test("§4.3.4: a 304's fields replace the stored ones of their names; the others stay")
    func notModifiedUpdate() {
        let stored = HTTPResponseRecord(
            status: 200,
            headerFields: [
                .init(name: "cache-control", value: "max-age=2"), .init(name: "etag", value: "\"x\""),
                .init(name: "content-type", value: "text/plain"),
            ], born: Self.now)
        let updated = stored.updated(
            with: [.init(name: "Cache-Control", value: "max-age=600"), .init(name: "content-length", value: "0")],
            born: Self.now.addingTimeInterval(5))
        #expect(updated.headers["cache-control"] == "max-age=600")
        #expect(updated.headers["etag"] == "\"x\"" && updated.headers["content-type"] == "text/plain")
        #expect(updated.headers["content-length"] == nil)
        #expect(updated.born == Self.now.addingTimeInterval(5))
    }

    @Test("Vary names: sorted, lower-cased; * never matches")
    func varyNames() {
        #expect(HTTPFreshnessModel.varyNames("Accept-Language, accept") == ["accept", "accept-language"])
        #expect(HTTPFreshnessModel.varyNames(nil) == [])
        #expect(HTTPFreshnessModel.varyNames("accept, *") == nil)
    }
}

/// What a hostile origin cannot do with its headers.
@Suite("Oversized heads and Vary lists are bounded")
struct HostileHeadTests {
    @Test("a head of thousands of lines keeps only the caching fields, within 16 KiB")
    func oversizedHead() {
        var fields = (0..<5000).map { HTTPHeaderField(name: "x-junk-\($0)", value: String(repeating: "j", count: 100)) }
        fields += [
            .init(name: "cache-control", value: "max-age=60"), .init(name: "etag", value: "\"e\""),
            .init(name: "content-type", value: String(repeating: "t", count: 10_000)),
        ]
        let record = HTTPResponseRecord(status: 200, headerFields: fields, born: Date())
        #expect(record.headers["cache-control"] == "max-age=60" && record.headers["etag"] == "\"e\"")
        #expect(record.headers["content-type"] == nil)
        #expect(record.encoded.utf8.count <= HTTPResponseRecord.largestKeptHeaders + 64)
    }

    @Test("a Vary of too many names, or of no header names, is not stored")
    func hostileVary() {
        let many = (0..<17).map { "x-\($0)" }.joined(separator: ", ")
        #expect(HTTPFreshnessModel.varyNames(many) == nil)
        #expect(HTTPFreshnessModel.varyNames("accept, bad name") == nil)
        #expect(HTTPFreshnessModel.varyNames((0..<16).map { "x-\($0)" }.joined(separator: ","))?.count == 16)
        guard
            case .doNotStore = HTTPFreshnessModel().storing(
                status: 200, headers: ["vary": many], request: CacheDirectives(nil), requestTime: Date(),
                responseTime: Date())
        else { return #expect(Bool(false)) }
    }
}
