import Foundation
import GRDB
import Synchronization
import Testing

@testable import ItemCache

/// The disk tier's fast paths (a get on its own connection, replacement in place, the group
/// names kept in the row, checkpoints in the background) keep every guarantee of the slow ones.
@Suite("The disk tier's fast paths keep exact totals, groups, whole values and a bounded log")
struct DiskTierFastPathTests {
    static func key(_ name: String) -> CacheKey { ItemStoreTests.key(name) }
    static func bytes(_ count: Int, _ seed: UInt8 = 1) -> Data { ItemStoreTests.bytes(count, seed) }

    /// The `itemGroup` rows of `key`'s item, sorted.
    static func groupRows(_ store: ItemStore, _ key: CacheKey) throws -> [String] {
        try ItemStoreTests.read(store) { db in
            try String.fetchAll(
                db, sql: "SELECT name FROM itemGroup JOIN item ON item.id = itemId WHERE key = ? ORDER BY name",
                arguments: [key.rawValue])
        }
    }

    @Test(
        "a replaced item keeps one row, exact totals and only its new groups, inline or in a file either way",
        arguments: [(100, 300), (100, 5000), (5000, 100), (5000, 6000)])
    func replacementInPlace(sizes: (Int, Int)) async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ItemStoreTests.open(folder)
        try await store.store(Self.bytes(50), for: Self.key("other"), options: StoreOptions(groups: ["a"]))
        try await store.store(
            Self.bytes(sizes.0, 1), for: Self.key("k"), options: StoreOptions(groups: ["a", "b"], metadata: ["m": "1"]))
        try await store.store(
            Self.bytes(sizes.1, 2), for: Self.key("k"), options: StoreOptions(groups: ["c"], contentType: "text/plain"))
        store.purgeMemory()

        let item = try #require(try store.blockingItem(for: Self.key("k"))?.item)
        #expect(item.data == Self.bytes(sizes.1, 2))
        #expect(item.info.groups == ["c"] && item.info.metadata.isEmpty && item.info.contentType == "text/plain")
        #expect(try Self.groupRows(store, Self.key("k")) == ["c"])
        #expect(try store.blockingItems(matching: ItemQuery().group("a")).map(\.key) == [Self.key("other")])
        let statistics = try store.blockingStatistics()
        #expect(statistics.count == 2 && statistics.bytes == Int64(50 + sizes.1))
        #expect(ItemStoreTests.files(folder) == (try ItemStoreTests.indexedFiles(store)))
    }

    @Test("a row without the groups copy (written before it existed) reads its groups from itemGroup")
    func groupsOfOlderRows() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ItemStoreTests.open(folder)
        try await store.store(Self.bytes(10), for: Self.key("k"), options: StoreOptions(groups: ["x", "y"]))
        try await store.store(Self.bytes(10), for: Self.key("none"))
        try await store.disk.pool.write { db in try db.execute(sql: "UPDATE item SET groupNames = NULL") }
        store.purgeMemory()

        #expect(try store.blockingItem(for: Self.key("k"))?.item.info.groups == ["x", "y"])
        #expect(try store.blockingItem(for: Self.key("none"))?.item.info.groups == [])
        #expect(try store.blockingInfo(for: Self.key("k"))?.groups == ["x", "y"])
        // Replacing such a row replaces its groups too.
        try await store.store(Self.bytes(10), for: Self.key("k"), options: StoreOptions(groups: ["z"]))
        #expect(try Self.groupRows(store, Self.key("k")) == ["z"])
    }

    @Test("gets from many threads at once (the reader's connection busy, the pool's used) all return whole values")
    func concurrentGets() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var configuration = CacheConfiguration(folder: folder)
        configuration.inlineThreshold = 1024
        configuration.memory = MemoryLimits(totalBytes: 0) // every get reaches the disk tier
        let store = try ItemStore(configuration: configuration)
        let sizes = [10, 900, 3000, 8000] // inline up to 1,024 bytes, files above
        for (index, size) in sizes.enumerated() {
            try await store.store(Self.bytes(size, UInt8(index)), for: Self.key("k\(index)"))
        }
        let wrong = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for round in 0..<200 {
                let index = (thread + round) % sizes.count
                let found = try? store.blockingItem(for: Self.key("k\(index)"))
                if found?.source != .disk || found?.item.data != Self.bytes(sizes[index], UInt8(index)) {
                    wrong.add(1, ordering: .relaxed)
                }
            }
        }
        #expect(wrong.load(ordering: .relaxed) == 0)
    }

    @Test("reads are recorded by row id and reach the index with the next write")
    func readsAreRecorded() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ItemStoreTests.open(folder)
        try await store.store(Self.bytes(10), for: Self.key("k"))
        let stored = try #require(try store.blockingInfo(for: Self.key("k"))?.accessed)
        try await Task.sleep(for: .milliseconds(20))
        store.purgeMemory()
        _ = try store.blockingItem(for: Self.key("k"))
        #expect(try store.blockingInfo(for: Self.key("k"))?.accessed == stored) // not written yet
        try await store.flush()
        let read = try #require(try store.blockingInfo(for: Self.key("k"))?.accessed)
        #expect(read.timeIntervalSince(stored) >= 0.015)
    }

    @Test(
        "under continuous writes the write-ahead log stays bounded (checkpoints restart it), with or without background checkpoints",
        arguments: [false, true])
    func boundedLog(backgroundHeldUp: Bool) async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ItemStoreTests.open(folder, limit: 1 << 30, inline: 4096)
        // Held up, the background checkpointer never runs: the writers' own checkpoint at the
        // hard limit must keep the log bounded alone.
        let blocker = DispatchSemaphore(value: 0)
        if backgroundHeldUp { store.disk.checkpointer.queue.async { blocker.wait() } }
        defer { blocker.signal() }
        // About 6 pages a commit: some 30,000 pages in all, 7 times the log's hard limit.
        let count = 5_000
        var largest: Int64 = 0
        for index in 0..<count {
            try store.blockingStore(Self.bytes(3000, UInt8(index % 251)), for: Self.key("k\(index)"))
            if index % 100 == 0 { largest = max(largest, Self.logSize(folder)) }
        }
        let bound = Int64(WALCheckpointer.hardLimit) * 2 * (4096 + 24)
        #expect(largest > 0 && largest <= bound, "largest log \(largest) bytes; bound \(bound)")
        #expect(try store.blockingStatistics().count == count)
        store.purgeMemory()
        #expect(try store.blockingItem(for: Self.key("k0"))?.item.data == Self.bytes(3000, 0))
    }

    static func logSize(_ folder: String) -> Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: folder + "/index.sqlite-wal"))?[.size] as? NSNumber)?
            .int64Value ?? 0
    }
}
