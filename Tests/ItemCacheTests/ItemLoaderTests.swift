import Foundation
import StorageServer
import Synchronization
import Testing
import Transport

@testable import ItemCache

/// A loader on a real cache folder and a real loopback server, torn down by ``close()``.
struct LoaderFixture {
    let folder: String
    let content: URL
    let server: StorageServer
    let transport: CurlTransport
    let store: ItemStore
    let loader: ItemLoader

    init(
        _ name: String = #function, server serverConfiguration: StorageServer.Configuration = .init(),
        configure: (inout CacheConfiguration) -> Void = { _ in }
    ) async throws {
        folder = temporaryCacheFolder(name)
        content = URL(fileURLWithPath: folder + "-content")
        try FileManager.default.createDirectory(at: content, withIntermediateDirectories: true)
        server = StorageServer(root: content, configuration: serverConfiguration)
        _ = try await server.start()
        var transportConfiguration = CurlTransport.Configuration()
        transportConfiguration.retry = .none
        transport = try CurlTransport(configuration: transportConfiguration)
        var configuration = CacheConfiguration(folder: folder)
        configure(&configuration)
        store = try ItemStore(configuration: configuration)
        loader = ItemLoader(store: store, loading: configuration.loading, transport: transport)
    }

    func publish(_ path: String, _ text: String) throws {
        try Data(text.utf8).write(to: content.appendingPathComponent(path))
    }

    func url(_ path: String) -> URL { server.url(for: path) }

    func close() async {
        try? await loader.close()
        await transport.shutdown()
        await server.stop()
        try? FileManager.default.removeItem(atPath: folder)
        try? FileManager.default.removeItem(at: content)
    }
}

