import Foundation
import Synchronization
import Testing

@testable import ItemCache

/// RxCache's providers on the real store: lifetimes, sources, stale data when the loader
/// fails, one load for concurrent gets, evict scopes and atomic list actions.
@Suite("Providers: typed values with lifetimes, dynamic keys and groups, evict scopes, list actions")
struct ProviderTests {
    struct Post: Codable, Sendable, Equatable {
        var id: Int
        var title: String
    }

    struct LoaderFailure: Error {}

    /// Counts the loader's runs.
    final class Loads: Sendable {
        private let count = Atomic(0)
        var value: Int { count.load(ordering: .relaxed) }
        func record() { count.add(1, ordering: .relaxed) }
    }

    static func open(_ folder: String) throws -> ItemStore {
        try ItemStore(configuration: CacheConfiguration(folder: folder))
    }

    static let expired = Expiry.date(Date(timeIntervalSince1970: 1))

    @Test("a get says where its value came from: network, then memory, then disk; an expired one loads again")
    func sources() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try Self.open(folder)
        let loads = Loads()
        let posts = CacheProvider<[Post]>("posts", store: store, lifetime: .lifetime(.seconds(3600)))
        let loader: @Sendable () async throws -> [Post] = {
            loads.record()
            return [Post(id: loads.value, title: "t")]
        }

        let first = try await posts.get(loader: loader)
        #expect(first.source == .network)
        #expect(first.value == [Post(id: 1, title: "t")])
        #expect(try await posts.get(loader: loader).source == .memory)
        store.purgeMemory()
        let fromDisk = try await posts.get(loader: loader)
        #expect(fromDisk.source == .disk)
        #expect(fromDisk.value == first.value)
        #expect(loads.value == 1)

        let reloaded = try await posts.get(evict: true, loader: loader)
        #expect(reloaded.source == .network, "evict: true forces a reload")
        #expect(reloaded.value == [Post(id: 2, title: "t")])

