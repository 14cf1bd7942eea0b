import Foundation
import GRDB
import Testing
import ToolSupport
import Transport

@testable import ItemCache

/// The limit bounds the folder's footprint: value files, index and log together, measured as
/// the file system counts it (allocated blocks), while open and after.
@Suite("The disk limit is the folder's footprint")
struct FootprintTests {
    /// The allocated bytes of everything below `folder` (as `du` counts them).
    static func du(_ folder: String) -> Int64 {
        var total: Int64 = 0
        var status = stat()
        if lstat(folder, &status) == 0 { total += Int64(status.st_blocks) * 512 }
        let enumerator = FileManager.default.enumerator(atPath: folder)
        while let relative = enumerator?.nextObject() as? String {
            if lstat(folder + "/" + relative, &status) == 0 { total += Int64(status.st_blocks) * 512 }
        }
        return total
    }

    @Test(
        "1,000,000 bytes: 300 writes of 1 B to 100 KB values from two stores keep the folder under it, open and closed",
        arguments: [16 << 10, 1 << 20])
    func folderStaysUnderTheLimit(inline: Int) async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let limit: Int64 = 1_000_000
        var stores: [ItemStore] = []
        for _ in 0..<2 { stores.append(try ItemStoreTests.open(folder, limit: limit, inline: inline)) }
        var random = SplitMix64(seed: UInt64(inline))
        var worst: Int64 = 0
        for index in 0..<300 {
            let size = Int(random.next() % 100_000) + 1
            try await stores[index % 2].store(
                Data(repeating: UInt8(index & 0xFF), count: size), for: ItemStoreTests.key("k\(index % 120)"))
            if index % 25 == 0 { worst = max(worst, Self.du(folder)) }
        }
        worst = max(worst, Self.du(folder))
        #expect(worst <= limit, "the folder held \(worst) bytes under a limit of \(limit)")
        #expect(stores[0].disk.measuredFootprint() <= limit)
        let kept = try stores[0].blockingStatistics()
        #expect(kept.count > 3, "a limit that keeps almost nothing is no cache: \(kept)")
        for store in stores { try await store.close() }
        stores.removeAll()
        let breakdown = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).map {
            "\($0)=\(Self.du(folder + "/" + $0))"
        }
        #expect(Self.du(folder) <= limit, "\(breakdown)")
    }

    /// Fetched items keep more than their value: an HTTP response record, validators, metadata,
    /// long keys. Many small ones count all of it: a row counted as its value plus a flat 256
    /// bytes let 3,000 of these take the folder to 13.7 MB under its 1 MB limit (0.88 MB now,
    /// 161 kept).
    /// A fresh cache has no shard folder; its first value file makes one, which the reserve then
    /// holds. A value that fitted only without it was written and linked, then refused by
    /// eviction ("cannot hold this write"); it is now refused before a byte is written.
    @Test func aFreshCacheCountsTheFirstValueFilesFolder() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let limit: Int64 = 1 << 20
        let store = try ItemStoreTests.open(folder, limit: limit, inline: 16)
        let key = try CacheKey.custom("first")
        let fixed = DiskTier.cost(size: 0, inline: false, keyBytes: Int64(key.rawValue.utf8.count))
        let without = DiskTier.rowBudget(for: limit, shardFolders: 0)
        let size = (without - fixed) / DiskTier.block * DiskTier.block
        #expect(
            DiskTier.cost(size: size, inline: false, keyBytes: Int64(key.rawValue.utf8.count)) > without
                - DiskTier.block)
        let refused = await #expect(throws: ItemCacheError.self) {
            try await store.store(Data(count: Int(size)), for: key)
        }
        #expect(
            refused?.code == .tooLarge && refused?.message.contains("beside its index and log") == true,
            "\(String(describing: refused))")
        #expect(ItemStoreTests.files(folder).isEmpty)
        // A block less fits, in its folder.
        try await store.store(Data(count: Int(size - DiskTier.block)), for: key)
        #expect(ItemStoreTests.files(folder).count == 1)
        try await store.close()
    }

    /// What a fetcher may stage is what a row can then keep: a file that passes the raw limit
    /// but not the row's cost was copied, then refused.
    @Test(arguments: [0, 4096, 100_000, 17_401_695, 503_218_176] as [Int64])
    func theLargestFileValueFitsItsRow(budget: Int64) throws {
        for key in [
            try CacheKey.custom("k"),
            try CacheKey(url: URL(string: "https://h/" + String(repeating: "p", count: 3000))!),
        ] {
            let largest = DiskTier.largestFileValue(budget: budget, key: key)
            #expect(largest >= 0 && largest % DiskTier.block == 0)
            let cost = DiskTier.cost(
                size: largest, inline: false, keptBytes: 1000, keyBytes: Int64(key.rawValue.utf8.count),
                urlBytes: Int64(key.url?.utf8.count ?? 0))
            if largest > 0 { #expect(cost <= budget, "\(budget): \(largest) costs \(cost)") }
            // Within three blocks of the budget: not much is refused that would fit.
            let bigger = DiskTier.cost(
                size: largest + 3 * DiskTier.block, inline: false, keyBytes: Int64(key.rawValue.utf8.count),
                urlBytes: Int64(key.url?.utf8.count ?? 0))
            #expect(bigger > budget, "\(budget): \(largest) leaves more than three blocks unused")
        }
    }

    @Test("3,000 small items with response records, validators and long URLs keep the folder under 1,000,000 bytes")
    func rowsCountWhatTheyKeep() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let limit: Int64 = 1_000_000
        let store = try ItemStoreTests.open(folder, limit: limit, inline: 16 << 10)
        let headers = (0..<20).map { HTTPHeaderField(name: "X-Header-\($0)", value: String(repeating: "v", count: 90)) }
        var worst: Int64 = 0
        let path = String(repeating: "p", count: 180)
        for index in 0..<3_000 {
            let url = URL(string: "https://cdn.example.com/\(path)/\(index).json")!
            let options = StoreOptions(
                metadata: ["source": String(repeating: "m", count: 200)], contentType: "application/json",
                etag: "\"\(String(repeating: "e", count: 60))\"", lastModified: "Mon, 30 Nov 2026 00:00:00 GMT",
                response: HTTPResponseRecord(status: 200, headerFields: headers, born: Date()))
            try await store.store(Data("{\"i\":\(index)}".utf8), for: try CacheKey(url: url), options: options)
            if index % 250 == 0 { worst = max(worst, Self.du(folder)) }
        }
        worst = max(worst, Self.du(folder))
        #expect(worst <= limit, "the folder held \(worst) bytes under a limit of \(limit)")
        let kept = try store.blockingStatistics()
        #expect(kept.count > 50, "a limit that keeps almost nothing is no cache: \(kept)")
        let breakdown = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).map {
            "\($0)=\(Self.du(folder + "/" + $0))"
        }
        try await store.close()
        #expect(Self.du(folder) <= limit, "\(kept) \(breakdown)")
    }

    /// The cost a write is checked against and the cost the index's triggers count are one
    /// formula, in Swift and in SQL; a refresh that changes the response record keeps the total.
    @Test("a row's footprint is the same in Swift, in its SQL and in the stats total, through a refresh")
    func costIsOneFormula() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ItemStoreTests.open(folder, limit: 1 << 30, inline: 16 << 10)
        let longURL = URL(string: "https://cdn.example.com/" + String(repeating: "u", count: 300))!
        let record = HTTPResponseRecord(
            status: 200, headerFields: [HTTPHeaderField(name: "Cache-Control", value: "max-age=60")], born: Date())
        let cases: [(String, CacheKey, Int, StoreOptions)] = [
            ("tiny inline", ItemStoreTests.key("t"), 10, StoreOptions()),
            ("a third of a page", ItemStoreTests.key("third"), 1_100, StoreOptions()),
            ("a whole page", ItemStoreTests.key("page"), 2_500, StoreOptions()),
            ("over a page, inline", ItemStoreTests.key("big-inline"), 9_000, StoreOptions()),
            ("a file", ItemStoreTests.key("file"), 70_000, StoreOptions(groups: ["g1", "thumbs"])),
            (
                "everything kept", try CacheKey(url: longURL), 500,
                StoreOptions(
                    groups: ["a"], metadata: ["k": "v", "long": String(repeating: "m", count: 900)],
                    contentType: "text/plain", etag: "\"e\"", lastModified: "Mon, 30 Nov 2026 00:00:00 GMT",
                    response: record)
            ),
        ]
        for (why, key, size, options) in cases {
            let stored = try await store.store(Data(count: size), for: key, options: options)
            let write = PendingWrite(key: key, data: Data(count: size), info: stored.info)
            let inSwift = DiskTier.cost(of: write, inline: size <= 16 << 10)
            let inSQL = try await store.disk.pool.read { db in
                try Int64.fetchOne(
                    db, sql: "SELECT \(DiskTier.costSQL("item")) FROM item WHERE key = ?", arguments: [key.rawValue])
            }
            #expect(inSwift == inSQL, "\(why)")
            #expect(inSwift >= Int64(size), "\(why)")
        }
        func totals() throws -> (Int64?, Int64?) {
            try store.disk.pool.read { db in
                (
                    try Int64.fetchOne(db, sql: "SELECT cost FROM stats WHERE id = 1"),
                    try Int64.fetchOne(db, sql: "SELECT sum(\(DiskTier.costSQL("item"))) FROM item")
                )
            }
        }
        var (counted, summed) = try totals()
        #expect(counted != nil && counted == summed)
        let bigger = HTTPResponseRecord(
            status: 200,
            headerFields: (0..<30).map { HTTPHeaderField(name: "X-\($0)", value: String(repeating: "r", count: 100)) },
            born: Date())
        _ = try store.disk.refresh(
            ItemStoreTests.key("t"), expires: nil, mustRevalidate: false, etag: nil, lastModified: nil, response: bigger
        )
        (counted, summed) = try totals()
        #expect(counted == summed, "a refresh that grew the response record left the total behind")
    }

    /// An index of the previous version (v9, rows counted as value + 256 bytes) is counted
    /// again when it opens, and its triggers count the new way from then on.
    @Test("an index made before v10-row-footprint is counted again when it opens")
    func olderIndexIsCountedAgain() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        chmod(folder, 0o700)
        let response = String(repeating: "h", count: 3_000)
        do {
            let queue = try DatabaseQueue(path: folder + "/index.sqlite")
            try DiskTier.migrator.migrate(queue, upTo: "v9-counters")
            try await queue.write { db in
                for index in 0..<5 {
                    try db.execute(
                        sql: """
                            INSERT INTO item (key, context, url, size, created, accessed, inlineValue, response)
                            VALUES (?, '', ?, 10, 0, 0, zeroblob(10), ?)
                            """,
                        arguments: ["https://a.example/\(index)", "https://a.example/\(index)", response])
                }
            }
            let old = try await queue.read { db in try Int64.fetchOne(db, sql: "SELECT cost FROM stats") }
            #expect(old == Int64(5 * (10 + 256)), "v9 counted value + 256")
            try queue.close()
        }
        let store = try ItemStoreTests.open(folder, limit: 1 << 30)
        let (counted, summed) = try await store.disk.pool.read { db in
            (
                try Int64.fetchOne(db, sql: "SELECT cost FROM stats WHERE id = 1"),
                try Int64.fetchOne(db, sql: "SELECT sum(\(DiskTier.costSQL("item"))) FROM item")
            )
        }
        #expect(counted == summed)
        #expect((counted ?? 0) >= 5 * 3_000, "each row's 3,000-byte response record is counted")
        try await store.store(Data(count: 10), for: ItemStoreTests.key("new"))
        let after = try await store.disk.pool.read { db in
            (
                try Int64.fetchOne(db, sql: "SELECT cost FROM stats WHERE id = 1"),
                try Int64.fetchOne(db, sql: "SELECT sum(\(DiskTier.costSQL("item"))) FROM item")
            )
        }
        #expect(after.0 == after.1, "the new triggers count a new row the same way")
    }

    /// A large cache's log is restarted, not emptied, when full: it keeps its blocks for the
    /// next commits, and still never grows past its budget and one commit.
    @Test func aLargeCachesLogIsReusedAndStaysWithinItsBudget() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let limit: Int64 = 1 << 30
        let budget = DiskTier.walBudget(for: limit)
        let store = try ItemStoreTests.open(folder, limit: limit, inline: 16 << 10)
        // Background checkpoints held up: one that copies the whole log between two slow
        // writes (a loaded machine: a clean-clone run saw the log peak at 82% of its budget)
        // lets SQLite start the log over early, and the log would never fill. The writers'
        // own checkpoint at the budget is what this test measures.
        let blocker = DispatchSemaphore(value: 0)
        store.disk.checkpointer.queue.async { blocker.wait() }
        var largest: Int64 = 0
        var smallestAfterFull = Int64.max
        // About 9 log pages a 4 KiB set: 2,400 sets write five budgets' worth of log.
        for index in 0..<2_400 {
            try await store.store(
                Data(repeating: UInt8(index & 0xFF), count: 4096), for: ItemStoreTests.key("k\(index)"))
            var status = stat()
            guard lstat(folder + "/index.sqlite-wal", &status) == 0 else { continue }
            largest = max(largest, Int64(status.st_size))
            if largest >= budget * 9 / 10 { smallestAfterFull = min(smallestAfterFull, Int64(status.st_size)) }
        }
        #expect(largest >= budget * 9 / 10, "the log reached its budget (\(largest) of \(budget) bytes)")
        #expect(largest <= budget + (1 << 20), "the log stayed within its budget and a commit: \(largest) bytes")
        #expect(smallestAfterFull >= budget / 2, "the full log was restarted in place, never emptied")
        blocker.signal()
        try await store.close()
    }

    /// A shard folder goes with its last file: a small cache of file-sized values does not end
    /// with 256 folders (1 MiB of its limit), and nothing is lost to a folder removed while
    /// another store writes into it.
    @Test func emptiedShardFoldersGo() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let stores = [
            try ItemStoreTests.open(folder, limit: 1_000_000, inline: 1024),
            try ItemStoreTests.open(folder, limit: 1_000_000, inline: 1024),
        ]
        // Two stores write at once under a limit that keeps about 30 of these, so files and
        // their folders come and go all the time (600 keys would leave about 230 folders).
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (which, store) in stores.enumerated() {
                group.addTask {
                    for index in 0..<300 {
                        let key = ItemStoreTests.key("k\(which)-\(index)")
                        try await store.store(Data(repeating: UInt8(index & 0xFF), count: 20_000), for: key)
                    }
                }
            }
            try await group.waitForAll()
        }
        let files = ItemStoreTests.files(folder)
        let shards = try FileManager.default.contentsOfDirectory(atPath: folder + "/blobs")
        #expect(!files.isEmpty)
        #expect(shards.count <= files.count, "\(shards.count) shard folders for \(files.count) files")
        #expect(stores[0].disk.blobs.shardFolderCount() == shards.count)
        #expect(files == (try ItemStoreTests.indexedFiles(stores[0])), "every file has its row, every row its file")
        for store in stores { store.purgeMemory() }
        for which in 0..<2 {
            for index in 280..<300 {
                let found = try await stores[1 - which].item(for: ItemStoreTests.key("k\(which)-\(index)"))
                if let found { #expect(found.item.data == Data(repeating: UInt8(index & 0xFF), count: 20_000)) }
            }
        }
        // Removing everything leaves no shard folder.
        _ = try await stores[0].removeItems(matching: ItemQuery())
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder + "/blobs").isEmpty)
        for store in stores { try await store.close() }
    }

    /// Empty shard folders an earlier version left go when the cache opens; a folder of any
    /// other name stays.
    @Test func openingRemovesEmptyShardFolders() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try await ItemStoreTests.open(folder).close()
        for name in ["00", "ab", "ff", "notashard"] {
            try FileManager.default.createDirectory(
                atPath: folder + "/blobs/" + name, withIntermediateDirectories: false)
        }
        let store = try ItemStoreTests.open(folder)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder + "/blobs") == ["notashard"])
        try await store.close()
    }

    @Test("a lower limit evicts at once, when the store opens with it")
    func lowerLimitEvictsAtOnce() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ItemStoreTests.open(folder, limit: 2_000_000, inline: 16)
        for index in 0..<9 { try await store.store(Data(count: 100_000), for: ItemStoreTests.key("k\(index)")) }
        #expect(try store.blockingStatistics().bytes == 900_000)
        try await store.close()
        let lowered = try ItemStoreTests.open(folder, limit: 300_000, inline: 16)
        let statistics = try lowered.blockingStatistics()
        #expect(statistics.limit == 300_000)
        #expect(statistics.bytes <= 300_000 && statistics.bytes > 0)
        #expect(Self.du(folder) <= 300_000, "files of evicted items go at once")
    }
}

/// A body the cache cannot keep is delivered, not staged in the cache folder.
@Suite("Values too big to keep")
struct TooBigToKeepTests {
    @Test(
        "a declared length over what the folder can keep is read into memory, delivered with storeError, and not kept")
    func tooBigIsDeliveredNotKept() async throws {
        let fixture = try await LoaderFixture { $0.diskLimit = 300_000 }
        defer { Task { await fixture.close() } }
        let body = String(repeating: "v", count: 250_000)
        try fixture.publish("big.txt", body)
        let loaded = try await fixture.loader.item(for: fixture.url("big.txt"))
        #expect(loaded.data == Data(body.utf8))
        #expect(loaded.storeError?.code == .tooLarge)
        #expect(try fixture.store.blockingStatistics().count == 0)
        // The staged download was refused at its headers, then the body came into memory.
        let requests = fixture.server.requests().filter { $0.path == "/big.txt" }
        #expect(requests.count == 2)
    }
}