@Suite("The loader: coalescing, freshness, revalidation, stale values, limits and states, on a real server")
struct ItemLoaderTests {
    @Test("100 concurrent gets of one URL make 1 request, and all get the bytes")
    func coalescing() async throws {
        let fixture = try await LoaderFixture()
        defer { Task { await fixture.close() } }
        try fixture.publish("a.json", "{\"a\":1}")
        fixture.server.injectFault(.delay(seconds: 0.3), forPath: "/a.json", times: 1)
        let url = fixture.url("a.json")
        let results = try await withThrowingTaskGroup(of: LoadedItem.self) { group in
            for _ in 0..<100 { group.addTask { try await fixture.loader.item(for: url) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 100)
        #expect(results.allSatisfy { $0.data == Data("{\"a\":1}".utf8) })
        #expect(fixture.server.requestCount(forPath: "/a.json") == 1)
        let again = try await fixture.loader.item(for: url)
        #expect(again.source == .memory)
        #expect(fixture.server.requestCount(forPath: "/a.json") == 1)
    }

    @Test("a waiter that cancels leaves alone; the fetch goes on for the others, and stops when the last one cancels")
    func cancellationPerWaiter() async throws {
        let fixture = try await LoaderFixture()
        defer { Task { await fixture.close() } }
        try fixture.publish("slow.txt", "slow")
        // Both must have joined the one fetch before one cancels (else the kept one would start
        // a second): the answer is held 2 s, and the cancel comes 0.3 s in.
        fixture.server.injectFault(.delay(seconds: 2), forPath: "/slow.txt", times: 1)
        let url = fixture.url("slow.txt")
        let cancelled = Task { try await fixture.loader.item(for: url) }
        let kept = Task { try await fixture.loader.item(for: url) }
        try await Task.sleep(for: .milliseconds(300))
        cancelled.cancel()
        let cancelledResult = await cancelled.result
        #expect(throws: ItemCacheError.self) { try cancelledResult.get() }
        #expect(try await kept.value.data == Data("slow".utf8))
        #expect(fixture.server.requestCount(forPath: "/slow.txt") == 1)

        // The last waiter cancels: the fetch is cancelled, nothing is stored.
        try fixture.publish("slower.txt", "slower")
        fixture.server.injectFault(.delay(seconds: 600), forPath: "/slower.txt", times: 1)
        let only = Task { try await fixture.loader.item(for: fixture.url("slower.txt")) }
        try await Task.sleep(for: .milliseconds(100))
        only.cancel()
        _ = await only.result
        // The waiter is released at once; the flight leaves when its transfer has stopped, which
        // a busy machine may take a while to do (a fetch not cancelled would still be in progress
        // at this 3-minute hang detector, and end .found at 600 s).
        let key = try CacheKey(url: fixture.url("slower.txt"))
        let deadline = ContinuousClock.now + .seconds(180)
        while case .inProgress = await fixture.loader.state(for: key), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(await fixture.loader.state(for: key) == .notFound)
    }

    /// A fetch with request headers is named by them too; `state(for:)` looked up the bare key
    /// and said `.notFound` while it ran.
    @Test("state(for:) says inProgress while a fetch with request headers runs")
    func stateOfAFetchWithHeaders() async throws {
        let fixture = try await LoaderFixture()
        defer { Task { await fixture.close() } }
        try fixture.publish("h.txt", "with headers")
        fixture.server.injectFault(.delay(seconds: 600), forPath: "/h.txt", times: 1)
        let load = Task {
            try await fixture.loader.item(
                for: fixture.url("h.txt"), options: LoadOptions(headers: ["Accept": "text/plain"]))
        }
        // Once the request reached the origin, its flight is under way (a 3-minute hang detector).
        let deadline = ContinuousClock.now + .seconds(180)
        while fixture.server.requestsInProgress(forPath: "/h.txt") == 0, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let state = await fixture.loader.state(for: try CacheKey(url: fixture.url("h.txt")))
        guard case .inProgress = state else {
            Issue.record("a fetch with headers under way shows as \(state)")
            load.cancel()
            return
        }
        load.cancel()
        _ = await load.result
    }

    @Test(
        "a shared fetch joins no caller's TransferGroup: the group of the caller that started it stops only that caller"
    )
    func sharedFetchOutlivesTheStartersGroup() async throws {
        let fixture = try await LoaderFixture()
        defer { Task { await fixture.close() } }
        try fixture.publish("shared.txt", "shared")
        fixture.server.injectFault(.delay(seconds: 3), forPath: "/shared.txt", times: 1)
        let url = fixture.url("shared.txt")
        let group = TransferGroup()
        let starter = Task {
            try await TransferGroup.$current.withValue(group) { try await fixture.loader.item(for: url) }
        }
        while fixture.server.requestsInProgress(forPath: "/shared.txt") == 0 {
            try await Task.sleep(for: .milliseconds(10))
        }
        let other = Task { try await fixture.loader.item(for: url) }
        try await Task.sleep(for: .milliseconds(200))
        // The starter's job stops as a job with a group stops: the group first, then its task.
        group.cancel()
        starter.cancel()
        let starterResult = await starter.result
        #expect(throws: ItemCacheError.self) { try starterResult.get() }
        #expect(try await other.value.data == Data("shared".utf8))
        #expect(fixture.server.requestCount(forPath: "/shared.txt") == 1)
    }

    @Test("a URL with dot segments is the item of the path libcurl sends: one request, one entry")
    func dotSegmentsShareTheItemOfThePathSent() async throws {
        let fixture = try await LoaderFixture()
        defer { Task { await fixture.close() } }
        try fixture.publish("d.txt", "dots")
        fixture.server.setCacheControl("max-age=600", forPath: "/d.txt")
        let plain = fixture.url("d.txt")
        let dotted = try #require(
            URL(string: plain.absoluteString.replacingOccurrences(of: "/d.txt", with: "/x/./y/../../d.txt")))
        let first = try await fixture.loader.item(for: dotted)
        #expect(first.source == .network && first.data == Data("dots".utf8))
        #expect(fixture.server.requests().map(\.path) == ["/d.txt"], "libcurl sends the path without dot segments")
        #expect(try await fixture.loader.item(for: plain).source == .memory)
        #expect(fixture.server.requestCount(forPath: "/d.txt") == 1)
    }

    @Test("an expired item with an ETag revalidates: a 304 moves no body and refreshes the expiry")
    func revalidation() async throws {
        let fixture = try await LoaderFixture()
        defer { Task { await fixture.close() } }
        try fixture.publish("r.txt", String(repeating: "r", count: 4000))
        fixture.server.setCacheControl("max-age=0", forPath: "/r.txt")
        let url = fixture.url("r.txt")
        let first = try await fixture.loader.item(for: url)
        #expect(first.source == .network)
        #expect(first.item.info.etag != nil)
        #expect(first.item.info.lastModified != nil)
        fixture.server.setCacheControl("max-age=600", forPath: "/r.txt")
        let second = try await fixture.loader.item(for: url)
        #expect(second.source == .revalidated)
        #expect(second.data == first.data)
        let log = fixture.server.requests().filter { $0.path == "/r.txt" }
        #expect(log.count == 2)
        #expect(log.last?.status == 304)
        #expect(log.last?.bodyBytes == 0)
        #expect(log.last?.ifNoneMatch == first.item.info.etag)
        let expires = try #require(second.item.info.expires)
        #expect(expires > Date().addingTimeInterval(500))
        #expect(try await fixture.loader.item(for: url).source == .memory)
        #expect(fixture.server.requestCount(forPath: "/r.txt") == 2)

        // Changed on the server: the conditional request brings the new bytes.
        try fixture.publish("r.txt", "changed")
        fixture.server.setCacheControl("max-age=0", forPath: "/r.txt")
        _ = try await fixture.loader.item(for: url, options: LoadOptions(policy: .reload))
        let changed = try await fixture.loader.item(for: url)
        #expect(changed.data == Data("changed".utf8))
    }

    @Test("the server's freshness: no-store keeps nothing, no-cache revalidates every use, Expires and Age count")
    func serverFreshness() async throws {
        let fixture = try await LoaderFixture()
        defer { Task { await fixture.close() } }
        for name in ["nostore", "nocache", "age"] { try fixture.publish(name, name) }
        fixture.server.setCacheControl("no-store", forPath: "/nostore")
        fixture.server.setCacheControl("no-cache", forPath: "/nocache")
        fixture.server.setResponseHeaders(["Cache-Control": "max-age=100", "Age": "40"], forPath: "/age")

        #expect(try await fixture.loader.item(for: fixture.url("nostore")).source == .network)
        #expect(try fixture.store.blockingItem(for: CacheKey(url: fixture.url("nostore"))) == nil)
        #expect(try await fixture.loader.item(for: fixture.url("nostore")).source == .network)

        #expect(try await fixture.loader.item(for: fixture.url("nocache")).source == .network)
        #expect(try await fixture.loader.item(for: fixture.url("nocache")).source == .revalidated)
        #expect(fixture.server.requestCount(forPath: "/nocache") == 2)
        // A 304 that leaves Cache-Control out keeps the stored no-cache (RFC 9111 §4.3.4): the
        // next use still revalidates instead of trusting the default lifetime.
        fixture.server.setCacheControl(nil, forPath: "/nocache")
        #expect(try await fixture.loader.item(for: fixture.url("nocache")).source == .revalidated)
        #expect(try await fixture.loader.item(for: fixture.url("nocache")).source == .revalidated)
        #expect(fixture.server.requestCount(forPath: "/nocache") == 4)

        let aged = try await fixture.loader.item(for: fixture.url("age"))
        let lifetime = try #require(aged.item.info.expires).timeIntervalSinceNow
        #expect(lifetime > 50 && lifetime <= 60)
    }

    @Test("the caller's expiry wins over the server's; dont-store returns and keeps nothing")
    func callerExpiry() async throws {
        let fixture = try await LoaderFixture()
        defer { Task { await fixture.close() } }
        try fixture.publish("c", "c")
        fixture.server.setCacheControl("no-store", forPath: "/c")
        let kept = try await fixture.loader.item(
            for: fixture.url("c"), options: LoadOptions(expiry: .lifetime(.seconds(60))))
        #expect(kept.source == .network)
        #expect(try await fixture.loader.item(for: fixture.url("c")).source == .memory)
        try fixture.publish("d", "d")
        _ = try await fixture.loader.item(for: fixture.url("d"), options: LoadOptions(expiry: .dontStore))
        #expect(try fixture.store.blockingItem(for: CacheKey(url: fixture.url("d"))) == nil)
    }

    @Test("stale-if-error: a failed fetch returns the stale value marked stale, with the failure")
    func staleIfError() async throws {
        let fixture = try await LoaderFixture()
        defer { Task { await fixture.close() } }
        try fixture.publish("s", "old")
        let url = fixture.url("s")
        _ = try await fixture.loader.item(for: url, options: LoadOptions(expiry: .date(Date(timeIntervalSinceNow: -1))))
        fixture.server.injectFault(.status(503), forPath: "/s")
        let stale = try await fixture.loader.item(for: url)
        #expect(stale.source == .stale)
        #expect(stale.data == Data("old".utf8))
        #expect(stale.fetchError?.code == .fetch)
        // Nothing stored, nothing stale: the failing status itself.
        fixture.server.injectFault(.status(503, body: Data("down".utf8)), forPath: "/missing")
        let failing = try await fixture.loader.item(for: fixture.url("missing"))
        #expect(failing.status == 503 && failing.source == .network && !failing.isStored)
        #expect(failing.data == Data("down".utf8))
        // A 404 is the origin's answer, not a failure: stored and served as one.
        let missing = try await fixture.loader.item(for: fixture.url("gone"))
        #expect(missing.status == 404 && missing.isStored)
    }

    /// One configuration per component: two loaders with settings of their own share one store
    /// (its folder, limits, clock) and what it holds.
    @Test func twoLoadersWithTheirOwnSettingsShareOneStore() async throws {
        let fixture = try await LoaderFixture()
        defer { Task { await fixture.close() } }
        var strict = LoadingConfiguration()
        strict.staleIfError = .never
        let strictLoader = ItemLoader(store: fixture.store, loading: strict, transport: fixture.transport)
        #expect(strictLoader.configuration.folder == fixture.store.configuration.folder)
        #expect(
            strictLoader.configuration.loading.staleIfError == .never
                && fixture.loader.configuration.loading.staleIfError == .whenPermitted)
        try fixture.publish("s", "old")
        let url = fixture.url("s")
        _ = try await fixture.loader.item(for: url, options: LoadOptions(expiry: .date(Date(timeIntervalSinceNow: -1))))
        fixture.server.injectFault(.status(503), forPath: "/s")
        // The first loader's stored value is the second one's too, and each follows its own rule.
        #expect(try await fixture.loader.item(for: url).source == .stale)
        // The strict one never serves it. While the origin's backoff from the first failure runs,
        // the failure is thrown; once it has passed (a slow machine), the origin is asked again
        // and its failing answer is the result, as when a stale value is forbidden (HTTPCachingTests).
        do {
            let answer = try await strictLoader.item(for: url)
            #expect(answer.status == 503 && answer.source == .network && !answer.isStored, "\(answer)")
        } catch {
            #expect(error.code == .fetch, "\(error)")
        }
        #expect(try await strictLoader.item(for: url, options: LoadOptions(policy: .offline)).data == Data("old".utf8))
    }

