import Foundation
import ItemCache
import Testing

/// Spellings of one request share one key; different requests never do.
@Suite("Cache keys are normalized")
struct CacheKeyTests {
    func key(_ url: String, _ parameters: [String: String] = [:], headers: [String: String] = [:], context: String = "")
        throws -> String
    {
        try CacheKey(
            url: URL(string: url)!, parameters: RequestParameters(parameters), varyingHeaders: headers, context: context
        ).rawValue
    }

    @Test(arguments: [
        // Parameter order, host and scheme case, default ports, fragments, empty paths.
        ("https://Example.COM/a?b=2&a=1", "https://example.com/a?a=1&b=2"),
        ("HTTPS://example.com:443/a#section", "https://example.com/a"),
        ("http://example.com:80", "http://example.com/"),
        ("http://example.com:8080/x", "http://example.com:8080/x"),
        ("https://example.com:80/x", "https://example.com:80/x"),
        // Canonical percent-encoding: unreserved characters plain, the rest upper-case escapes.
        ("https://example.com/%7euser/a%2db", "https://example.com/~user/a-b"),
        ("https://example.com/caf%c3%a9", "https://example.com/caf%C3%A9"),
        ("https://example.com/a%2Fb/c", "https://example.com/a%2Fb/c"),
        // RFC 3986 §6.2.2.2: only escaped unreserved characters decode; a literal reserved
        // character stays literal and apart from its escape (`+` is a space to a form decoder).
        ("https://example.com/q?x=a+b&y=%20", "https://example.com/q?x=a+b&y=%20"),
        ("https://example.com/q?x=a%2bb", "https://example.com/q?x=a%2Bb"),
        ("https://example.com/q?x=a,b;c", "https://example.com/q?x=a,b;c"),
        // A name without `=`, and an empty query, stay as written: `?x`, `?x=` and no query are
        // three URIs (RFC 3986 §6.2.3), which a server may answer differently.
        ("https://example.com/q?z=&a", "https://example.com/q?a&z="),
        ("https://example.com/q?x", "https://example.com/q?x"),
        ("https://example.com/q?x=", "https://example.com/q?x="),
        ("https://example.com/q?", "https://example.com/q?"),
        // The values of one name keep their order (a server may read them as a list).
        ("https://example.com/q?a=2&a=1", "https://example.com/q?a=2&a=1"),
        ("https://example.com/q?b=1&a=2&b=0", "https://example.com/q?a=2&b=1&b=0"),
        // Bytes that are not UTF-8 stay byte for byte.
        ("https://example.com/q?v=%FF%FE", "https://example.com/q?v=%FF%FE"),
        // The host as written, escapes canonical and letters lower-case (found by `make fuzz`:
        // a decoded `\` made a key that read back as another URL); IP literals as they are.
        ("http://f%5C/a", "http://f%5C/a"),
        ("http://EX%41mple.com/a", "http://example.com/a"),
        ("http://[::1]:8080/a", "http://[::1]:8080/a"),
        // An empty authority stays, so a path beginning with // cannot become one.
        ("x://://s:9/", "x:////s:9/"),
        ("file:///tmp/a", "file:///tmp/a"),
        // Literal dot segments go, as libcurl removes them from what it sends (RFC 3986 §5.2.4).
        // libcurl sends an escaped one as it is, and a server may answer it otherwise, so it
        // stays, escaped; an escaped slash is no separator.
        ("https://example.com/a/b/c/./../../g", "https://example.com/a/g"),
        ("https://example.com/a/./b/", "https://example.com/a/b/"),
        ("https://example.com/a/b/.", "https://example.com/a/b/"),
        ("https://example.com/a/b/..", "https://example.com/a/"),
        ("https://example.com/../../x", "https://example.com/x"),
        ("https://example.com/a//../b", "https://example.com/a/b"),
        ("https://example.com/a/%2E%2e/b", "https://example.com/a/%2E%2E/b"),
        ("https://example.com/a/%2e./b/.%2E/c", "https://example.com/a/%2E%2E/b/%2E%2E/c"),
        ("https://example.com/a/%2E/b", "https://example.com/a/%2E/b"),
        ("https://example.com/a/%2E%2E/../b", "https://example.com/a/b"),
        ("https://example.com/a/..%2Fb", "https://example.com/a/..%2Fb"),
        ("https://example.com/a/..b/.c/", "https://example.com/a/..b/.c/"),
        ("https://example.com/x?p=../y#./z", "https://example.com/x?p=../y"),
        // User info never enters the key.
        ("https://alice:S3cretPassw0rd@example.com/p", "https://alice:***@example.com/p"),
        ("https://ghp_T0ken@example.com/p", "https://***@example.com/p"),
    ])
    func spellingsOfOneRequestShareAKey(url: String, expected: String) throws {
        #expect(try key(url) == expected)
    }

