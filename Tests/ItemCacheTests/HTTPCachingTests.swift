import Foundation
import GRDB
import StorageServer
import Synchronization
import Testing
import Transport

@testable import ItemCache

/// A loader on a real cache folder, a scripted loopback origin and a clock the test moves: the
/// findings of issue 21, each a test that failed before.
struct ScriptedLoaderFixture {
    typealias Answer = ScriptedOrigin.Answer
    let folder: String
    let origin: ScriptedOrigin
    let transport: CurlTransport
    let store: ItemStore
    let loader: ItemLoader
    let clock = LoadDecisionTests.ManualClock()
    private let answers: AnswerBook

    final class AnswerBook: Sendable {
        let table = Mutex<[String: [Answer]]>([:])
    }

    init(_ name: String = #function, configure: (inout CacheConfiguration) -> Void = { _ in }) throws {
        folder = temporaryCacheFolder(name)
        let answers = AnswerBook()
        self.answers = answers
        origin = try ScriptedOrigin { request in
            answers.table.withLock { table in
                guard var queue = table[request.path], !queue.isEmpty else {
                    return Answer(status: 404, body: Data("no answer scripted".utf8))
                }
                // The last answer repeats; earlier ones are used once each.
                let answer = queue.count > 1 ? queue.removeFirst() : queue[0]
                table[request.path] = queue
                return answer
            }
        }
        transport = try CurlTransport()
        var configuration = CacheConfiguration(folder: folder)
        configuration.clock = clock
        configure(&configuration)
        store = try ItemStore(configuration: configuration)
        loader = ItemLoader(store: store, loading: configuration.loading, transport: transport)
    }

    /// Answers for `path`, in order; the last one repeats.
    func script(_ path: String, _ answers: Answer...) {
        self.answers.table.withLock { $0[path] = answers }
    }

    func url(_ path: String) -> URL { origin.url(path) }

    func get(_ path: String, headers: [String: String] = [:]) async throws -> LoadedItem {
        try await loader.item(for: url(path), options: LoadOptions(headers: headers))
    }

    func requests(_ path: String) -> Int { origin.requestCount(forPath: path) }

    func close() async {
        try? await loader.close()
        await transport.shutdown()
        origin.stop()
        try? FileManager.default.removeItem(atPath: folder)
    }
}

@Suite("HTTP caching through the loader, against a scripted origin (issue 21's findings)")
struct HTTPCachingTests {
    typealias Answer = ScriptedOrigin.Answer

    static func body(_ text: String) -> Data { Data(text.utf8) }

