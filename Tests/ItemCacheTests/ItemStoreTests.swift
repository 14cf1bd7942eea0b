import FileKit
import Foundation
import GRDB
import Testing
import ToolSupport

@testable import ItemCache

/// A fresh cache folder under the system's temporary folder, removed by the caller.
func temporaryCacheFolder(_ name: String = #function) -> String {
    let folder =
        NSTemporaryDirectory() + "item-cache-\(name.filter(\.isLetter).prefix(24))-\(UUID().uuidString.prefix(8))"
    try? FileManager.default.removeItem(atPath: folder)
    return folder
}

/// The store keeps values on disk within its limit, never serves a torn value, and agrees with
/// its files after any crash.
@Suite("The disk tier: inline and file values, a hard size limit, reconciliation, group writes")
struct ItemStoreTests {
    static func key(_ name: String) -> CacheKey { try! CacheKey.custom(name) }
    static func bytes(_ count: Int, _ seed: UInt8 = 1) -> Data {
        Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) })
    }

    static func open(_ folder: String, limit: Int64 = 1 << 20, inline: Int = 1024, group: GroupWritePolicy? = nil)
        throws -> ItemStore
    {
        var configuration = CacheConfiguration(folder: folder)
        configuration.diskLimit = limit
        configuration.inlineThreshold = inline
        configuration.groupWrites = group
        return try ItemStore(configuration: configuration)
    }

    /// The blob files below the folder.
    static func files(_ folder: String) -> [String] {
        let root = folder + "/blobs"
        var names: [String] = []
        for shard in (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [] {
            for file in (try? FileManager.default.contentsOfDirectory(atPath: root + "/" + shard)) ?? [] {
                names.append(shard + "/" + file)
            }
        }
        return names.sorted()
    }

    static func indexedFiles(_ store: ItemStore) throws -> [String] {
        try read(store) { db in
            try String.fetchAll(db, sql: "SELECT file FROM item WHERE file IS NOT NULL ORDER BY file")
        }
    }

    /// A synchronous read of the index, to look at its rows.
    static func read<T>(_ store: ItemStore, _ body: (Database) throws -> T) throws -> T {
        try store.disk.pool.read(body)
    }

    @Test("small values live inline, big ones in files; both read back whole from a new process's view")
    func inlineAndFileValues() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try Self.open(folder)
        try await store.store(
            Self.bytes(100), for: Self.key("small"),
            options: StoreOptions(groups: ["g"], metadata: ["w": "3"], contentType: "text/plain", etag: "\"e\""))
        try await store.store(Self.bytes(5000), for: Self.key("big"))
        #expect(Self.files(folder).count == 1)
        try await store.close()

        let reopened = try Self.open(folder)
        #expect(reopened.openingRepairs == CacheRepairs())
        let small = try #require(try reopened.blockingItem(for: Self.key("small")))
        #expect(small.source == .disk)
        #expect(small.item.data == Self.bytes(100))
        #expect(small.item.info.groups == ["g"])
        #expect(small.item.info.metadata == ["w": "3"])
        #expect(small.item.info.etag == "\"e\"")
        #expect(small.item.info.contentType == "text/plain")
        #expect(try reopened.blockingItem(for: Self.key("small"))?.source == .memory)
        #expect(try reopened.blockingItem(for: Self.key("big"))?.item.data == Self.bytes(5000))
        #expect(try reopened.blockingStatistics().bytes == 5100)
        #expect(try reopened.blockingStatistics().count == 2)
    }

    @Test("replacing a file value leaves one file; removing leaves none")
    func replaceAndRemove() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try Self.open(folder)
        try await store.store(Self.bytes(5000, 1), for: Self.key("a"))
        try await store.store(Self.bytes(6000, 2), for: Self.key("a"))
        #expect(Self.files(folder).count == 1)
        store.purgeMemory()
        #expect(try store.blockingItem(for: Self.key("a"))?.item.data == Self.bytes(6000, 2))
        #expect(try store.blockingStatistics().bytes == 6000)
        #expect(try await store.removeItem(for: Self.key("a")))
        #expect(Self.files(folder).isEmpty)
        #expect(try store.blockingItem(for: Self.key("a")) == nil)
        #expect(
            try store.blockingStatistics()
                == CacheStatistics(count: 0, bytes: 0, limit: 1 << 20, pinned: 0, pinnedBytes: 0, expired: 0))
    }

    @Test("over the limit, expired items go first, then the least recently used; pinned ones never")
    func evictionOrder() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Room for four 1,000-byte inline values beside the index and log (the limit is the
        // folder's footprint).
        let store = try Self.open(
            folder, limit: DiskTier.limit(forRows: 4 * DiskTier.cost(size: 1000, inline: true, keyBytes: 14)))
        try await store.store(Self.bytes(1000), for: Self.key("pinned"), options: StoreOptions(pinned: true))
        try await store.store(Self.bytes(1000), for: Self.key("old"))
        try await store.store(
            Self.bytes(1000), for: Self.key("expired"),
            options: StoreOptions(expiry: .date(Date(timeIntervalSinceNow: -10))))
        try await Task.sleep(for: .milliseconds(5))
        store.purgeMemory()
        _ = try store.blockingItem(for: Self.key("old")) // "old" is now more recent than "recent"
        try await store.store(Self.bytes(1000), for: Self.key("recent"))
        try await Task.sleep(for: .milliseconds(5))
        store.purgeMemory()
        _ = try store.blockingItem(for: Self.key("old"))
        // 4000 stored; 1000 more: the expired one goes.
        try await store.store(Self.bytes(1000), for: Self.key("new1"))
        store.purgeMemory()
        #expect(try store.blockingItem(for: Self.key("expired")) == nil)
        #expect(try store.blockingStatistics().bytes == 4000)
        // 1000 more: the least recently used unpinned one, "recent" (read before "old" was).
        try await store.store(Self.bytes(1000), for: Self.key("new2"))
        store.purgeMemory()
        #expect(try store.blockingItem(for: Self.key("recent")) == nil)
        #expect(try store.blockingItem(for: Self.key("old")) != nil)
        #expect(try store.blockingItem(for: Self.key("pinned")) != nil)
        #expect(try store.blockingStatistics().bytes <= 4000)
    }

    @Test("a read that memory answers counts for the disk's least recently used, as a disk read does")
    func memoryReadsCountForEviction() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try Self.open(
            folder, limit: DiskTier.limit(forRows: 3 * DiskTier.cost(size: 1000, inline: true, keyBytes: 8)))
        for name in ["a", "b", "c"] {
            try await store.store(Self.bytes(1000), for: Self.key(name))
            try await Task.sleep(for: .milliseconds(5))
        }
        // "a", the oldest write, is read from memory (both ways in), so "b" is now the least recent.
        #expect(try await store.item(for: Self.key("a"))?.source == .memory)
        try await Task.sleep(for: .milliseconds(5))
        #expect(try store.blockingItem(for: Self.key("a"))?.source == .memory)
        try await store.store(Self.bytes(1000), for: Self.key("d"))
        store.purgeMemory()
        #expect(try store.blockingItem(for: Self.key("b")) == nil, "the least recently used goes")
        #expect(try store.blockingItem(for: Self.key("a")) != nil, "a read item stays")
        #expect(try store.blockingItem(for: Self.key("c")) != nil)
        #expect(try store.blockingItem(for: Self.key("d")) != nil)
    }

    @Test("a value that cannot fit fails with tooLarge and changes nothing")
    func tooLarge() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Room for one 3,000-byte file and a small value, not two files.
        let store = try Self.open(
            folder, limit: DiskTier.limit(forRows: DiskTier.cost(size: 3000, inline: false) + 3000, shardFolders: 1))
        try await store.store(Self.bytes(3000), for: Self.key("pinned"), options: StoreOptions(pinned: true))
        try await store.store(Self.bytes(500), for: Self.key("small"))
        await #expect { try await store.store(Self.bytes(5000), for: Self.key("huge")) } throws: {
            ($0 as? ItemCacheError)?.code == .tooLarge
        }
        await #expect {
            try await store.store(Self.bytes(2000), for: Self.key("pinned2"), options: StoreOptions(pinned: true))
        } throws: {
            guard let error = $0 as? ItemCacheError else { return false }
            return error.code == .tooLarge && error.message.contains("pinned items hold 3000 bytes")
        }
        store.purgeMemory()
        #expect(try store.blockingItem(for: Self.key("small"))?.item.data == Self.bytes(500))
        #expect(try store.blockingStatistics().bytes == 3500)
        #expect(Self.files(folder) == (try Self.indexedFiles(store)))
    }

    @Test("opening removes files with no row and rows with no complete file")
    func reconciliation() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try Self.open(folder)
        try await store.store(Self.bytes(5000, 1), for: Self.key("kept"))
        try await store.store(Self.bytes(5000, 2), for: Self.key("cut"))
        try await store.store(Self.bytes(5000, 3), for: Self.key("lost"))
        try await store.close()
        let blobs = folder + "/blobs/"
        let cutFile = try #require(
            try Self.read(store) { db in try String.fetchOne(db, sql: "SELECT file FROM item WHERE key = 'custom:cut'")
            })
        let lostFile = try #require(
            try Self.read(store) { db in try String.fetchOne(db, sql: "SELECT file FROM item WHERE key = 'custom:lost'")
            })
        #expect(truncate(blobs + cutFile, 100) == 0) // a power loss cut it short
        #expect(unlink(blobs + lostFile) == 0) // lost altogether
        // A crash before the commit: a file of the cache's own naming that no row names.
        let orphan = BlobName(newFor: Self.key("never committed")).description
        try FileManager.default.createDirectory(
            atPath: blobs + String(orphan.prefix(2)), withIntermediateDirectories: true)
        try Data("orphan".utf8).write(to: URL(fileURLWithPath: blobs + orphan))
        // Names of another shape are not the cache's: never removed.
        try FileManager.default.createDirectory(atPath: blobs + "zz", withIntermediateDirectories: true)
        try Data("someone's".utf8).write(to: URL(fileURLWithPath: blobs + "zz/notes.txt"))
        try Data("someone's".utf8).write(to: URL(fileURLWithPath: blobs + String(orphan.prefix(2)) + "/notes.txt"))

        let reopened = try Self.open(folder)
        #expect(reopened.openingRepairs == CacheRepairs(orphanFiles: 1, orphanRows: 2))
        #expect(try reopened.blockingItem(for: Self.key("kept"))?.item.data == Self.bytes(5000, 1))
        #expect(try reopened.blockingItem(for: Self.key("cut")) == nil)
        #expect(try reopened.blockingItem(for: Self.key("lost")) == nil)
        #expect(FileManager.default.fileExists(atPath: blobs + "zz/notes.txt"))
        #expect(FileManager.default.fileExists(atPath: blobs + String(orphan.prefix(2)) + "/notes.txt"))
        #expect(!FileManager.default.fileExists(atPath: blobs + orphan))
        #expect(Self.files(folder).filter { !$0.hasSuffix("notes.txt") } == (try Self.indexedFiles(reopened)))
        #expect(try reopened.blockingStatistics().bytes == 5000)
    }

    @Test("a read that finds its file cut short is a miss and drops the row, never a torn value")
    func shortFileIsAMiss() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try Self.open(folder)
        try await store.store(Self.bytes(5000), for: Self.key("a"))
        store.purgeMemory()
        let file = try #require(try Self.indexedFiles(store).first)
        #expect(truncate(folder + "/blobs/" + file, 10) == 0)
        #expect(try store.blockingItem(for: Self.key("a")) == nil)
        #expect(try store.blockingStatistics().count == 0)
    }

    @Test("group writes: pending values read back at once, land together, and close writes the rest")
    func groupWrites() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try Self.open(folder, group: GroupWritePolicy(maxItems: 3, maxDelay: .seconds(3600)))
        try await store.store(Self.bytes(10, 1), for: Self.key("a"))
        try await store.store(Self.bytes(5000, 2), for: Self.key("b"))
        #expect(try store.blockingItem(for: Self.key("a"))?.item.data == Self.bytes(10, 1))
        #expect(try store.blockingItem(for: Self.key("b"))?.item.data == Self.bytes(5000, 2))
        #expect(try store.blockingStatistics().count == 0)
        try await store.store(Self.bytes(20, 3), for: Self.key("c")) // the third fills the group
        #expect(try store.blockingStatistics().count == 3)
        try await store.store(Self.bytes(30, 4), for: Self.key("d"))
        #expect(try store.blockingStatistics().count == 3)
        try await store.close()
        #expect(try store.blockingStatistics().count == 4)
        await #expect { try await store.store(Self.bytes(1), for: Self.key("e")) } throws: {
            ($0 as? ItemCacheError)?.code == .closed
        }
    }

    @Test("a group write waits at most its delay")
    func groupWriteDelay() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try Self.open(folder, group: GroupWritePolicy(maxItems: 1000, maxDelay: .milliseconds(50)))
        try await store.store(Self.bytes(10), for: Self.key("a"))
        var count = 0
        for _ in 0..<200 where count == 0 {
            try await Task.sleep(for: .milliseconds(20))
            count = try store.blockingStatistics().count
        }
        #expect(count == 1)
    }

    /// The timer's group write has no caller to throw to. It used to drop the group and its
    /// error, and the next flush, finding nothing pending, said every store was on disk.
    @Test("a failed group write started by its delay is thrown by the next flush, once")
    func failedTimedGroupWriteIsReported() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // 1 s: "b" joins "a"'s group even if this thread waits a while between the two stores.
        let store = try Self.open(folder, group: GroupWritePolicy(maxItems: 1000, maxDelay: .seconds(1)))
        // A pinned value takes most of the 1 MiB limit; "b" fits alone, not beside it: the
        // group's one transaction fails, "a" with it.
        try await store.store(Data(count: 600_000), for: Self.key("pinned"), options: StoreOptions(pinned: true))
        try await store.flush()
        try await store.store(Self.bytes(2000, 1), for: Self.key("a"))
        try await store.store(Data(count: 400_000), for: Self.key("b"))
        var pending = true
        for _ in 0..<500 where pending {
            try await Task.sleep(for: .milliseconds(20))
            pending = try await store.info(for: Self.key("a")) != nil
        }
        #expect(!pending, "the timer's group write did not run")
        await #expect { try await store.flush() } throws: { error in
            guard let error = error as? ItemCacheError else { return false }
            return error.code == .tooLarge && error.message.contains("its 2 stores are not on disk")
        }
        try await store.flush()
        store.purgeMemory()
        #expect(try store.blockingItem(for: Self.key("a")) == nil)
        #expect(try store.blockingStatistics().count == 1, "only the pinned value")
    }

    /// A value the limit cannot hold even when empty fails its own store at once, with group
    /// writes as without: queued, it failed the group's transaction at the flush and took every
    /// other pending store with it, while its own store had returned as if kept.
    @Test("with group writes, a value too big to keep fails its own store and the others land")
    func tooLargeInAGroupFailsAlone() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try Self.open(folder, group: GroupWritePolicy(maxItems: 1000, maxDelay: .seconds(60)))
        try await store.store(Self.bytes(2000, 1), for: Self.key("a"))
        await #expect { try await store.store(Data(count: 4 << 20), for: Self.key("huge")) } throws: {
            ($0 as? ItemCacheError)?.code == .tooLarge
        }
        try await store.store(Self.bytes(3000, 2), for: Self.key("c"))
        try await store.flush()
        store.purgeMemory()
        #expect(try store.blockingItem(for: Self.key("a"))?.item.data == Self.bytes(2000, 1))
        #expect(try store.blockingItem(for: Self.key("c"))?.item.data == Self.bytes(3000, 2))
        #expect(try store.blockingItem(for: Self.key("huge")) == nil)
    }

    @Test("don't-store returns the value and keeps nothing")
    func dontStore() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try Self.open(folder)
        let item = try await store.store(Self.bytes(10), for: Self.key("a"), options: StoreOptions(expiry: .dontStore))
        #expect(item.data == Self.bytes(10))
        #expect(try store.blockingItem(for: Self.key("a")) == nil)
    }

    /// Random stores (inline, file, pinned, expired), reads, removes and reopenings: after each
    /// step the total is at most the limit, the stats row equals the rows' sum, and the files
    /// are exactly the ones the index names.
    @Test(
        "property: after every operation usage ≤ limit and the index matches the files", arguments: [1 as UInt64, 2, 3])
    func sizeLimitProperty(seed: UInt64) async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var random = SplitMix64(seed: seed)
        let limit: Int64 = 20_000
        var store = try Self.open(folder, limit: limit)
        var pinnedBytes: Int64 = 0
        for step in 0..<300 {
            let name = "k\(random.next() % 40)"
            switch random.next() % 10 {
            case 0...5:
                let size = Int(random.next() % 6000)
                let pin = random.next() % 10 == 0 && pinnedBytes + Int64(size) < limit / 2
                let expiry: Expiry? = random.next() % 4 == 0 ? .date(Date(timeIntervalSinceNow: -1)) : nil
                do {
                    try await store.store(
                        Self.bytes(size, UInt8(step % 256)), for: Self.key(name),
                        options: StoreOptions(expiry: expiry, pinned: pin))
                } catch {
                    // Only when pinned items leave no room.
                    #expect(error.code == .tooLarge, "step \(step): \(error)")
                }
            case 6, 7:
                _ = try store.blockingItem(for: Self.key(name))
            case 8:
                try await store.removeItem(for: Self.key(name))
            default:
                try await store.close()
                store = try Self.open(folder, limit: limit)
                #expect(store.openingRepairs == CacheRepairs())
            }
            pinnedBytes = try store.blockingStatistics().pinnedBytes
            let statistics = try store.blockingStatistics()
            let sum = try Self.read(store) { db in
                try Int64.fetchOne(db, sql: "SELECT coalesce(sum(size), 0) FROM item")!
            }
            #expect(statistics.bytes <= limit, "step \(step)")
            #expect(statistics.bytes == sum, "step \(step)")
            #expect(Self.files(folder) == (try Self.indexedFiles(store)), "step \(step)")
        }
    }
}
