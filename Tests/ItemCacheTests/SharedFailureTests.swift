import Foundation
import StorageServer
import Synchronization
import Testing
import Transport

@testable import ItemCache

/// Loads of one key from several processes (here: several stores on one folder, whose lock
/// files exclude each other as processes' do) against a failing origin: one fetch, and its
/// failure is everyone's; a hung fetch holds the others back only so long.
@Suite("Coalescing across processes fails together, and waits boundedly")
struct SharedFailureTests {
    /// `count` loaders, each with its own store on `folder` and its own transport.
    static func loaders(_ count: Int, folder: String, configure: (inout CacheConfiguration) -> Void = { _ in }) throws
        -> [(ItemLoader, CurlTransport)]
    {
        try (0..<count).map { _ in
            var configuration = CacheConfiguration(folder: folder)
            configure(&configuration)
            var transportConfiguration = CurlTransport.Configuration()
            transportConfiguration.retry = .none
            let transport = try CurlTransport(configuration: transportConfiguration)
            return (
                ItemLoader(
                    store: try ItemStore(configuration: configuration), configuration: configuration,
                    transport: transport), transport
            )
        }
    }

    static func loadAll(_ loaders: [(ItemLoader, CurlTransport)], _ url: URL) async -> [Result<
        LoadedItem, ItemCacheError
    >] {
        await withTaskGroup(of: Result<LoadedItem, ItemCacheError>.self) { group in
            for (loader, _) in loaders {
                group.addTask {
                    do throws(ItemCacheError) { return .success(try await loader.item(for: url)) } catch {
                        return .failure(error)
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
    }

    static func close(_ loaders: [(ItemLoader, CurlTransport)]) async {
        for (loader, transport) in loaders {
            try? await loader.close()
            await transport.shutdown()
        }
    }

    /// A server that cuts a stalled body off after a second: a failure with no answer.
    static var cuttingServer: StorageServer.Configuration {
        var configuration = StorageServer.Configuration()
        configuration.stallLimit = .seconds(1)
        return configuration
    }

    @Test("8 waiters on a failing origin: 1 request, and all 8 get its failure")
    func waitersShareTheFailure() async throws {
        let fixture = try await LoaderFixture(server: Self.cuttingServer)
        defer { Task { await fixture.close() } }
        try fixture.publish("cut.json", String(repeating: "x", count: 100_000))
        // One attempt a fetch, so that the request count is the fetch count.
        let loaders = try Self.loaders(8, folder: fixture.folder) { $0.loading.retry = RetryPolicy.none }
        fixture.server.injectFault(.stall, forPath: "/cut.json")
        let results = await Self.loadAll(loaders, fixture.url("cut.json"))
        #expect(fixture.server.requestCount(forPath: "/cut.json") == 1)
        #expect(results.count == 8)
        for result in results {
            guard case .failure(let error) = result else {
                Issue.record("a load succeeded against a body that was cut off")
                continue
            }
            #expect(error.code == .fetch, "\(error)")
        }
        await Self.close(loaders)
    }

    @Test("8 waiters on a 404 that may not be kept: 1 request, and all 8 get the 404")
    func waitersShareAnUnkeptNotFound() async throws {
        let origin = try ScriptedOrigin { _ in
            // 3 s: all 8 loaders join the one fetch before its answer, on a loaded machine too.
            Thread.sleep(forTimeInterval: 3.0)
            return ScriptedOrigin.Answer(status: 404, headers: ["Cache-Control: no-store"], body: Data("no".utf8))
        }
        defer { origin.stop() }
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let loaders = try Self.loaders(8, folder: folder)
        let results = await Self.loadAll(loaders, origin.url("/nostore.json"))
        #expect(origin.requestCount(forPath: "/nostore.json") == 1)
        for result in results {
            switch result {
            case .success(let loaded): #expect(loaded.status == 404 && !loaded.isStored)
            case .failure(let error): #expect(error.httpStatus == 404, "\(error)")
            }
        }
        #expect(results.filter { if case .success = $0 { true } else { false } }.count == 1)
        await Self.close(loaders)
    }

    /// An origin that counts the requests it answers at once: the most since the last reset.
    final class InFlight: Sendable {
        private let counts = Mutex((now: 0, most: 0))

        /// The most requests in flight at once since the origin started or the last reset.
        var most: Int { counts.withLock { $0.most } }
        func reset() { counts.withLock { $0.most = 0 } }

        /// An origin that answers each request with `answer`'s after its delay, counted.
        func origin(_ answer: @escaping @Sendable (ScriptedOrigin.Request) -> (delay: Double, ScriptedOrigin.Answer))
            throws -> ScriptedOrigin
        {
            try ScriptedOrigin { [self] request in
                counts.withLock {
                    $0.now += 1
                    $0.most = max($0.most, $0.now)
                }
                defer { counts.withLock { $0.now -= 1 } }
                let (delay, reply) = answer(request)
                Thread.sleep(forTimeInterval: delay)
                return reply
            }
        }
    }

    @Test("8 loads of an answer that may not be kept: after the first, the rest fetch side by side, not in turn")
    func unstorableAnswersAreFetchedAlongside() async throws {
        let inFlight = InFlight()
        let origin = try inFlight.origin { request in
            request.path == "/kept.json"
                ? (
                    0.5,
                    ScriptedOrigin.Answer(status: 200, headers: ["Cache-Control: max-age=60"], body: Data("kept".utf8))
                )
                : (
                    1.0,
                    ScriptedOrigin.Answer(status: 200, headers: ["Cache-Control: no-store"], body: Data("live".utf8))
                )
        }
        defer { origin.stop() }
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Waiting is bounded by a minute here: one fetch after another would never overlap.
        let loaders = try Self.loaders(8, folder: folder) { $0.loading.coalescingTimeout = .seconds(60) }
        func check(_ results: [Result<LoadedItem, ItemCacheError>], wave: String) {
            for result in results {
                let loaded = try? result.get()
                #expect(loaded?.data == Data("live".utf8) && loaded?.isStored == false, "\(wave): \(result)")
            }
        }
        check(await Self.loadAll(loaders, origin.url("/live.json")), wave: "first wave")
        // Nothing could be shared: each load asked once. The first waiter to fetch in turn
        // found the answer unstorable and said so; the others then went together (waiting in
        // turn, at most one is ever in flight).
        #expect(origin.requestCount(forPath: "/live.json") == 8)
        let firstWave = inFlight.most
        #expect(firstWave >= 3, "at most \(firstWave) fetches of the unstorable key were in flight at once")

        // A later wave does not wait at all: the key's last answer may not be kept.
        inFlight.reset()
        check(await Self.loadAll(Array(loaders.prefix(4)), origin.url("/live.json")), wave: "second wave")
        #expect(origin.requestCount(forPath: "/live.json") == 12)
        let secondWave = inFlight.most
        #expect(secondWave >= 3, "at most \(secondWave) of 4 fetches were in flight at once")

        // Another key whose answer is kept still coalesces: one request, shared by all 8.
        let kept = await Self.loadAll(loaders, origin.url("/kept.json"))
        #expect(kept.allSatisfy { (try? $0.get().data) == Data("kept".utf8) })
        #expect(origin.requestCount(forPath: "/kept.json") == 1)
        await Self.close(loaders)
    }

    @Test("loads that keep nothing (the caller's no-store) neither wait for each other nor hold others back")
    func loadsThatKeepNothingGoAlongside() async throws {
        let inFlight = InFlight()
        let origin = try inFlight.origin { _ in
            (1.0, ScriptedOrigin.Answer(status: 200, headers: ["Cache-Control: max-age=60"], body: Data("v".utf8)))
        }
        defer { origin.stop() }
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let loaders = try Self.loaders(6, folder: folder) { $0.loading.coalescingTimeout = .seconds(60) }
        for options in [LoadOptions(expiry: .dontStore), LoadOptions(headers: ["Cache-Control": "no-store"])] {
            inFlight.reset()
            let before = origin.requestCount(forPath: "/v.json")
            let results = await withTaskGroup(of: Bool.self) { group in
                for (loader, _) in loaders {
                    group.addTask {
                        (try? await loader.item(for: origin.url("/v.json"), options: options))?.data == Data("v".utf8)
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results == Array(repeating: true, count: 6), "\(options.headers)")
            #expect(origin.requestCount(forPath: "/v.json") == before + 6, "each load asks: nothing is kept to share")
            let most = inFlight.most
            #expect(most >= 3, "at most \(most) of 6 loads that keep nothing were in flight at once")
        }
        await Self.close(loaders)
    }

    @Test("a failure or an unstorable mark dated ahead of the clock is no answer to the fetch waited for")
    func futureRowsAreIgnored() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ItemStoreTests.open(folder)
        let key = try CacheKey.custom("future")
        let now = Date().timeIntervalSince1970
        try await store.close()
        try CacheFolderSafetyTests.tamper(
            folder,
            "INSERT INTO fetchFailure (key, at, code, message) VALUES (?, ?, 'fetch:503', 'down'), (?, ?, 'unstorable', '')",
            [key.rawValue, now + 86_400, DiskTier.unstorableRow(key), now + 86_400])
        let reopened = try ItemStoreTests.open(folder)
        #expect(await reopened.fetchFailure(for: key, since: Date(timeIntervalSince1970: now - 10)) == nil)
        // A failure recorded now is one, and recording drops the rows dated an hour ahead.
        await reopened.recordFetchFailure(ItemCacheError(code: .fetch, message: "now"), for: key)
        #expect(await reopened.fetchFailure(for: key, since: Date(timeIntervalSince1970: now - 10))?.message == "now")
        #expect(await reopened.unstorableMark(for: key) == nil, "the mark a day ahead was dropped")
        try await reopened.close()
    }

    @Test("8 waiters on a missing file: 1 request, and all 8 get its 404, stored as a negative answer")
    func waitersShareANotFound() async throws {
        let fixture = try await LoaderFixture()
        defer { Task { await fixture.close() } }
        let loaders = try Self.loaders(8, folder: fixture.folder)
        fixture.server.injectFault(.delay(seconds: 1.0), forPath: "/missing.json")
        let results = await Self.loadAll(loaders, fixture.url("missing.json"))
        #expect(fixture.server.requestCount(forPath: "/missing.json") == 1)
        #expect(results.count == 8)
        for result in results { #expect(try result.get().status == 404) }
        await Self.close(loaders)
    }

    @Test("waiters share the stale fallback too: 1 request, every load gets the stale value with the failure")
    func waitersShareTheStaleFallback() async throws {
        let fixture = try await LoaderFixture(server: Self.cuttingServer)
        defer { Task { await fixture.close() } }
        try fixture.publish("a.json", "{\"v\":1}")
        let loaders = try Self.loaders(6, folder: fixture.folder)
        _ = try await loaders[0].0.item(
            for: fixture.url("a.json"), options: LoadOptions(expiry: .lifetime(.milliseconds(1))))
        try await Task.sleep(for: .milliseconds(20))
        try fixture.publish("a.json", String(repeating: "y", count: 100_000))
        fixture.server.injectFault(.stall, forPath: "/a.json")
        let before = fixture.server.requestCount(forPath: "/a.json")
        let results = await Self.loadAll(loaders, fixture.url("a.json"))
        #expect(fixture.server.requestCount(forPath: "/a.json") == before + 1)
        for result in results {
            let loaded = try result.get()
            #expect(loaded.source == .stale)
            #expect(loaded.data == Data("{\"v\":1}".utf8))
            #expect(loaded.fetchError?.code == .fetch)
        }
        await Self.close(loaders)
    }

    @Test("a fetch that hangs holds the others at most coalescingTimeout: then they fetch themselves")
    func boundedWait() async throws {
        let fixture = try await LoaderFixture()
        defer { Task { await fixture.close() } }
        try fixture.publish("slow.json", "{}")
        let loaders = try Self.loaders(3, folder: fixture.folder) { $0.loading.coalescingTimeout = .milliseconds(200) }
        fixture.server.injectFault(.delay(seconds: 2.0), forPath: "/slow.json")
        let results = await Self.loadAll(loaders, fixture.url("slow.json"))
        // Each waiter gave up waiting long before the 2 s fetch ended, and fetched itself.
        #expect(fixture.server.requestCount(forPath: "/slow.json") == 3)
        for result in results { #expect(try result.get().data == Data("{}".utf8)) }
        await Self.close(loaders)
    }

    @Test("a cancelled load throws the cancelled code, from the loader and from a provider alike")
    func cancellationHasItsOwnCode() async throws {
        let fixture = try await LoaderFixture()
        defer { Task { await fixture.close() } }
        try fixture.publish("slow.json", "{}")
        fixture.server.injectFault(.delay(seconds: 5.0), forPath: "/slow.json")
        let load = Task { try await fixture.loader.item(for: fixture.url("slow.json")) }
        try await Task.sleep(for: .milliseconds(100))
        load.cancel()
        let error = await #expect(throws: ItemCacheError.self) { try await load.value }
        #expect(error?.code == .cancelled)

        let provider = CacheProvider<String>("slowprovider", store: fixture.store, lifetime: .lifetime(.seconds(60)))
        let get = Task {
            try await provider.get {
                try await Task.sleep(for: .seconds(5))
                return "late"
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        get.cancel()
        let providerError = await #expect(throws: ItemCacheError.self) { try await get.value }
        #expect(providerError?.code == .cancelled)
    }
}

/// A storm of failing URLs (each its own backoff row and shared failure) keeps the index within
/// the folder's limit: the failure tables keep their newest rows, as many as the limit allows,
/// with bounded messages; a URL too long to keep gets no row. One audit saw a 256 KiB cache's
/// index grow to 10 MB.
@Suite("Failure rows stay within the folder's limit")
struct FailureRowBoundTests {
    @Test func aStormOfFailingURLsKeepsTheNewestRowsOnly() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ItemStoreTests.open(folder, limit: 512 << 10)
        let limit = store.disk.failureRowLimit
        #expect(limit == 16)
        let message = String(repeating: "m", count: 10_000)
        let start = Date()
        for index in 0..<200 {
            let now = start.addingTimeInterval(Double(index))
            _ = await store.recordOriginFailure(
                "http://h.example/u\(index)", message: message, status: 500, now: now, backoff: OriginBackoff(),
                retryAfter: nil)
            await store.recordFetchFailure(
                ItemCacheError(code: .fetch, message: message),
                for: try CacheKey(url: URL(string: "http://h.example/k\(index)")!))
        }
        _ = await store.recordOriginFailure(
            "http://h.example/" + String(repeating: "x", count: 5_000), message: "m", status: 500, now: start,
            backoff: OriginBackoff(), retryAfter: nil)
        let (origins, failures, longest, newest) = try await store.disk.pool.read { db in
            (
                try Int.fetchOne(db, sql: "SELECT count(*) FROM originFailure") ?? -1,
                try Int.fetchOne(db, sql: "SELECT count(*) FROM fetchFailure") ?? -1,
                try Int.fetchOne(
                    db,
                    sql:
                        "SELECT max(length(message)) FROM (SELECT message FROM originFailure UNION ALL SELECT message FROM fetchFailure)"
                )
                    ?? -1,
                try String.fetchOne(db, sql: "SELECT origin FROM originFailure ORDER BY at DESC LIMIT 1")
            )
        }
        #expect(origins == limit && failures == limit)
        #expect(longest <= DiskTier.longestFailureMessage)
        #expect(newest == "http://h.example/u199")
        // The newest keeps its backoff: the storm did not open the gate of the last failing URL.
        if case .open = await store.originGate(
            "http://h.example/u199", now: start.addingTimeInterval(199), backoff: OriginBackoff())
        {
            Issue.record("the newest failure's backoff was dropped")
        }
        try await store.close()
    }
}
