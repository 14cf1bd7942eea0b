import FileKit
import Foundation
import StorageServer
import Synchronization
import Testing
import Transport

@testable import ItemCache

/// Public calls an app may make that must never stop the process (issue 10): durations an app
/// may set to `.seconds(.max)` for "never", a write from inside another write's closure, and
/// secrets that must stay out of every error an app prints.
@Suite("Public calls at their edges fail or clamp, never trap")
struct PublicCallEdgeTests {
    /// The backoff never overflows while doubling: `.seconds(.max)` waits the longest wait.
    @Test(
        arguments: [
            (Duration.seconds(1), Duration.seconds(60), 1, Duration.seconds(1)),
            (.seconds(1), .seconds(60), 3, .seconds(4)),
            (.seconds(1), .seconds(60), 40, .seconds(60)),
            (.seconds(Int64.max), .seconds(Int64.max), 1, Duration.longestWait),
            (.seconds(Int64.max), .seconds(Int64.max), 30, Duration.longestWait),
            (.seconds(1), .seconds(Int64.max), 64, .seconds(1 << 20)),
        ])
    func originBackoffDoublesWithoutOverflow(initial: Duration, maximum: Duration, failures: Int, expected: Duration) {
        #expect(OriginBackoff(initial: initial, maximum: maximum).delay(afterFailures: failures) == expected)
    }

