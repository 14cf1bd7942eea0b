import Foundation
import Testing

@testable import ItemCache

/// What two stores on one folder (two processes, as far as the folder can tell) agree on: one
/// disk limit, atomic read-modify-write updates, and a memory tier that follows the disk.
@Suite("Sharing a folder: one disk limit, atomic updates, memory in the disk's order")
struct ItemStoreSharingTests {
    static func key(_ name: String) -> CacheKey { try! CacheKey.custom(name) }

    static func open(_ folder: String, limit: Int64? = nil, inline: Int = 1024) throws -> ItemStore {
        var configuration = CacheConfiguration(folder: folder)
        configuration.diskLimit = limit
        configuration.inlineThreshold = inline
        return try ItemStore(configuration: configuration)
    }

    @Test(
        "the disk limit belongs to the folder: kept when a store opens without one, the last one set wins for every store"
    )
    func limitBelongsToTheFolder() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let fresh = try Self.open(folder, inline: 4096)
        #expect(
            try fresh.blockingStatistics().limit == CacheConfiguration.defaultDiskLimit,
            "a new folder starts with the default")

        // Room for five 2,000-byte values beside the index and log (the limit is the footprint).
        let limit = DiskTier.limit(forRows: 5 * DiskTier.cost(size: 2000, inline: true, keyBytes: 9))
        let setter = try Self.open(folder, limit: limit, inline: 4096)
        let keeper = try Self.open(folder, inline: 4096)
        #expect(try keeper.blockingStatistics().limit == limit, "opening without a limit keeps the folder's")
        #expect(try fresh.blockingStatistics().limit == limit, "a store opened before sees the new limit")

        // `fresh` was opened with the default, yet its writes obey the folder's limit.
        for index in 0..<8 {
            try await fresh.store(Data(repeating: UInt8(index), count: 2000), for: Self.key("v\(index)"))
        }
        let usage = try fresh.blockingStatistics()
        #expect(usage.bytes <= 10_000)
        #expect(usage.count == 5)
        await #expect(throws: ItemCacheError.self) {
            try await fresh.store(
                Data(count: Int(DiskTier.rowBudget(for: limit, shardFolders: 0)) + 1), for: Self.key("huge"))
        }

        // A smaller limit set later shrinks the folder at once.
        let smaller = DiskTier.limit(forRows: 2 * DiskTier.cost(size: 2000, inline: true, keyBytes: 9))
        _ = try Self.open(folder, limit: smaller, inline: 4096)
        try await setter.store(Data(count: 10), for: Self.key("tiny"))
        #expect(try keeper.blockingStatistics().bytes <= 4010)
        #expect(try keeper.blockingStatistics().limit == smaller)
    }

    @Test("update is one atomic step: 2 stores × 40 concurrent increments lose none, inline and in a file")
    func concurrentUpdatesLoseNothing() async throws {
        for inline in [1024, 0] {
            let folder = temporaryCacheFolder()
            defer { try? FileManager.default.removeItem(atPath: folder) }
            let stores = [try Self.open(folder, inline: inline), try Self.open(folder, inline: inline)]
            let counter = Self.key("counter")
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                for index in 0..<80 {
                    let store = stores[index % 2]
                    tasks.addTask {
                        try await store.update(counter) { current in
                            let value = current.map { Int(String(decoding: $0.data, as: UTF8.self))! } ?? 0
                            return Data(String(value + 1).utf8)
                        }
                    }
                }
                try await tasks.waitForAll()
            }
            for store in stores {
                store.purgeMemory()
                #expect(try store.blockingItem(for: counter)?.item.string() == "80", "inline threshold \(inline)")
            }
            #expect(ItemStoreTests.files(folder).count == (inline == 0 ? 1 : 0), "one file at most, no leftovers")
        }
    }

    @Test("update keeps the item's expiry, groups and metadata, drops its validators; nil changes nothing")
    func updateKeepsTheRecord() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try Self.open(folder)
        let expires = Date().addingTimeInterval(3600)
        try await store.store(
            Data("a".utf8), for: Self.key("k"),
            options: StoreOptions(expiry: .date(expires), groups: ["g"], metadata: ["m": "1"], etag: "\"v1\""))
        let updated = try #require(try await store.update(Self.key("k")) { Data(($0!.data) + Data("b".utf8)) })
        #expect(updated.data == Data("ab".utf8))
        #expect(abs(updated.info.expires!.timeIntervalSince(expires)) < 0.001)
        #expect(updated.info.groups == ["g"])
        #expect(updated.info.metadata == ["m": "1"])
        #expect(updated.info.etag == nil, "the server never saw these bytes")

        let unchanged = try await store.update(Self.key("k")) { _ in nil }
        #expect(unchanged?.data == Data("ab".utf8))
        let created = try await store.update(Self.key("new"), options: StoreOptions(groups: ["fresh"])) { current in
            #expect(current == nil)
            return Data("n".utf8)
        }
        #expect(created?.info.groups == ["fresh"])
        store.purgeMemory()
        #expect(try store.blockingItem(for: Self.key("new"))?.item.data == Data("n".utf8))
    }

    @Test("concurrent stores of one key leave memory holding what the disk holds")
    func memoryFollowsTheDisk() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try Self.open(folder, inline: 64)
        let key = Self.key("raced")
        for round in 0..<20 {
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                for writer in 0..<8 {
                    tasks.addTask {
                        try await store.store(Data(repeating: UInt8(writer), count: 100 + round), for: key)
                    }
                }
                tasks.addTask { _ = try await store.removeItem(for: key) }
                try await tasks.waitForAll()
            }
            let inMemory = store.memory.value(for: key)?.data
            let onDisk = try store.disk.read(key)?.data
            #expect(
                inMemory == nil || inMemory == onDisk, "round \(round): memory must not hold a value the disk replaced")
        }
    }
}