    @Test func parametersMergeWithTheQueryInAnyOrder() throws {
        #expect(
            try key("https://example.com/list?page=2", ["sort": "new", "filter": "a b"])
                == key("https://example.com/list?filter=a%20b", ["page": "2", "sort": "new"]))
        #expect(try key("https://example.com/list", ["q": "é/?"]) == "https://example.com/list?q=%C3%A9%2F%3F")
        // A parameter is text: its `+` is a plus sign, escaped; repeated names keep every value.
        #expect(try key("https://example.com/list", ["q": "a+b"]) == "https://example.com/list?q=a%2Bb")
        let repeated = try CacheKey(
            url: URL(string: "https://example.com/list")!,
            parameters: RequestParameters([(name: "city", value: "Oslo"), (name: "city", value: "Bergen")]))
        #expect(repeated.rawValue == "https://example.com/list?city=Oslo&city=Bergen")
        #expect(RequestParameters([(name: "q", value: "a+b c")]).percentEncodedQuery == "q=a%2Bb%20c")
    }

    @Test func differentRequestsNeverShareAKey() throws {
        let keys = try [
            key("https://example.com/q?q=c++"), key("https://example.com/q?q=c%2B%2B"),
            key("https://example.com/q?q=c%20%20"),
            key("https://example.com/q?v=%FF%FE"), key("https://example.com/q?v=%FE%FF"),
            key("https://example.com/q?a=1&a=2"), key("https://example.com/q?a=2&a=1"),
            key("https://example.com/a"), key("http://example.com/a"), key("https://example.com/a/"),
            key("https://example.com/a?x=1"), key("https://example.com/a", ["x": "2"]),
            key("https://example.com/a", headers: ["Accept": "image/png"]),
            key("https://example.com/a", headers: ["Accept": "image/webp"]),
            key("https://example.com/a", context: "thumbnails"),
            key("https://example.com/a%2Fb"), key("https://example.com/a/b"),
            try CacheKey.custom("https://example.com/a").rawValue,
        ]
        #expect(Set(keys).count == keys.count, "\(keys)")
    }

    @Test func varyingHeadersAreCaseAndOrderInsensitiveByName() throws {
        #expect(
            try key("https://example.com/a", headers: ["Accept": " image/png ", "Accept-Language": "de"])
                == key("https://example.com/a", headers: ["accept-language": "de", "ACCEPT": "image/png"]))
    }

    @Test func theBlobFileIsNamedByAHashOfTheWholeKey() throws {
        let first = try CacheKey(url: URL(string: "https://example.com/a?b=1&a=2")!)
        let second = try CacheKey(url: URL(string: "https://EXAMPLE.com/a?a=2&b=1")!)
        #expect(first == second && first.fileName == second.fileName)
        #expect(first.fileName.count == 64 && first.fileName.allSatisfy(\.isHexDigit))
        #expect(try CacheKey.custom("x").fileName != CacheKey.custom("y").fileName)
    }

    @Test(arguments: ["thumb nails", "tab\tbed", "new\nline"])
    func aContextNameWithSpacesIsRefused(context: String) {
        #expect(throws: ItemCacheError.self) { try CacheKey.custom("x", context: context) }
    }

    @Test func aURLWithoutSchemeOrHostIsRefusedByName() {
        let error = #expect(throws: ItemCacheError.self) { try CacheKey(url: URL(string: "/relative/path")!) }
        #expect(error?.code == .invalidKey && error?.message.contains("/relative/path") == true)
        #expect(throws: ItemCacheError.self) { try CacheKey(url: URL(string: "https:///nohost")!) }
    }
}

/// Every written form of an expiry reads as what it says.
@Suite("Expiries are parsed from every form")
struct ExpiryTests {
    static let stored = Date(timeIntervalSince1970: 1_700_000_000)

    @Test(arguments: [
        ("never", nil as Double?),
        ("NEVER", nil),
        ("90s", 1_700_000_090),
        ("15m", 1_700_000_900),
        ("1.5h", 1_700_005_400),
        ("7d", 1_700_604_800),
        ("1767225600", 1_767_225_600),
        ("1767225600.5", 1_767_225_600.5),
        (" 1767225600 ", 1_767_225_600),
        ("2026-12-31T23:59:59Z\n", 1_798_761_599),
        ("2026-12-31T23:59:59Z", 1_798_761_599),
        ("2026-12-31T23:59:59.250Z", 1_798_761_599.25),
        ("2027-01-01T01:59:59+02:00", 1_798_761_599),
        ("2028-02-29T00:00:00Z", 1_835_395_200),
        ("2000-02-29T12:00:00Z", 951_825_600),
        ("2026-12-31T18:29:59-05:30", 1_798_761_599),
        ("2026-12-31t23:59:59z", 1_798_761_599),
        ("2026-12-31 23:59:59Z", 1_798_761_599),
        // A leap second reads as the last second of its minute, as HTTP dates do.
        ("2026-01-01T23:59:60Z", 1_767_311_999),
    ])
    func writtenFormsReadAsTheirExpirationDates(text: String, expected: Double?) throws {
        let expiry = try Expiry.parse(text)
        #expect(expiry.expirationDate(storedAt: Self.stored)?.timeIntervalSince1970 == expected, "\(text) → \(expiry)")
    }