    @Test("stale-while-revalidate: inside the window the stale value comes at once and a background fetch refreshes it")
    func staleWhileRevalidate() async throws {
        let fixture = try await LoaderFixture { $0.loading.staleWhileRevalidate = .seconds(60) }
        defer { Task { await fixture.close() } }
        try fixture.publish("w", "v1")
        let url = fixture.url("w")
        _ = try await fixture.loader.item(for: url, options: LoadOptions(expiry: .date(Date(timeIntervalSinceNow: -1))))
        try fixture.publish("w", "v2")
        fixture.server.injectFault(.delay(seconds: 0.2), forPath: "/w", times: 1)
        let quick = try await fixture.loader.item(for: url)
        #expect(quick.source == .stale)
        #expect(quick.data == Data("v1".utf8))
        var refreshed = quick
        for _ in 0..<100 where refreshed.data != Data("v2".utf8) {
            try await Task.sleep(for: .milliseconds(20))
            refreshed = try await fixture.loader.item(for: url)
        }
        #expect(refreshed.data == Data("v2".utf8))
        #expect(fixture.server.requestCount(forPath: "/w") == 2)
    }

    @Test("offline: a stored value (stale marked stale), or notCached, with no request")
    func offline() async throws {
        let fixture = try await LoaderFixture()
        defer { Task { await fixture.close() } }
        try fixture.publish("o", "o")
        await #expect {
            try await fixture.loader.item(for: fixture.url("o"), options: LoadOptions(policy: .offline))
        } throws: {
            ($0 as? ItemCacheError)?.code == .notCached
        }
        #expect(fixture.server.requestCount(forPath: "/o") == 0)
        _ = try await fixture.loader.item(
            for: fixture.url("o"), options: LoadOptions(expiry: .date(Date(timeIntervalSinceNow: -1))))
        #expect(
            try await fixture.loader.item(for: fixture.url("o"), options: LoadOptions(policy: .offline)).source
                == .stale)
        #expect(fixture.server.requestCount(forPath: "/o") == 1)
    }

    @Test(
        "at most maxConcurrentFetches run at once; progress reports bytes against the total; states go inProgress → found"
    )
    func limitsProgressAndStates() async throws {
        let fixture = try await LoaderFixture { $0.loading.maxConcurrentFetches = 2 }
        defer { Task { await fixture.close() } }
        for index in 0..<6 { try fixture.publish("p\(index)", String(repeating: "x", count: 200_000)) }
        fixture.server.injectFault(.delay(seconds: 0.3), times: nil) { $0.hasPrefix("/p") }
        let key = try CacheKey(url: fixture.url("p0"))
        let states = await fixture.loader.states(for: key)
        let seen = Task { () -> [ItemState] in
            var seen: [ItemState] = []
            for await state in states {
                seen.append(state)
                if state == .found { break }
            }
            return seen
        }
        let progress = Mutex<[TransferProgress]>([])
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<6 {
                let options =
                    index == 0
                    ? LoadOptions(progress: { value in progress.withLock { $0.append(value) } }) : LoadOptions()
                group.addTask { _ = try await fixture.loader.item(for: fixture.url("p\(index)"), options: options) }
            }
            try await group.waitForAll()
        }
        // 6 fetches of 0.3 s, 2 at a time: at least 3 rounds.
        #expect(ContinuousClock.now - start >= .milliseconds(850))
        let values = progress.withLock { $0 }
        #expect(values.last?.received == 200_000)
        #expect(values.contains { $0.expected == 200_000 })
        let observed = await seen.value
        #expect(observed.first == .notFound)
        #expect(observed.contains { if case .inProgress = $0 { true } else { false } })
        #expect(observed.last == .found)
        #expect(await fixture.loader.state(for: key) == .found)
    }

    @Test("fetchers per context and scheme: file:// and a generating fetcher")
    func fetchers() async throws {
        let fixture = try await LoaderFixture()
        defer { Task { await fixture.close() } }
        let file = fixture.content.appendingPathComponent("local.txt")
        try Data("local".utf8).write(to: file)
        // A file changed in the last 2 s gets no validator (FileFetcher.recentSeconds).
        try await Task.sleep(for: .milliseconds(2_100))
        let first = try await fixture.loader.item(
            for: file, options: LoadOptions(expiry: .date(Date(timeIntervalSinceNow: -1))))
        #expect(first.data == Data("local".utf8))
        #expect(try await fixture.loader.item(for: file).source == .revalidated)

        let calls = Mutex(0)
        fixture.loader.register(
            ClosureFetcher { request in
                calls.withLock { $0 += 1 }
                return Data("made for \(request.key.rawValue)".utf8)
            }, for: "thumbnails")
        let key = try CacheKey.custom("photo-1", context: "thumbnails")
        #expect(
            try await fixture.loader.item(for: key, url: nil).data == Data("made for thumbnails custom:photo-1".utf8))
        #expect(try await fixture.loader.item(for: key, url: nil).source == .memory)
        #expect(calls.withLock { $0 } == 1)
    }
}