    @Test("finding 1: no-store on one line and max-age on the next is not stored")
    func repeatedCacheControlLines() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        fixture.script(
            "/a", Answer(headers: ["Cache-Control: no-store", "Cache-Control: max-age=3600"], body: Self.body("a")))
        #expect(try await fixture.get("/a").source == .network)
        #expect(try await fixture.get("/a").source == .network)
        #expect(fixture.requests("/a") == 2)
    }

    @Test("finding 5: must-revalidate and no-cache forbid stale data when revalidation fails")
    func staleForbidden() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        for (path, directive) in [("/mr", "max-age=1, must-revalidate"), ("/nc", "no-cache")] {
            fixture.script(
                path, Answer(headers: ["Cache-Control: \(directive)", "ETag: \"1\""], body: Self.body("v1")),
                Answer(status: 503, body: Self.body("down")))
            #expect(try await fixture.get(path).data == Self.body("v1"))
            fixture.clock.advance(5)
            let answer = try await fixture.get(path)
            #expect(answer.status == 503, "\(path) served stale data the origin forbade")
            #expect(answer.source == .network)
        }
        // Without such a directive the stale copy stands in.
        fixture.script(
            "/ok", Answer(headers: ["Cache-Control: max-age=1"], body: Self.body("v1")), Answer(status: 503))
        _ = try await fixture.get("/ok")
        fixture.clock.advance(5)
        let stale = try await fixture.get("/ok")
        #expect(stale.source == .stale && stale.data == Self.body("v1") && stale.fetchError != nil)
    }

    @Test("finding 6: a 304 keeps the stored max-age instead of the one-day default")
    func notModifiedKeepsFreshness() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        fixture.script(
            "/r", Answer(headers: ["Cache-Control: max-age=2", "ETag: \"x\""], body: Self.body("r")),
            Answer(status: 304, headers: ["ETag: \"x\""]))
        _ = try await fixture.get("/r")
        fixture.clock.advance(3)
        #expect(try await fixture.get("/r").source == .revalidated)
        #expect(fixture.requests("/r") == 2)
        // Fresh for 2 s again, not a day.
        fixture.clock.advance(3)
        #expect(try await fixture.get("/r").source == .revalidated)
        #expect(fixture.requests("/r") == 3)
    }

    @Test("finding 6: a 304's headers update the stored response (§4.3.4)")
    func notModifiedUpdatesHeaders() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        fixture.script(
            "/u", Answer(headers: ["Cache-Control: max-age=1", "ETag: \"x\"", "X-Version: 1"], body: Self.body("u")),
            Answer(status: 304, headers: ["ETag: \"x\"", "Cache-Control: max-age=100", "X-Version: 2"]))
        _ = try await fixture.get("/u")
        fixture.clock.advance(2)
        let revalidated = try await fixture.get("/u")
        #expect(revalidated.item.info.response?.headers["x-version"] == "2")
        fixture.clock.advance(50)
        #expect(try await fixture.get("/u").source == .memory)
        #expect(fixture.requests("/u") == 2)
    }

    @Test("finding 7: Vary selects a variant per request header; Vary: * is never reused")
    func vary() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        fixture.script(
            "/v", Answer(headers: ["Cache-Control: max-age=60", "Vary: Accept-Language"], body: Self.body("en")),
            Answer(headers: ["Cache-Control: max-age=60", "Vary: Accept-Language"], body: Self.body("fr")))
        #expect(try await fixture.get("/v", headers: ["Accept-Language": "en"]).data == Self.body("en"))
        #expect(try await fixture.get("/v", headers: ["Accept-Language": "fr"]).data == Self.body("fr"))
        // Each from its own variant, whitespace normalized; no more requests.
        #expect(try await fixture.get("/v", headers: ["accept-language": " en "]).data == Self.body("en"))
        #expect(try await fixture.get("/v", headers: ["Accept-Language": "fr"]).data == Self.body("fr"))
        #expect(fixture.requests("/v") == 2)
        // Removing the URL removes every variant.
        #expect(try await fixture.store.variantKeys(of: CacheKey(url: fixture.url("/v"))).count == 2)
        try await fixture.store.removeItem(for: CacheKey(url: fixture.url("/v")))
        #expect(try await fixture.store.variantKeys(of: CacheKey(url: fixture.url("/v"))).isEmpty)

        fixture.script("/star", Answer(headers: ["Cache-Control: max-age=60", "Vary: *"], body: Self.body("s")))
        _ = try await fixture.get("/star")
        _ = try await fixture.get("/star")
        #expect(fixture.requests("/star") == 2)
    }

    @Test("finding 7: the variant's secret header value never enters the index")
    func varyKeepsNoSecret() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        fixture.script(
            "/p", Answer(headers: ["Cache-Control: max-age=60", "Vary: Authorization"], body: Self.body("p")))
        _ = try await fixture.get("/p", headers: ["Authorization": "Bearer s3cr3t-t0ken"])
        // A load that sends a credential keeps it under its key with the credential's digest.
        let key = try CacheKey(url: fixture.url("/p"))
            .sentWith(headers: ["Authorization": "Bearer s3cr3t-t0ken"], url: fixture.url("/p"))
        #expect(key.credentialDigest != nil)
        let keys = try await fixture.store.variantKeys(of: key)
        try #require(keys.count == 1)
        #expect(!keys[0].rawValue.contains("s3cr3t"))
        try await fixture.store.close()
        let index = try Data(contentsOf: URL(fileURLWithPath: fixture.folder + "/index.sqlite"))
        #expect(index.range(of: Data("s3cr3t".utf8)) == nil)
    }

    @Test("finding 8: stale-while-revalidate serves at once and refreshes behind")
    func staleWhileRevalidate() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        fixture.script(
            "/s", Answer(headers: ["Cache-Control: max-age=1, stale-while-revalidate=60"], body: Self.body("old")),
            Answer(headers: ["Cache-Control: max-age=100"], body: Self.body("new")))
        _ = try await fixture.get("/s")
        fixture.clock.advance(5)
        let served = try await fixture.get("/s")
        #expect(served.source == .stale && served.data == Self.body("old"))
        for _ in 0..<200 where fixture.requests("/s") < 2 { try await Task.sleep(for: .milliseconds(10)) }
        for _ in 0..<200 {
            if try await fixture.get("/s").data == Self.body("new") { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(try await fixture.get("/s").data == Self.body("new"))
        #expect(fixture.requests("/s") == 2)
    }

    @Test("finding 9: 203, 204, 301, 308, 404, 410 and 501 are stored and served; a 201 is not")
    func cacheableStatuses() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        for status in [203, 204, 404, 410, 501, 201] {
            fixture.script("/\(status)", Answer(status: status, body: status == 204 ? Data() : Self.body("\(status)")))
            let first = try await fixture.get("/\(status)")
            #expect(first.status == status)
            let second = try await fixture.get("/\(status)")
            #expect(second.status == status)
            #expect(fixture.requests("/\(status)") == (status == 201 ? 2 : 1), "status \(status)")
        }
    }

    @Test("finding 10: a refused origin costs one attempt; later loads answer from stale data at once")
    func failingOriginFailsFast() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        fixture.script("/f", Answer(headers: ["Cache-Control: max-age=1"], body: Self.body("f")))
        _ = try await fixture.get("/f")
        fixture.clock.advance(5)
        fixture.origin.stop()
        for _ in 0..<20 {
            let answer = try await fixture.get("/f")
            #expect(answer.source == .stale && answer.data == Self.body("f"))
        }
        // The backoff is the origin's: another URL with nothing stored fails at once.
        await #expect(throws: ItemCacheError.self) { _ = try await fixture.get("/other") }
        #expect(fixture.requests("/other") == 0)
    }

    @Test("finding 10: a failing status backs off that URL only; a success clears it")
    func failingStatusBacksOffItsURL() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        fixture.script(
            "/b", Answer(headers: ["Cache-Control: max-age=1"], body: Self.body("b1")), Answer(status: 503))
        fixture.script("/c", Answer(headers: ["Cache-Control: max-age=100"], body: Self.body("c")))
        _ = try await fixture.get("/b")
        fixture.clock.advance(5)
        for _ in 0..<10 { #expect(try await fixture.get("/b").source == .stale) }
        #expect(fixture.requests("/b") == 2)
        #expect(try await fixture.get("/c").source == .network)
        // Past the backoff one load probes; the origin recovered, so the backoff ends.
        fixture.script("/b", Answer(headers: ["Cache-Control: max-age=1"], body: Self.body("b2")))
        fixture.clock.advance(2)
        #expect(try await fixture.get("/b").data == Self.body("b2"))
        fixture.clock.advance(2)
        #expect(try await fixture.get("/b").data == Self.body("b2"))
        #expect(fixture.requests("/b") == 4)
    }

    /// An answer that does not fit its request (a 304 nobody asked for) is that URL's failure:
    /// it used to back off the whole origin, so every other URL there failed unasked.
    @Test("an answer that does not fit its request backs off that URL only, not its origin")
    func aMisfitAnswerBacksOffItsURLOnly() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        fixture.script("/bad", Answer(status: 304))
        fixture.script("/good", Answer(headers: ["Cache-Control: max-age=100"], body: Self.body("good")))
        await #expect(throws: ItemCacheError.self) { _ = try await fixture.get("/bad") }
        let asked = fixture.requests("/bad")
        #expect(try await fixture.get("/good").data == Self.body("good"))
        #expect(fixture.requests("/good") == 1)
        // The URL itself waits out its backoff.
        await #expect(throws: ItemCacheError.self) { _ = try await fixture.get("/bad") }
        #expect(fixture.requests("/bad") == asked)
    }

    @Test("finding 11: a 304 with another ETag updates nothing; the whole response is fetched")
    func notModifiedWithAnotherTag() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        fixture.script(
            "/e", Answer(headers: ["Cache-Control: max-age=1", "ETag: \"1\""], body: Self.body("one")),
            Answer(status: 304, headers: ["ETag: \"2\""]),
            Answer(headers: ["Cache-Control: max-age=1", "ETag: \"2\""], body: Self.body("two")))
        _ = try await fixture.get("/e")
        fixture.clock.advance(5)
        let answer = try await fixture.get("/e")
        #expect(answer.data == Self.body("two"))
        #expect(answer.item.info.etag == "\"2\"")
        #expect(fixture.origin.requests.last?.header("if-none-match") == nil)
    }

    @Test("finding 13: an ETag holding a bare CR does not wedge its item")
    func controlCharacterInETag() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        fixture.script(
            "/cr", Answer(headers: ["Cache-Control: max-age=1", "ETag: \"a\rb\""], body: Self.body("old")),
            Answer(headers: ["Cache-Control: max-age=1"], body: Self.body("new")))
        _ = try await fixture.get("/cr")
        fixture.clock.advance(5)
        let answer = try await fixture.get("/cr")
        #expect(answer.source == .network && answer.data == Self.body("new"))
    }

    @Test("finding 14: a 404, 410 or 403 after expiry is the answer, not a reason for stale data")
    func definiteAnswersAreNotFailures() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        for status in [404, 410, 403] {
            let path = "/gone\(status)"
            fixture.script(
                path, Answer(headers: ["Cache-Control: max-age=1"], body: Self.body("was")),
                Answer(status: status, body: Self.body("gone")))
            _ = try await fixture.get(path)
            fixture.clock.advance(5)
            let answer = try await fixture.get(path)
            #expect(answer.status == status && answer.data == Self.body("gone") && answer.source == .network)
        }
    }

    @Test("request Cache-Control: no-cache revalidates, max-age=0 too, only-if-cached never asks")
    func requestDirectives() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        fixture.script(
            "/q", Answer(headers: ["Cache-Control: max-age=600", "ETag: \"q\""], body: Self.body("q")),
            Answer(status: 304, headers: ["ETag: \"q\""]))
        _ = try await fixture.get("/q")
        #expect(try await fixture.get("/q", headers: ["Cache-Control": "no-cache"]).source == .revalidated)
        #expect(try await fixture.get("/q", headers: ["Cache-Control": "max-age=0"]).source == .revalidated)
        #expect(try await fixture.get("/q", headers: ["Pragma": "no-cache"]).source == .revalidated)
        #expect(fixture.requests("/q") == 4)
        #expect(try await fixture.get("/q", headers: ["Cache-Control": "only-if-cached"]).source == .memory)
        await #expect { try await fixture.get("/none", headers: ["Cache-Control": "only-if-cached"]) } throws: {
            ($0 as? ItemCacheError)?.code == .notCached
        }
        #expect(fixture.requests("/none") == 0)
        // no-store in the request: served, not kept.
        fixture.script("/ns", Answer(headers: ["Cache-Control: max-age=600"], body: Self.body("n")))
        let unkept = try await fixture.get("/ns", headers: ["Cache-Control": "no-store"])
        #expect(!unkept.isStored)
        #expect(try await fixture.store.item(for: CacheKey(url: fixture.url("/ns"))) == nil)
    }
}