    /// A busy timeout past SQLite's `Int32` of milliseconds, and a group delay of "never",
    /// open and store as the longest they can be; close still writes the pending group.
    @Test func durationsOfNeverOpenAndStore() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var configuration = CacheConfiguration(folder: folder)
        configuration.busyTimeout = .seconds(Int64.max)
        configuration.groupWrites = GroupWritePolicy(maxItems: 1000, maxDelay: .seconds(Int64.max))
        let store = try ItemStore(configuration: configuration)
        let key = try CacheKey.custom("never")
        try await store.store(Data("kept".utf8), for: key)
        try await store.close()
        var plain = CacheConfiguration(folder: folder)
        plain.busyTimeout = .seconds(3_000_000)
        let reopened = try ItemStore(configuration: plain)
        #expect(try await reopened.item(for: key).map { String(decoding: $0.item.data, as: UTF8.self) } == "kept")
        try await reopened.close()
    }

    /// A backoff of "never" on an origin answering 500: the second load is answered by the
    /// backoff, with a message that says when, and nothing traps.
    @Test func aBackoffOfNeverIsReportedNotTrapped() async throws {
        let origin = try ScriptedOrigin { _ in ScriptedOrigin.Answer(status: 500, headers: [], body: Data("no".utf8)) }
        defer { origin.stop() }
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var configuration = CacheConfiguration(folder: folder)
        configuration.loading.originBackoff = OriginBackoff(initial: .seconds(Int64.max), maximum: .seconds(Int64.max))
        configuration.loading.retry = RetryPolicy.none
        let transport = try CurlTransport(configuration: CurlTransport.Configuration())
        let loader = ItemLoader(
            store: try ItemStore(configuration: configuration), configuration: configuration, transport: transport)
        _ = try? await loader.item(for: origin.url("/a.json"))
        await #expect {
            _ = try await loader.item(for: origin.url("/a.json"))
        } throws: { error in
            (error as? ItemCacheError)?.message.contains("it is asked again in") == true
        }
        #expect(origin.requestCount(forPath: "/a.json") == 1)
        try? await loader.close()
        await transport.shutdown()
    }

    /// A write from inside `update`'s transform would wait for the lock its caller holds (GRDB
    /// stops the process on it): it throws `nestedWrite`, writes nothing, and the outer update
    /// still commits.
    @Test func aWriteInsideAnUpdateIsRefusedAndTheUpdateStillCommits() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ItemStore(configuration: CacheConfiguration(folder: folder))
        let outer = try CacheKey.custom("outer")
        let inner = try CacheKey.custom("inner")
        let seen = Mutex<ItemCacheError.Code?>(nil)
        try await store.update(outer) { _ in
            do throws(ItemCacheError) {
                try store.storeNow(Data("inner".utf8), for: inner)
            } catch {
                seen.withLock { $0 = error.code }
            }
            return Data("outer".utf8)
        }
        #expect(seen.withLock { $0 } == .nestedWrite)
        #expect(try await store.item(for: outer).map { String(decoding: $0.item.data, as: UTF8.self) } == "outer")
        #expect(try await store.item(for: inner) == nil)
        // Outside any transform the same write goes through.
        try await store.store(Data("inner".utf8), for: inner)
        #expect(try await store.item(for: inner) != nil)
        try await store.close()
    }

    /// A token in a key's URL is masked in every error's message and description; the key
    /// itself keeps only its digest (`SecretFreeKeyTests`).
    @Test func errorsNeverShowAKeysSecrets() throws {
        let key = try CacheKey(url: URL(string: "https://h.invalid/a.json?token=SECRETD&w=2")!)
        let errors = [
            ItemCacheError(code: .notCached, message: "nothing stored for \(key.rawValue)", key: key),
            ItemCacheError(code: .fetch, message: "https://h.invalid/a.json?token=*** is failing", key: key),
            ItemCacheError.cancelled(key),
        ]
        for error in errors {
            #expect(!error.message.contains("SECRETD") && !error.description.contains("SECRETD"), "\(error)")
        }
        #expect(errors[1].description.contains("token=***"))
        #expect(!key.rawValue.contains("SECRETD") && key.rawValue.contains("token=sha256-"))
    }

    /// A credential header the response varies by joins the key as a digest: keys still differ
    /// by it, and neither the key nor a listing holds it. Other headers stay readable.
    @Test func credentialHeadersJoinTheKeyAsADigest() throws {
        let url = URL(string: "https://h.invalid/me.json")!
        for name in ["Authorization", "Cookie", "X-Api-Key", "X-Auth-Token"] {
            let one = try CacheKey(url: url, varyingHeaders: [name: "Bearer SECRET-ONE"])
            let two = try CacheKey(url: url, varyingHeaders: [name: "Bearer SECRET-TWO"])
            #expect(one != two, "\(name)")
            #expect(!one.rawValue.contains("SECRET") && one.rawValue.contains("sha256-"), "\(one.rawValue)")
        }
        let accept = try CacheKey(url: url, varyingHeaders: ["Accept": "image/webp"])
        #expect(
            accept.rawValue.hasSuffix("accept=image%2Fwebp") || accept.rawValue.contains("image"), "\(accept.rawValue)")
    }

    /// `storeNow`'s error code, from a synchronous caller (it is unavailable where one can await).
    static func storeNowError(_ store: ItemStore, _ key: CacheKey) -> ItemCacheError.Code? {
        do throws(ItemCacheError) {
            _ = try store.storeNow(Data("c".utf8), for: key)
        } catch {
            return error.code
        }
        return nil
    }

    /// With group writes on, every write call after `close()` fails alike with `closed`
    /// (`storeNow` and `update` wrote to disk while `store` was refused), and writes nothing.
    @Test func afterCloseEveryWriteCallIsRefusedAlike() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var configuration = CacheConfiguration(folder: folder)
        configuration.groupWrites = GroupWritePolicy(maxItems: 10, maxDelay: .seconds(60))
        let store = try ItemStore(configuration: configuration)
        try await store.close()
        let key = try CacheKey.custom("late")
        await #expect { try await store.store(Data("a".utf8), for: key) } throws: {
            ($0 as? ItemCacheError)?.code == .closed
        }
        await #expect { try await store.update(key) { _ in Data("b".utf8) } } throws: {
            ($0 as? ItemCacheError)?.code == .closed
        }
        #expect(Self.storeNowError(store, key) == .closed)
        let reopened = try ItemStore(configuration: CacheConfiguration(folder: folder))
        #expect(try await reopened.item(for: key) == nil, "nothing was written")
        try await reopened.close()
    }
}