/// A `file://` item's validator is its modification time in milliseconds; a time no `Int64` of
/// milliseconds holds (tmpfs keeps times to 2⁶³ seconds) is written as the number it is.
@Suite("File items far in the future")
struct FileItemFarFutureTests {
    @Test func aFileItemsTimeBeyondInt64MillisecondsIsAValidatorNotATrap() async throws {
        #expect(FileFetcher.milliseconds(Date(timeIntervalSince1970: 1.5)) == "1500")
        #expect(FileFetcher.milliseconds(Date(timeIntervalSince1970: -2.25)) == "-2250")
        #expect(FileFetcher.milliseconds(Date(timeIntervalSince1970: 9e18)) == "9e+21")
        let folder = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        let path = folder + "/content-sync-far-item-\(getpid())"
        #expect(FileManager.default.createFile(atPath: path, contents: Data("far".utf8)))
        defer { unlink(path) }
        var times = [
            timespec(tv_sec: 9_000_000_000_000_000_000, tv_nsec: 0),
            timespec(tv_sec: 9_000_000_000_000_000_000, tv_nsec: 0),
        ]
        _ = utimensat(AT_FDCWD, path, &times, 0)
        let request = FetchRequest(
            key: try CacheKey(url: URL(fileURLWithPath: path)), url: URL(fileURLWithPath: path),
            scratchFolder: NSTemporaryDirectory())
        // Just changed: no entity tag yet (it may still be written through a mapping).
        let recent = try await FileFetcher().fetch(request)
        #expect(recent.headers["etag"] == nil && recent.headers["last-modified"] == "9e+21")
        try await Task.sleep(for: .milliseconds(2_100))
        let response = try await FileFetcher().fetch(request)
        guard case .fetched(let data) = response.body else {
            Issue.record("no body: \(response.body)")
            return
        }
        #expect(data == Data("far".utf8))
        #expect(response.headers["last-modified"] == "9e+21")
        let validator = try #require(response.headers["etag"])
        #expect(validator.contains("9000000000000000000.0"), "the times to the nanosecond: \(validator)")
        var again = request
        again.etag = validator
        guard case .notModified = try await FileFetcher().fetch(again).body else {
            Issue.record("the same file did not validate")
            return
        }
        // The time alone no longer validates (another file may have it).
        again.etag = nil
        again.lastModified = "9e+21"
        guard case .fetched = try await FileFetcher().fetch(again).body else {
            Issue.record("the time alone validated")
            return
        }
    }
}