@Suite("The origin backoff is shared through the folder, and a hostile row cannot hold it")
struct SharedBackoffTests {
    typealias Answer = ScriptedOrigin.Answer

    @Test("a second process (another store on the folder) meets the first one's backoff")
    func sharedAcrossStores() async throws {
        let first = try ScriptedLoaderFixture()
        defer { Task { await first.close() } }
        first.script("/x", Answer(headers: ["Cache-Control: max-age=1"], body: Data("x".utf8)))
        _ = try await first.get("/x")
        first.origin.stop()
        first.clock.advance(5)
        #expect(try await first.get("/x").source == .stale)

        let attempts = Atomic<Int>(0)
        var transportConfiguration = CurlTransport.Configuration()
        transportConfiguration.adapter = ClosureRequestAdapter { _ in attempts.add(1, ordering: .relaxed) }
        let transport = try CurlTransport(configuration: transportConfiguration)
        var configuration = CacheConfiguration(folder: first.folder)
        configuration.clock = first.clock
        let second = ItemLoader(
            store: try ItemStore(configuration: configuration), loading: configuration.loading, transport: transport)
        await #expect { try await second.item(for: first.url("/y")) } throws: {
            ($0 as? ItemCacheError)?.message.contains("is failing") == true
        }
        #expect(attempts.load(ordering: .relaxed) == 0)
        // Past the backoff the second process probes.
        first.clock.advance(2)
        await #expect(throws: ItemCacheError.self) { try await second.item(for: first.url("/y")) }
        #expect(attempts.load(ordering: .relaxed) == 1)
        try await second.close()
        await transport.shutdown()
    }

    /// An audit: the backoff of a failing status was keyed on the URL as shown, so an expired
    /// token's 503 answered every other token's request on that path with it, unasked, for the
    /// whole backoff (shared by every process on the folder).
    @Test("two URLs that differ only in a secret back off apart; the message shows no secret")
    func secretsBackOffApart() async throws {
        // No retries: the 503 is the answer, not the next scripted one.
        let fixture = try ScriptedLoaderFixture { $0.loading.retry = RetryPolicy.none }
        defer { Task { await fixture.close() } }
        fixture.script(
            "/s", Answer(status: 503, body: Data("down".utf8)),
            Answer(headers: ["Cache-Control: max-age=60"], body: Data("ok".utf8)))
        func outcome(_ path: String) async -> String {
            do {
                let loaded = try await fixture.get(path)
                return "\(loaded.status) \(String(decoding: loaded.item.data, as: UTF8.self))"
            } catch {
                return "\(error)"
            }
        }
        #expect(await outcome("/s?access_token=EXPIRED").hasPrefix("503"))
        #expect(await outcome("/s?access_token=VALID") == "200 ok")
        #expect(fixture.requests("/s") == 2)
        // The expired URL meets its own backoff, unasked; what it says names no secret.
        let again = await outcome("/s?access_token=EXPIRED")
        #expect(again.contains("is failing") && again.contains("access_token=***"), "\(again)")
        #expect(!again.contains("EXPIRED") && !again.contains("sha256-"), "\(again)")
        #expect(fixture.requests("/s") == 2)
    }

    @Test("a row that puts the next attempt years away is read as due")
    func hostileRow() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        fixture.script("/h", Answer(headers: ["Cache-Control: max-age=60"], body: Data("h".utf8)))
        let origin = "http://127.0.0.1:\(fixture.origin.port)"
        try await fixture.store.close()
        try CacheFolderSafetyTests.tamper(
            fixture.folder,
            "INSERT INTO originFailure (origin, failures, at, retryAt, message, status) VALUES (?, 999999999, 0, ?, ?, 99999)",
            [origin, fixture.clock.now.timeIntervalSince1970 + 3e8, "\u{1B}[31mforged"])
        let reopened = try ItemStore(configuration: fixture.store.configuration)
        let loader = ItemLoader(
            store: reopened, loading: fixture.loader.configuration.loading, transport: fixture.transport)
        #expect(try await loader.item(for: fixture.url("/h")).data == Data("h".utf8))
        #expect(fixture.requests("/h") == 1)
        try await loader.close()
    }
}