        var shortLived = posts
        shortLived.lifetime = Self.expired
        _ = try await shortLived.get(.dynamicKey("old"), loader: loader)
        #expect(
            try posts.blockingCached(.dynamicKey("old"))?.source == .stale, "stored expired: cached() marks it stale")
        #expect(
            try await posts.get(.dynamicKey("old"), loader: loader).source == .network, "an expired record loads again")
        #expect(loads.value == 4)
    }

    @Test("a failing loader: the expired value comes back marked stale with the error; without one, a fetch error")
    func staleWhenTheLoaderFails() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try Self.open(folder)
        let expiring = CacheProvider<String>("profile", store: store, lifetime: Self.expired)
        _ = try await expiring.get { "v1" }

        let stale = try await expiring.get { throw LoaderFailure() }
        #expect(stale.source == .stale)
        #expect(stale.value == "v1")
        #expect(stale.loaderError is LoaderFailure)

        var strict = expiring
        strict.useExpiredDataIfLoaderFails = false
        await #expect { try await strict.get { throw LoaderFailure() } } throws: { error in
            (error as? ItemCacheError)?.code == .fetch && (error as? ItemCacheError)?.underlying is LoaderFailure
        }
        await #expect { try await expiring.get(.dynamicKey("never-loaded")) { throw LoaderFailure() } } throws: {
            error in
            (error as? ItemCacheError)?.code == .fetch
        }
    }

    @Test("50 concurrent gets of one record run the loader once; a value of another type is reloaded")
    func coalescing() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try Self.open(folder)
        let loads = Loads()
        let provider = CacheProvider<[Post]>("feed", store: store)
        let results = try await withThrowingTaskGroup(of: ProviderResult<[Post]>.self) { tasks in
            for _ in 0..<50 {
                tasks.addTask {
                    try await provider.get(.dynamicKey("rust", group: "1")) {
                        loads.record()
                        try await Task.sleep(for: .milliseconds(100))
                        return [Post(id: 7, title: "x")]
                    }
                }
            }
            return try await tasks.reduce(into: []) { $0.append($1) }
        }
        #expect(loads.value == 1)
        #expect(results.allSatisfy { $0.value == [Post(id: 7, title: "x")] })

        // The same record read as another type (the app's model changed): not decodable, so reloaded.
        let renamed = CacheProvider<[String: Int]>("feed", store: store)
        let reloaded = try await renamed.get(.dynamicKey("rust", group: "1")) { ["n": 1] }
        #expect(reloaded.source == .network)
        #expect(reloaded.value == ["n": 1])
    }

    @Test(
        "evict scopes: one record, one dynamic key with all its groups, the whole provider; other providers untouched")
    func evictScopes() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try Self.open(folder)
        let feed = CacheProvider<String>("feed", store: store)
        let other = CacheProvider<String>("feed/other", store: store)
        let keys: [ProviderKey] = [
            .none, .dynamicKey("u1", group: "p1"), .dynamicKey("u1", group: "p2"), .dynamicKey("u1"),
            .dynamicKey("u2", group: "p1"),
        ]
        for key in keys {
            _ = try await feed.get(key) { "feed \(key)" }
            _ = try await other.get(key) { "other \(key)" }
        }
        func present(_ provider: CacheProvider<String>) throws -> [ProviderKey] {
            try keys.filter { try provider.blockingCached($0) != nil }
        }
        #expect(try present(feed) == keys)
        #expect(try feed.blockingCached(.dynamicKey("u1", group: "p2"))?.value == "feed u1/p2")

        #expect(try await feed.evict(.dynamicKeyGroup("u1", group: "p1")) == 1)
        #expect(
            try present(feed) == [
                .none, .dynamicKey("u1", group: "p2"), .dynamicKey("u1"), .dynamicKey("u2", group: "p1"),
            ])

        #expect(try await feed.evict(.dynamicKey("u1")) == 2)
        #expect(try present(feed) == [.none, .dynamicKey("u2", group: "p1")])

        #expect(try await feed.evict(.record(.none)) == 1)
        #expect(try await feed.evict(.provider) == 1)
        #expect(try present(feed).isEmpty)
        #expect(try present(other) == keys, "a provider named feed/other is not part of feed")
        #expect(try store.blockingCount(matching: ItemQuery().context("provider")) == keys.count)
    }

    @Test(
        "list actions change the stored array as a table says, and keep its expiry",
        arguments: [
            (ListAction<Int>.addFirst(0), [0, 1, 2, 3]),
            (.addLast(4), [1, 2, 3, 4]),
            (.insert(9, at: 1), [1, 9, 2, 3]),
            (.insert(9, at: 3), [1, 2, 3, 9]),
            (.removeFirst, [2, 3]),
            (.removeLast, [1, 2]),
            (.remove(at: 1), [1, 3]),
            (.removeAll(where: { $0 % 2 == 1 }), [2]),
            (.removeAll, []),
            (.update(at: 2) { $0 * 10 }, [1, 2, 30]),
            (.updateAll(where: { $0 > 1 }) { -$0 }, [1, -2, -3]),
        ])
    func listActions(action: ListAction<Int>, expected: [Int]) async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try Self.open(folder)
        let numbers = CacheProvider<[Int]>("numbers", store: store, lifetime: .lifetime(.seconds(600)))
        let loaded = try await numbers.get(.dynamicKey("k")) { [1, 2, 3] }
        #expect(try await numbers.update(action, for: .dynamicKey("k")) == expected)
        store.purgeMemory()
        let stored = try #require(try numbers.blockingCached(.dynamicKey("k")))
        #expect(stored.value == expected)
        #expect(
            abs(stored.info.expires!.timeIntervalSince(loaded.info.expires!)) < 0.001,
            "an edit is not a load: the expiry stays")
        #expect(try await numbers.get(.dynamicKey("k")) { [99] }.value == expected, "still fresh: no reload")
    }

    @Test("an action that does not apply, or a stored value that is not the array, fails and changes nothing")
    func invalidActions() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try Self.open(folder)
        let numbers = CacheProvider<[Int]>("numbers", store: store)
        #expect(try await numbers.update(.addLast(5)) == [5], "a missing list is empty")
        for action in [ListAction<Int>.remove(at: 1), .insert(0, at: 3), .update(at: -1) { $0 }] {
            await #expect { try await numbers.update(action) } throws: {
                ($0 as? ItemCacheError)?.code == .invalidAction
            }
        }
        await #expect { try await numbers.update(.removeFirst, for: .dynamicKey("empty")) } throws: {
            ($0 as? ItemCacheError)?.code == .invalidAction
        }
        #expect(try numbers.blockingCached()?.value == [5])
        #expect(try numbers.blockingCached(.dynamicKey("empty")) == nil, "a failed action stores nothing")

        _ = try await CacheProvider<String>("numbers", store: store).get(.dynamicKey("text"), evict: true) {
            "not a list"
        }
        await #expect { try await numbers.update(.addLast(1), for: .dynamicKey("text")) } throws: {
            ($0 as? ItemCacheError)?.code == .decoding
        }
        #expect(
            try store.blockingItem(for: ProviderKey.dynamicKey("text").cacheKey(provider: "numbers"))?.item.string()
                == "\"not a list\"")
    }

    @Test("list actions from two stores on one folder, 60 at once, lose no element")
    func atomicListActions() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let providers = [try Self.open(folder), try Self.open(folder)].map { CacheProvider<[Int]>("shared", store: $0) }
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            for value in 0..<60 {
                tasks.addTask {
                    _ = try await providers[value % 2].update(value % 3 == 0 ? .addFirst(value) : .addLast(value))
                }
            }
            try await tasks.waitForAll()
        }
        for provider in providers {
            provider.store.purgeMemory()
            #expect(try provider.blockingCached()?.value.sorted() == Array(0..<60))
        }
    }
}
