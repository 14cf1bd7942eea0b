import Foundation
import Synchronization
import Testing
import Transport

@testable import ItemCache

/// The load decision, row by row, each row with its source.
@Suite("The load decision: fresh, stale-while-revalidate, revalidate, fetch, offline")
struct LoadDecisionTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func info(expiresIn seconds: Double?, mustRevalidate: Bool = false, cacheControl: String? = nil)
        -> ItemInfo
    {
        var info = ItemInfo(
            size: 1, created: now.addingTimeInterval(-100), accessed: now,
            expires: seconds.map { now.addingTimeInterval($0) },
            mustRevalidate: mustRevalidate)
        if let cacheControl {
            info.response = HTTPResponseRecord(
                status: 200, headerFields: [HTTPHeaderField(name: "Cache-Control", value: cacheControl)],
                born: now.addingTimeInterval(-100))
        }
        return info
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var why: String
        var stored: ItemInfo?
        var policy: LoadPolicy
        var window: Duration
        var expected: LoadDecision
        var testDescription: String { why }
    }

    static let rows: [Row] = [
        Row(
            why: "RFC 9111 §4.2: a fresh value is served without a request", stored: info(expiresIn: 60),
            policy: .useCache, window: .zero, expected: .serveFresh),
        Row(
            why: "no expiry stored: fresh until removed", stored: info(expiresIn: nil), policy: .useCache,
            window: .zero, expected: .serveFresh),
        Row(
            why: "RFC 9111 §4.2: expired at exactly its expiry", stored: info(expiresIn: 0), policy: .useCache,
            window: .zero, expected: .revalidate),
        Row(
            why: "RFC 9111 §4.3: an expired value is revalidated", stored: info(expiresIn: -1), policy: .useCache,
            window: .zero, expected: .revalidate),
        Row(
            why: "RFC 9111 §5.2.2.4 no-cache: revalidate on every use",
            stored: info(expiresIn: 60, mustRevalidate: true), policy: .useCache, window: .seconds(600),
            expected: .revalidate),
        Row(
            why: "RFC 5861 §3: inside the stale-while-revalidate window", stored: info(expiresIn: -30),
            policy: .useCache, window: .seconds(60), expected: .serveStaleAndRefresh),
        Row(
            why: "RFC 5861 §3: past the window, revalidate first", stored: info(expiresIn: -61), policy: .useCache,
            window: .seconds(60), expected: .revalidate),
        Row(why: "nothing stored: fetch", stored: nil, policy: .useCache, window: .seconds(60), expected: .fetch),
        Row(
            why: "reload (RxCache evict: true): an unconditional fetch even when fresh", stored: info(expiresIn: 60),
            policy: .reload, window: .zero, expected: .fetch),
        Row(why: "reload with nothing stored", stored: nil, policy: .reload, window: .zero, expected: .fetch),
        Row(
            why: "offline: a fresh value", stored: info(expiresIn: 60), policy: .offline, window: .zero,
            expected: .serveOffline),
        Row(
            why: "offline: an expired value is served (marked stale)", stored: info(expiresIn: -3600), policy: .offline,
            window: .zero, expected: .serveOffline),
        Row(
            why: "offline with nothing stored: notCached", stored: nil, policy: .offline, window: .zero,
            expected: .offlineMiss),
        Row(
            why: "RFC 9111 §4.2.4, §5.2.2.2: offline, an expired must-revalidate value is an error, not served",
            stored: info(expiresIn: -10, cacheControl: "max-age=90, must-revalidate"), policy: .offline,
            window: .zero, expected: .offlineMiss),
        Row(
            why: "offline: a must-revalidate value still fresh is served",
            stored: info(expiresIn: 60, cacheControl: "max-age=160, must-revalidate"), policy: .offline,
            window: .zero, expected: .serveOffline),
        Row(
            why: "RFC 9111 §5.2.2.4: offline, a no-cache value is never used without validation",
            stored: info(expiresIn: 60, mustRevalidate: true, cacheControl: "no-cache"), policy: .offline,
            window: .zero, expected: .offlineMiss),
        Row(
            why: "offline: an expired value whose origin allows stale use is served",
            stored: info(expiresIn: -10, cacheControl: "max-age=90"), policy: .offline, window: .zero,
            expected: .serveOffline),
    ]

    @Test(arguments: rows)
    func decision(row: Row) {
        #expect(
            LoadDecision.decide(stored: row.stored, policy: row.policy, now: Self.now, staleWhileRevalidate: row.window)
                == row.expected)
    }

    /// A clock the test moves.
    final class ManualClock: CacheClock {
        let time = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        var now: Date { time.withLock { $0 } }
        func advance(_ seconds: Double) { time.withLock { $0 = $0.addingTimeInterval(seconds) } }
    }

    @Test("the injected clock decides freshness: an item expires when the clock says, not the wall")
    func injectedClock() async throws {
        let clock = ManualClock()
        let fixture = try await LoaderFixture { $0.clock = clock }
        defer { Task { await fixture.close() } }
        try fixture.publish("a.json", "1")
        let url = fixture.url("a.json")
        _ = try await fixture.loader.item(for: url, options: LoadOptions(expiry: .lifetime(.seconds(3600))))
        #expect(try await fixture.loader.item(for: url).source == .memory)
        clock.advance(3601)
        try fixture.publish("a.json", "2")
        let reloaded = try await fixture.loader.item(for: url, options: LoadOptions(expiry: .lifetime(.seconds(3600))))
        #expect(reloaded.source == .network && reloaded.data == Data("2".utf8))
        #expect(fixture.server.requestCount(forPath: "/a.json") == 2)
    }

    @Test("reload sends no validators: a full fetch, never a 304")
    func reloadIsUnconditional() async throws {
        let fixture = try await LoaderFixture()
        defer { Task { await fixture.close() } }
        try fixture.publish("a.json", "1")
        let url = fixture.url("a.json")
        _ = try await fixture.loader.item(for: url)
        let reloaded = try await fixture.loader.item(for: url, options: LoadOptions(policy: .reload))
        #expect(reloaded.source == .network)
        let requests = fixture.server.requests().filter { $0.path == "/a.json" }
        #expect(requests.count == 2)
        #expect(requests.last?.headers["if-none-match"] == nil && requests.last?.headers["if-modified-since"] == nil)
    }
}