    @Test(arguments: ["dont-store", "don't store", "no-store", "Dont-Store"])
    func dontStoreIsRead(text: String) throws {
        #expect(try Expiry.parse(text) == .dontStore)
        #expect(Expiry.dontStore.expirationDate(storedAt: Self.stored) == Self.stored, "never fresh in the cache")
    }

    @Test(arguments: [
        "", "soon", "-5", "5w", "12:00", "2026-13-01T00:00:00Z", "nan", "inf", "1e300", "253402300800", "0x10", "1e3",
        "0x10s", ".5h", "5.h",
        // Foundation's date formatter rolls these over into other days.
        "2026-02-30T00:00:00Z", "2026-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2026-04-31T00:00:00Z",
        "2026-01-00T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T23:60:00Z", "2026-01-01T23:59:61Z",
        "2026-01-01T00:00:00+24:00", "2026-01-01T00:00:00+01:60", "2026-12-31T23:59:59",
    ])
    func anythingElseIsRefusedNamingTheForms(text: String) {
        let error = #expect(throws: ItemCacheError.self) { try Expiry.parse(text) }
        #expect(error?.code == .invalidExpiry && error?.message.contains("7d") == true)
    }

    /// One longest lifetime for `--expires` and `--ttl`: a hundred years.
    @Test func aLifetimePastAHundredYearsIsRefusedNamingNever() throws {
        #expect(try Expiry.parse("36500d") == .lifetime(.seconds(3_153_600_000)))
        #expect(try Expiry.parse("3153600000s") == .lifetime(.seconds(3_153_600_000)))
        for text in ["36501d", "3153600001s", "876001h", "99999999999999999999d"] {
            let error = #expect(throws: ItemCacheError.self) { try Expiry.parse(text) }
            #expect(error?.code == .invalidExpiry && error?.message.contains("give 'never'") == true, "\(text)")
        }
        #expect(Expiry.lifetime(.seconds(3_153_600_001)).description == "never")
    }

    @Test func aHugeRefusedInputIsQuotedShort() {
        let error = #expect(throws: ItemCacheError.self) { try Expiry.parse(String(repeating: "x", count: 120_000)) }
        #expect((error?.message.count ?? .max) < 400, "\(error?.message.count ?? -1) characters")
    }

    @Test func aTimestampNumberAndItsTextAgreeAndTheDefaultIsOneDay() throws {
        #expect(try Expiry.parse("1767225600") == Expiry.timestamp(1_767_225_600))
        #expect(Expiry.oneDay.expirationDate(storedAt: Self.stored)?.timeIntervalSince(Self.stored) == 86_400)
        for expiry in [
            Expiry.never, .dontStore, .lifetime(.seconds(90)), .timestamp(1_767_225_600), .timestamp(1_767_225_600.5),
        ] {
            #expect(try Expiry.parse(expiry.description) == expiry, "\(expiry) reads back")
        }
    }

    /// Values no text can write still mean what they must, and describe themselves as text
    /// `parse` reads with the same meaning: a date that is no time is stale at once (it was
    /// "never" on disk), +infinity is never, a lifetime of zero or less is stale at once.
    @Test(arguments: [
        (Expiry.timestamp(.nan), Self.stored.timeIntervalSince1970 as Double?, "0"),
        (.timestamp(-.infinity), Self.stored.timeIntervalSince1970, "0"),
        (.timestamp(.infinity), nil, "never"),
        (.timestamp(1e15), 1e15, "never"),
        (.lifetime(.seconds(-5)), Self.stored.timeIntervalSince1970, "0s"),
        (.lifetime(.seconds(Int64(2e12))), Self.stored.timeIntervalSince1970 + 2e12, "never"),
    ])
    func edgeValuesKeepTheirMeaningAndReadBack(expiry: Expiry, expected: Double?, text: String) throws {
        #expect(expiry.expirationDate(storedAt: Self.stored)?.timeIntervalSince1970 == expected)
        #expect(expiry.description == text)
        #expect(throws: Never.self) { try Expiry.parse(expiry.description) }
    }
}