/// What an outside conformance run (modelled on the http-tests cache-tests suite) found after
/// issue 21: each a MUST of RFC 9110, 9111 or 9112, each a test that failed before.
@Suite("HTTP caching: the MUSTs an outside conformance run found")
struct HTTPCachingConformanceTests {
    typealias Answer = ScriptedOrigin.Answer

    static func body(_ text: String) -> Data { Data(text.utf8) }

    @Test("obsolete line folding continues the field before it (RFC 9112 §5.2); a bare CR is a space (§2.2)")
    func foldedLinesAndBareCarriageReturns() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        // A folded no-store, after a space and after a tab: the response is not stored.
        fixture.script("/fold", Answer(headers: ["Cache-Control: max-age=3600,\r\n no-store"], body: Self.body("f")))
        fixture.script("/tab", Answer(headers: ["Cache-Control: max-age=3600,\r\n\tno-cache"], body: Self.body("t")))
        // A bare CR between list members.
        fixture.script("/cr", Answer(headers: ["Cache-Control: max-age=3600,\rno-store"], body: Self.body("c")))
        for path in ["/fold", "/cr"] {
            #expect(try await fixture.get(path).source == .network)
            #expect(try await fixture.get(path).source == .network, "\(path) was stored")
            #expect(fixture.requests(path) == 2)
        }
        _ = try await fixture.get("/tab")
        #expect(try await fixture.get("/tab").source != .memory && fixture.requests("/tab") == 2)
        // A folded line holding a colon names no field of its own: the expired response stays
        // expired, and no Cache-Control the origin never sent is kept.
        fixture.script(
            "/smuggle",
            Answer(headers: ["Expires: 0", "X-Note: x\r\n Cache-Control: max-age=3600"], body: Self.body("s")))
        let first = try await fixture.get("/smuggle")
        #expect(first.item.info.response?.headers["cache-control"] == nil)
        #expect(first.item.info.response?.headers["x-note"] == "x Cache-Control: max-age=3600")
        #expect(try await fixture.get("/smuggle").source == .network)
        #expect(fixture.requests("/smuggle") == 2)
    }

    @Test("a 304 whose Last-Modified names another date (and no entity tag) updates nothing: the item is fetched whole")
    func notModifiedWithAnotherDate() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        let old = "Mon, 02 Nov 2026 10:00:00 GMT"
        let new = "Tue, 03 Nov 2026 10:00:00 GMT"
        fixture.script(
            "/lm", Answer(headers: ["Cache-Control: max-age=1", "Last-Modified: \(old)"], body: Self.body("v1")),
            Answer(status: 304, headers: ["Last-Modified: \(new)"]),
            Answer(headers: ["Cache-Control: max-age=1", "Last-Modified: \(new)"], body: Self.body("v2")))
        _ = try await fixture.get("/lm")
        fixture.clock.advance(5)
        let answer = try await fixture.get("/lm")
        #expect(answer.data == Self.body("v2"))
        #expect(fixture.requests("/lm") == 3)
        // The refetch was not conditional.
        #expect(fixture.origin.requests.last?.header("if-modified-since") == nil)
    }

    @Test("fields the Connection header names and the proxy's fields are not stored; a response without Date gets one")
    func hopByHopFieldsAndDate() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        fixture.script(
            "/h",
            Answer(
                headers: [
                    "Cache-Control: max-age=3600", "Connection: a, B", "a: 1", "b: 2", "c: 3",
                    "Proxy-Authenticate: Basic realm=x", "Proxy-Authentication-Info: nextnonce=y",
                ], body: Self.body("h")))
        _ = try await fixture.get("/h")
        let cached = try await fixture.get("/h")
        #expect(cached.source != .network)
        let stored = try #require(cached.item.info.response?.headers)
        #expect(stored["a"] == nil && stored["b"] == nil && stored["connection"] == nil)
        #expect(stored["proxy-authenticate"] == nil && stored["proxy-authentication-info"] == nil)
        #expect(stored["c"] == "3")
        // RFC 9110 §6.6.1: the origin sent no Date; the cache appends the time it came.
        let date = try #require(stored["date"])
        let parsed = try #require(HTTPDate.parse(date))
        #expect(abs(parsed.timeIntervalSince(fixture.clock.now)) < 5, "\(date)")
    }

    /// A body cut short after its head, or a redirect to a scheme that is not followed, is an
    /// answer: it backs off that URL only, and another URL of the origin is still asked.
    @Test("a body cut short, or a redirect not followed, backs off its URL, not its origin")
    func anAnswerThatFailedBacksOffItsURLOnly() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        fixture.script("/cut", Answer(headers: ["Content-Length: 1000"], body: Data("short".utf8), closes: true))
        fixture.script("/away", Answer(status: 302, headers: ["Location: file:///etc/passwd"]))
        fixture.script("/good", Answer(headers: ["Cache-Control: no-store"], body: Self.body("good")))
        for broken in ["/cut", "/away"] {
            await #expect(throws: ItemCacheError.self) { _ = try await fixture.get(broken) }
            #expect(try await fixture.get("/good").data == Self.body("good"), "\(broken) silenced its origin")
        }
    }

    /// A 304's `Content-Type` becomes the item's (its column as well as its record), and a 304
    /// that says `no-store` serves the value without keeping it, and says so.
    @Test("a 304 updates the item's type; a 304 that says no-store serves the value unstored")
    func notModifiedUpdatesTheTypeAndMayUnstore() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        fixture.script(
            "/t",
            Answer(
                headers: ["Cache-Control: max-age=1", "ETag: \"a\"", "Content-Type: text/plain"], body: Self.body("t")),
            Answer(
                status: 304, headers: ["ETag: \"a\"", "Content-Type: application/json", "Cache-Control: max-age=1"]),
            Answer(status: 304, headers: ["ETag: \"a\"", "Cache-Control: no-store"]))
        _ = try await fixture.get("/t")
        fixture.clock.advance(5)
        let typed = try await fixture.get("/t")
        #expect(typed.source == .revalidated && typed.item.info.contentType == "application/json")
        #expect(try await fixture.store.item(for: typed.item.key)?.item.info.contentType == "application/json")
        fixture.clock.advance(5)
        let unstored = try await fixture.get("/t")
        #expect(unstored.data == Self.body("t") && !unstored.isStored)
        #expect(try await fixture.store.item(for: unstored.item.key) == nil)
    }

    /// The stored body came from `/v1`; the redirect now leads to `/v2`, whose file has the same
    /// tag (nginx's is the time and size) and answers 304 to it. That 304 confirms nothing: the
    /// body is fetched whole, and kept with its new place. A 304 from the same place confirms.
    @Test("a 304 reached through a redirect that now leads elsewhere confirms nothing: the item is fetched whole")
    func aRedirectThatMovedConfirmsNothing() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        fixture.script(
            "/app.js", Answer(status: 302, headers: ["Location: /v1/app.js"]),
            Answer(status: 302, headers: ["Location: /v2/app.js"]))
        fixture.script(
            "/v1/app.js", Answer(headers: ["Cache-Control: max-age=1", "ETag: \"same\""], body: Self.body("v1")))
        fixture.script(
            "/v2/app.js", Answer(status: 304, headers: ["ETag: \"same\""]),
            Answer(headers: ["Cache-Control: max-age=1", "ETag: \"same\""], body: Self.body("v2")),
            Answer(status: 304, headers: ["ETag: \"same\""]))
        #expect(try await fixture.get("/app.js").data == Self.body("v1"))
        fixture.clock.advance(5)
        let moved = try await fixture.get("/app.js")
        #expect(moved.data == Self.body("v2"), "the old target's body was confirmed by the new target's 304")
        #expect(fixture.origin.requests.last { $0.path == "/v2/app.js" }?.header("if-none-match") == nil)
        fixture.clock.advance(5)
        let again = try await fixture.get("/app.js")
        #expect(again.data == Self.body("v2") && again.source == .revalidated)
        #expect(fixture.requests("/v2/app.js") == 3)
    }

    @Test(
        "a response that came through redirects is reused under the URL asked for only while each redirect may be (RFC 9111 §4)"
    )
    func redirectsConstrainReuse() async throws {
        let fixture = try ScriptedLoaderFixture()
        defer { Task { await fixture.close() } }
        let target = { (body: String) in
            Answer(headers: ["Cache-Control: max-age=3600", "ETag: \"\(body)\""], body: Self.body(body))
        }
        // A redirect with no-store: nothing is stored; the origin is asked every time.
        fixture.script("/r-nostore", Answer(status: 302, headers: ["Location: /t1", "Cache-Control: no-store"]))
        fixture.script("/t1", target("t1"))
        // A fresh 301: the final response is reused without a request.
        fixture.script("/r-fresh", Answer(status: 301, headers: ["Location: /t2", "Cache-Control: max-age=3600"]))
        fixture.script("/t2", target("t2"))
        // A 307 without freshness may not be reused: every use asks again, conditionally.
        fixture.script("/r-temp", Answer(status: 307, headers: ["Location: /t3"]))
        fixture.script("/t3", target("t3"), Answer(status: 304, headers: ["ETag: \"t3\""]))
        // A 301 fresh for 1 s: after it, the redirect is asked again though the target is fresh.
        fixture.script("/r-short", Answer(status: 301, headers: ["Location: /t4", "Cache-Control: max-age=1"]))
        fixture.script("/t4", target("t4"), Answer(status: 304, headers: ["ETag: \"t4\""]))

        for path in ["/r-nostore", "/r-fresh", "/r-temp", "/r-short"] { _ = try await fixture.get(path) }
        #expect(try await fixture.get("/r-nostore").data == Self.body("t1"))
        #expect(fixture.requests("/r-nostore") == 2)
        let fresh = try await fixture.get("/r-fresh")
        #expect(fresh.source != .network && fresh.data == Self.body("t2"))
        #expect(fixture.requests("/r-fresh") == 1)
        let temporary = try await fixture.get("/r-temp")
        #expect(temporary.data == Self.body("t3"))
        #expect(fixture.requests("/r-temp") == 2)
        #expect(fixture.origin.requests.last { $0.path == "/t3" }?.header("if-none-match") == "\"t3\"")
        #expect(try await fixture.get("/r-short").source != .network)
        fixture.clock.advance(5)
        #expect(try await fixture.get("/r-short").data == Self.body("t4"))
        #expect(fixture.requests("/r-short") == 2)
    }
}