/// A `file://` item's messages show its path as its key shows it: a path parameter that holds a
/// secret (`;token=…`) is masked.
@Suite("File item messages")
struct FileItemMessageTests {
    @Test func aSecretPathParameterIsMaskedInAFileItemsMessages() async throws {
        let folder = NSTemporaryDirectory() + "content-sync-file-secret-\(getpid())/a;token=SEKF1"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer {
            try? FileManager.default.removeItem(atPath: NSTemporaryDirectory() + "content-sync-file-secret-\(getpid())")
        }
        let present = folder + "/x.txt"
        #expect(FileManager.default.createFile(atPath: present, contents: Data("x".utf8)))
        for (path, problem) in [(folder + "/missing.txt", "does not exist"), (present + "/", "drop the final '/'")] {
            let url = URL(fileURLWithPath: path)
            let request = FetchRequest(key: try CacheKey(url: url), url: url, scratchFolder: NSTemporaryDirectory())
            do {
                _ = try await FileFetcher().fetch(request)
                Issue.record("\(path) was read")
            } catch let error as ItemCacheError {
                #expect(error.message.contains("a;token=***/"), "\(error.message)")
                #expect(error.message.contains(problem), "\(error.message)")
                #expect(!error.message.contains("SEKF1"), "\(error.message)")
            }
        }
    }
}
