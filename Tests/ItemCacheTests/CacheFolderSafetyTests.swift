import FileKit
import Foundation
import GRDB
import Testing

@testable import ItemCache

/// The cache folder attacked the way a hostile neighbour on a shared disk or a damaged disk
/// would: planted links, hostile index rows, other bytes, files of the wrong kind, folders that
/// are not caches or not safe. Nothing outside the folder is read, written or deleted, and no
/// wrong byte is served.
@Suite("The cache folder: planted links, hostile rows, damaged values, unsafe folders")
struct CacheFolderSafetyTests {
    static func key(_ name: String) -> CacheKey { try! CacheKey.custom(name) }
    static func bytes(_ count: Int, _ seed: UInt8 = 1) -> Data { ItemStoreTests.bytes(count, seed) }

    /// A folder outside the cache holding a secret, as a victim's documents would.
    struct Victim {
        let folder: String
        let secret: Data
        var file: String { folder + "/id_ed25519" }

        init(size: Int) throws {
            folder = temporaryCacheFolder("victim")
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            secret = Data((0..<size).map { _ in UInt8.random(in: 0x20...0x7E) })
            try secret.write(to: URL(fileURLWithPath: file))
        }

        /// Every file of the folder with its bytes.
        func contents() throws -> [String: Data] {
            var result: [String: Data] = [:]
            for name in try FileManager.default.contentsOfDirectory(atPath: folder) {
                result[name] = try Data(contentsOf: URL(fileURLWithPath: folder + "/" + name))
            }
            return result
        }
    }

    /// The row of `key`, changed by `sql` (with `?` the key) as a hostile process sharing the
    /// folder could.
    static func tamper(_ folder: String, _ sql: String, _ arguments: StatementArguments) throws {
        let queue = try DatabaseQueue(path: folder + "/index.sqlite")
        try queue.writeWithoutTransaction { db in try db.execute(sql: sql, arguments: arguments) }
        try queue.close()
    }

    static func file(of key: CacheKey, in store: ItemStore) throws -> String? {
        try ItemStoreTests.read(store) { db in
            try String.fetchOne(db, sql: "SELECT file FROM item WHERE key = ?", arguments: [key.rawValue])
        }
    }

    @Test(
        "shard folders planted as symlinks to someone's documents: nothing there is deleted or written, values still work"
    )
    func plantedShardLinks() async throws {
        let folder = temporaryCacheFolder()
        let victim = try Victim(size: 20_000)
        defer {
            try? FileManager.default.removeItem(atPath: folder)
            try? FileManager.default.removeItem(atPath: victim.folder)
        }
        // Files in the victim's folder named as the cache names blobs, so a walk through the
        // link would take them for orphans.
        let lookalike = BlobName(newFor: Self.key("x")).leaf
        try Data("mine".utf8).write(to: URL(fileURLWithPath: victim.folder + "/" + lookalike))
        let before = try victim.contents()
        do {
            let store = try ItemStoreTests.open(folder, inline: 16)
            try await store.store(Self.bytes(100, 1), for: Self.key("warm"))
            try await store.close()
        }
        // Every shard becomes a link to the victim's folder.
        for shard in 0..<256 {
            let path = folder + "/blobs/" + BlobName.shardName(shard)
            try? FileManager.default.removeItem(atPath: path)
            try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: victim.folder)
        }
        let store = try ItemStoreTests.open(folder, inline: 16) // reconciles
        for index in 0..<20 { try await store.store(Self.bytes(3000, UInt8(index)), for: Self.key("k\(index)")) }
        for index in 0..<20 {
            #expect(try store.blockingItem(for: Self.key("k\(index)"))?.item.data == Self.bytes(3000, UInt8(index)))
        }
        _ = try await store.removeItems(matching: ItemQuery())
        try await store.close()
        _ = try ItemStoreTests.open(folder, inline: 16)
        #expect(try victim.contents() == before)
    }

    @Test("an index row naming ../../victim/id_ed25519: never served, never unlinked, by get, remove, open or eviction")
    func hostileFileNames() async throws {
        let folder = temporaryCacheFolder()
        let victim = try Victim(size: 5000)
        defer {
            try? FileManager.default.removeItem(atPath: folder)
            try? FileManager.default.removeItem(atPath: victim.folder)
        }
        let relative = "../../" + (victim.folder as NSString).lastPathComponent + "/id_ed25519"
        let absolute = victim.file
        for name in [relative, absolute, "00/../../" + (victim.folder as NSString).lastPathComponent + "/id_ed25519"] {
            // Room for two 5,000-byte files, not three.
            let shards = Set(["a", "b", "c"].map { BlobName(newFor: Self.key($0)).shard }).count
            let limit = DiskTier.limit(
                forRows: 2 * DiskTier.cost(size: 5000, inline: false) + 4000, shardFolders: shards)
            let store = try ItemStoreTests.open(folder, limit: limit, inline: 16)
            try await store.store(Self.bytes(5000, 1), for: Self.key("a"))
            try await store.store(Self.bytes(5000, 2), for: Self.key("b"))
            try await store.close()
            try Self.tamper(folder, "UPDATE item SET file = ?, checksum = NULL WHERE key = 'custom:a'", [name])
            try Self.tamper(folder, "UPDATE item SET file = ?, checksum = NULL WHERE key = 'custom:b'", [name])
            // The get path, in a process that had it open before the edit.
            #expect(try store.blockingItem(for: Self.key("a"))?.item.data != victim.secret)
            // Remove, and eviction by a write that needs the room.
            _ = try await store.removeItem(for: Self.key("a"))
            try await store.store(Self.bytes(9000, 3), for: Self.key("c")) // evicts a and b
            // Opening again (reconciliation).
            let reopened = try ItemStoreTests.open(folder, limit: limit, inline: 16)
            #expect(try reopened.blockingItem(for: Self.key("b")) == nil)
            #expect(try Data(contentsOf: URL(fileURLWithPath: victim.file)) == victim.secret, "\(name)")
            _ = try await reopened.removeItems(matching: ItemQuery())
        }
    }

    @Test(
        "index values of the wrong type (text for a number, a blob for text): every call answers, none stops the process",
        arguments: [
            "UPDATE item SET size = 'big', created = X'00', expires = 'later', mustRevalidate = 'maybe', pinned = 'p', etag = 5 WHERE key = 'custom:a'",
            "UPDATE item SET file = 7, context = 3, url = X'04', metadata = 9 WHERE key = 'custom:b'",
            "UPDATE stats SET count = 'many', bytes = X'01', diskLimit = 'huge'",
            "INSERT INTO originFailure (origin, failures, at, retryAt, message, status) VALUES ('http://x', 'n', 0, 'later', 5, 'teapot')",
            "INSERT INTO fetchFailure (key, at, code, message) VALUES ('custom:a', 1e18, 5, X'06')",
            "INSERT INTO fetchFailure (key, at, code, message) VALUES (char(1) || 'unstorable custom:a', 'soon', 5, 6)",
            // Counts no version writes: `1 + Int.max` stopped the process at the next failure.
            "INSERT INTO originFailure (origin, failures, at, retryAt, message, status) VALUES ('http://x', 9223372036854775807, 0, 0, 'm', 503)",
            "INSERT INTO originFailure (origin, failures, at, retryAt, message, status) VALUES ('http://x', 1e300, 0, 0, 'm', 503)",
            "INSERT INTO counter (name, value) VALUES ('made', 'many'), ('hits', 1e300)",
            // Two sizes whose sum overflows a 64-bit integer: SQLite's sum() refused every count.
            "UPDATE item SET size = 4611686018427387904",
        ])
    func wrongTypesInTheIndex(sql: String) async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Room for four 5,000-byte values: the writes below evict.
        let names = ["a", "b"] + (0..<12).map { "c\($0)" }
        let shards = Set(names.map { BlobName(newFor: Self.key($0)).shard }).count
        let limit = DiskTier.limit(forRows: 4 * DiskTier.cost(size: 5000, inline: false) + 4000, shardFolders: shards)
        let store = try ItemStoreTests.open(folder, limit: limit, inline: 16)
        try await store.store(Self.bytes(5000, 1), for: Self.key("a"))
        try await store.store(Self.bytes(5000, 2), for: Self.key("b"))
        try await store.close()
        try Self.tamper(folder, sql, [])
        // Opening reconciles; then every read, query, count, write and eviction answers.
        let reopened = try ItemStoreTests.open(folder, limit: limit, inline: 16)
        for name in ["a", "b"] {
            if let item = try reopened.blockingItem(for: Self.key(name))?.item {
                #expect(item.data == Self.bytes(5000, name == "a" ? 1 : 2), "never other bytes")
            }
            _ = try await reopened.info(for: Self.key(name))
        }
        _ = try await reopened.items(matching: ItemQuery())
        _ = try await reopened.statistics()
        _ = await reopened.fetchFailure(for: Self.key("a"), since: Date(timeIntervalSince1970: 0))
        if sql.contains("unstorable") { #expect(await reopened.unstorableMark(for: Self.key("a")) == nil) }
        _ = await reopened.originGate("http://x", now: Date(), backoff: OriginBackoff())
        _ = await reopened.recordOriginFailure(
            "http://x", message: "down", status: 503, now: Date(), backoff: OriginBackoff(), retryAfter: nil)
        try await reopened.addToCounters(["made": 1, "hits": 1])
        for index in 0..<12 { try await reopened.store(Self.bytes(5000, UInt8(index + 3)), for: Self.key("c\(index)")) }
        try await reopened.store(Self.bytes(5000, 99), for: Self.key("a"))
        #expect(try reopened.blockingItem(for: Self.key("a"))?.item.data == Self.bytes(5000, 99))
        _ = try await reopened.removeItems(matching: ItemQuery())
        #expect(try await reopened.statistics().count == 0)
        try await reopened.close()
    }

    @Test("a blob replaced by a symlink to a same-size secret is not served; the secret stays")
    func blobReplacedBySymlink() async throws {
        let folder = temporaryCacheFolder()
        let victim = try Victim(size: 5000)
        defer {
            try? FileManager.default.removeItem(atPath: folder)
            try? FileManager.default.removeItem(atPath: victim.folder)
        }
        var store = try ItemStoreTests.open(folder, inline: 16)
        try await store.store(Self.bytes(5000), for: Self.key("a"))
        let file = try #require(try Self.file(of: Self.key("a"), in: store))
        try await store.close()
        try FileManager.default.removeItem(atPath: folder + "/blobs/" + file)
        try FileManager.default.createSymbolicLink(atPath: folder + "/blobs/" + file, withDestinationPath: victim.file)
        for _ in 0..<2 {
            store = try ItemStoreTests.open(folder, inline: 16)
            #expect(try store.blockingItem(for: Self.key("a")) == nil)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: victim.file)) == victim.secret)
    }

    @Test(
        "other bytes than stored, in a blob or inline, are a miss and counted, never served", arguments: [16, 1 << 20])
    func damagedValues(inline: Int) async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ItemStoreTests.open(folder, inline: inline)
        let value = Self.bytes(100_000)
        try await store.store(value, for: Self.key("a"))
        try await store.store(Self.bytes(100_000, 9), for: Self.key("b"))
        if let file = try Self.file(of: Self.key("a"), in: store) {
            // 4 KiB of zeros in the middle of the file, its size unchanged.
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: folder + "/blobs/" + file))
            try handle.seek(toOffset: 40_000)
            handle.write(Data(count: 4096))
            try handle.close()
        } else {
            var damaged = value
            damaged.replaceSubrange(40_000..<44_096, with: Data(count: 4096))
            try Self.tamper(folder, "UPDATE item SET inlineValue = ? WHERE key = 'custom:a'", [damaged])
        }
        store.purgeMemory()
        #expect(try store.blockingItem(for: Self.key("a")) == nil)
        #expect(try store.blockingItem(for: Self.key("b"))?.item.data == Self.bytes(100_000, 9))
        #expect(try store.blockingStatistics().count == 1)
        // The key works again: a new value is stored and served.
        try await store.store(value, for: Self.key("a"))
        store.purgeMemory()
        #expect(try store.blockingItem(for: Self.key("a"))?.item.data == value)
    }

    @Test("a blob replaced by a folder, a FIFO or a socket is a miss (no hang, no wedge), and the key stores again")
    func blobsOfTheWrongKind() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ItemStoreTests.open(folder, inline: 16)
        for kind in ["folder", "fifo"] {
            let key = Self.key(kind)
            try await store.store(Self.bytes(5000), for: key)
            let path = folder + "/blobs/" + (try #require(try Self.file(of: key, in: store)))
            try FileManager.default.removeItem(atPath: path)
            if kind == "folder" {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            } else {
                #expect(mkfifo(path, 0o600) == 0)
            }
            store.purgeMemory()
            #expect(try store.blockingItem(for: key) == nil, "\(kind)")
            try await store.store(Self.bytes(5000, 7), for: key)
            store.purgeMemory()
            #expect(try store.blockingItem(for: key)?.item.data == Self.bytes(5000, 7), "\(kind)")
        }
    }

    @Test("a folder that is not a cache is refused and left as it was; an empty one becomes a cache")
    func foreignFolders() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: folder + "/blobs/textures", withIntermediateDirectories: true)
        try Data("wood".utf8).write(to: URL(fileURLWithPath: folder + "/blobs/textures/wood.png"))
        #expect { try ItemStoreTests.open(folder) } throws: { ($0 as? ItemCacheError)?.code == .folderRefused }
        #expect(try Data(contentsOf: URL(fileURLWithPath: folder + "/blobs/textures/wood.png")) == Data("wood".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["blobs"])

        // Someone's own database named index.sqlite, alone in the folder: no earlier cache. It is
        // refused and left byte for byte (opening it would have added the cache's tables).
        let notes = temporaryCacheFolder("notes")
        defer { try? FileManager.default.removeItem(atPath: notes) }
        try FileManager.default.createDirectory(atPath: notes, withIntermediateDirectories: true)
        chmod(notes, 0o700)
        try await DatabaseQueue(path: notes + "/index.sqlite").write { db in
            try db.execute(sql: "CREATE TABLE notes (x); INSERT INTO notes VALUES ('my data')")
        }
        try? FileManager.default.removeItem(atPath: notes + "/index.sqlite-wal")
        try? FileManager.default.removeItem(atPath: notes + "/index.sqlite-shm")
        let before = try Data(contentsOf: URL(fileURLWithPath: notes + "/index.sqlite"))
        #expect { try ItemStoreTests.open(notes) } throws: { ($0 as? ItemCacheError)?.code == .folderRefused }
        #expect(try Data(contentsOf: URL(fileURLWithPath: notes + "/index.sqlite")) == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: notes) == ["index.sqlite"])

        // A cache of an earlier version (no tag yet) still opens, and is tagged.
        let untagged = temporaryCacheFolder("untagged")
        defer { try? FileManager.default.removeItem(atPath: untagged) }
        let earlier = try ItemStoreTests.open(untagged)
        try await earlier.store(Data("kept".utf8), for: Self.key("k"))
        try await earlier.close()
        try FileManager.default.removeItem(atPath: untagged + "/CACHEDIR.TAG")
        #expect(try ItemStoreTests.open(untagged).blockingItem(for: Self.key("k"))?.item.data == Data("kept".utf8))
        #expect(FileManager.default.fileExists(atPath: untagged + "/CACHEDIR.TAG"))

        // Another program's cache tag.
        let tagged = temporaryCacheFolder("tagged")
        defer { try? FileManager.default.removeItem(atPath: tagged) }
        try FileManager.default.createDirectory(atPath: tagged, withIntermediateDirectories: true)
        try Data("Signature: 8a477f597d28d172789f06886806bc55\n# thumbnails of a photo app\n".utf8)
            .write(to: URL(fileURLWithPath: tagged + "/CACHEDIR.TAG"))
        #expect { try ItemStoreTests.open(tagged) } throws: { ($0 as? ItemCacheError)?.code == .folderRefused }

        // Missing, where only an existing cache may open.
        var configuration = CacheConfiguration(folder: temporaryCacheFolder("missing"))
        configuration.createsFolder = false
        #expect { try ItemStore(configuration: configuration) } throws: {
            ($0 as? ItemCacheError)?.code == .folderRefused
        }
        #expect(!FileManager.default.fileExists(atPath: configuration.folder))

        // An empty folder is no cache where only an existing cache may open; it stays empty.
        let empty = temporaryCacheFolder("empty")
        defer { try? FileManager.default.removeItem(atPath: empty) }
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        chmod(empty, 0o700)
        configuration.folder = empty
        #expect { try ItemStore(configuration: configuration) } throws: {
            ($0 as? ItemCacheError)?.code == .folderRefused
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: empty) == [])

        // Where a cache may be made, an empty folder becomes one, tagged, private.
        let store = try ItemStoreTests.open(empty)
        try await store.store(Data("v".utf8), for: Self.key("a"))
        let tag = try String(contentsOfFile: empty + "/CACHEDIR.TAG", encoding: .utf8)
        #expect(tag.hasPrefix("Signature: 8a477f597d28d172789f06886806bc55"))
        #expect(
            try ItemStore(configuration: configuration).blockingItem(for: Self.key("a"))?.item.data == Data("v".utf8))
    }

    @Test("a new cache folder is 0700 and its files 0600 whatever the umask; group sharing makes 0770 and 0660")
    func privateModes() async throws {
        let old = umask(0o022)
        defer { umask(old) }
        for sharing in [FolderSharing.private, .group] {
            let folder = temporaryCacheFolder("\(sharing)")
            defer { try? FileManager.default.removeItem(atPath: folder) }
            var configuration = CacheConfiguration(folder: folder)
            configuration.sharing = sharing
            configuration.inlineThreshold = 16
            let store = try ItemStore(configuration: configuration)
            try await store.store(Self.bytes(5000), for: Self.key("a"))
            try await store.close()
            let file = try #require(try Self.file(of: Self.key("a"), in: store))
            func mode(_ path: String) -> mode_t {
                var status = stat()
                stat(path, &status)
                return status.st_mode & 0o777
            }
            let (folderMode, fileMode): (mode_t, mode_t) = sharing == .group ? (0o770, 0o660) : (0o700, 0o600)
            #expect(mode(folder) == folderMode)
            #expect(mode(folder + "/blobs") == folderMode)
            #expect(mode(folder + "/blobs/" + String(file.prefix(2))) == folderMode)
            // O_TMPFILE's mode passes through the umask: 0600 or tighter, never readable by others.
            #expect(mode(folder + "/blobs/" + file) & 0o007 == 0)
            for name in ["index.sqlite", "index.sqlite-wal", "cache.lock"] {
                #expect(mode(folder + "/" + name) & ~fileMode == 0, "\(name)")
                #expect(mode(folder + "/" + name) & 0o007 == 0, "\(name)")
            }
        }
    }

    @Test("a folder others can write, or owned by another user, is refused with the fix")
    func unsafeFolders() throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        _ = try ItemStoreTests.open(folder)
        for (mode, code) in [(0o777 as mode_t, "o-w"), (0o770, "g-w")] {
            chmod(folder, mode)
            #expect { try ItemStoreTests.open(folder) } throws: { error in
                guard let error = error as? ItemCacheError else { return false }
                return error.code == .folderRefused && error.message.contains(code)
            }
        }
        var configuration = CacheConfiguration(folder: folder)
        configuration.sharing = .group
        #expect(throws: Never.self) { try ItemStore(configuration: configuration) }
        chmod(folder, 0o700)
        if geteuid() == 0 {
            chown(folder, 65534, 65534)
            #expect { try ItemStoreTests.open(folder) } throws: { error in
                (error as? ItemCacheError)?.code == .folderRefused
                    && (error as? ItemCacheError)?.message.contains("belongs to user 65534") == true
            }
        }
    }

    @Test("planted links in place of the index, its log and the lock file are removed, never followed")
    func plantedIndexLinks() async throws {
        let folder = temporaryCacheFolder()
        let victim = try Victim(size: 3000)
        defer {
            try? FileManager.default.removeItem(atPath: folder)
            try? FileManager.default.removeItem(atPath: victim.folder)
        }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        chmod(folder, 0o700)
        try Data(CacheFolder.tagText.utf8).write(to: URL(fileURLWithPath: folder + "/CACHEDIR.TAG"))
        for name in ["index.sqlite", "index.sqlite-wal", "index.sqlite-shm", "cache.lock", "blobs"] {
            try FileManager.default.createSymbolicLink(
                atPath: folder + "/" + name, withDestinationPath: name == "blobs" ? victim.folder : victim.file)
        }
        let before = try victim.contents()
        let store = try ItemStoreTests.open(folder, inline: 16)
        try await store.store(Self.bytes(5000), for: Self.key("a"))
        #expect(try store.blockingItem(for: Self.key("a"))?.item.data == Self.bytes(5000))
        try await store.close()
        #expect(try victim.contents() == before)

        // A link at the rollback journal's name beside an existing index (SQLite would read it
        // as a hot journal; every command exited 5): removed, the cache opens with its item.
        try FileManager.default.createSymbolicLink(
            atPath: folder + "/index.sqlite-journal", withDestinationPath: victim.file)
        let reopened = try ItemStoreTests.open(folder, inline: 16)
        #expect(try reopened.blockingItem(for: Self.key("a"))?.item.data == Self.bytes(5000))
        try await reopened.close()
        #expect(try victim.contents() == before)
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: folder + "/index.sqlite-journal")) == nil)
    }

    @Test("a missing stats row: statistics count the rows, the limit holds, and opening puts the row back")
    func missingStatsRow() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let shards = Set((0..<12).map { BlobName(newFor: Self.key("k\($0)")).shard }).count
        let limit = DiskTier.limit(forRows: 5 * DiskTier.cost(size: 40_000, inline: false), shardFolders: shards)
        var store = try ItemStoreTests.open(folder, limit: limit, inline: 16)
        for index in 0..<3 { try await store.store(Self.bytes(40_000, UInt8(index)), for: Self.key("k\(index)")) }
        try Self.tamper(folder, "DELETE FROM stats", [])
        #expect(try store.blockingStatistics().bytes == 120_000)
        for index in 3..<12 { try await store.store(Self.bytes(40_000, UInt8(index)), for: Self.key("k\(index)")) }
        let total = try ItemStoreTests.read(store) { db in
            try Int64.fetchOne(db, sql: "SELECT sum(size) FROM item") ?? 0
        }
        #expect(total <= 200_000)
        #expect(try store.blockingStatistics().count == 5)
        try await store.close()
        try Self.tamper(folder, "DELETE FROM stats", [])
        store = try ItemStoreTests.open(folder, limit: limit, inline: 16) // setting the limit puts the row back
        #expect(
            try ItemStoreTests.read(store) { db in try Int64.fetchOne(db, sql: "SELECT bytes FROM stats WHERE id = 1") }
                == total)
        #expect(try store.blockingStatistics().bytes == total)
        // Wrong totals are counted again too.
        try await store.close()
        try Self.tamper(folder, "UPDATE stats SET bytes = -5000000, count = 99", [])
        store = try ItemStoreTests.open(folder, limit: limit, inline: 16)
        #expect(store.openingRepairs.statsRepaired)
        #expect(try store.blockingStatistics().bytes == total)
    }

    /// Overwrites every `every`-th page of the index from the third on with 0xA5 bytes, which
    /// no B-tree page holds: SQLite reads them as damage.
    static func damagePages(of folder: String, every: Int) throws {
        let path = folder + "/index.sqlite"
        let size = try #require(FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        for page in stride(from: 8192, to: size - 4096, by: 4096 * every) {
            try handle.seek(toOffset: UInt64(page))
            handle.write(Data(repeating: 0xA5, count: 4096))
        }
        try handle.close()
    }

    @Test("an index damaged while the store is open is set aside at the next call; the store goes on, empty")
    func damagedWhileOpen() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ItemStoreTests.open(folder, inline: 1 << 20)
        for index in 0..<200 { try await store.store(Self.bytes(3000, UInt8(index)), for: Self.key("k\(index)")) }
        // The log into the file, so reads come from the pages overwritten below.
        try await store.disk.pool.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
        try Self.damagePages(of: folder, every: 4)
        store.purgeMemory()
        // No call throws: the first to meet the damage sets the index aside, and misses.
        var served = 0
        for index in 0..<200 {
            if let found = try await store.item(for: Self.key("k\(index)")) {
                #expect(found.item.data == Self.bytes(3000, UInt8(index)), "never other bytes")
                served += 1
            }
        }
        #expect(served < 200, "the damage was met")
        #expect(store.indexesSetAsideSinceOpening == 1, "set aside once, whatever the calls that met it")
        // 600 KB of damaged index is more than a 1 MiB cache keeps for a post-mortem (its log's
        // budget, 64 KiB): deleted, and the folder is within its limit.
        #expect(!FileManager.default.fileExists(atPath: folder + "/index.sqlite.damaged"))
        #expect(store.disk.measuredFootprint() <= 1 << 20)
        #expect(try await store.statistics().count == 0)
        try await store.store(Self.bytes(10), for: Self.key("new"))
        store.purgeMemory()
        #expect(try await store.item(for: Self.key("new"))?.item.data == Self.bytes(10))
        try await store.close()
        // Another store opening the folder finds the new index whole.
        let reopened = try ItemStoreTests.open(folder, inline: 1 << 20)
        #expect(!reopened.openingRepairs.indexSetAside)
        #expect(try reopened.blockingItem(for: Self.key("new"))?.item.data == Self.bytes(10))
        try await reopened.close()
    }

    /// A folder this user may not write (a read-only cache, another user's files) names the
    /// remedy once, not the file system's and a generic one after it.
    @Test func anUnwritableFolderNamesItsRemedyOnce() async throws {
        let error = DiskTier.openingError(
            "/srv/cache",
            FileSystemError(
                "cannot open the lock file", path: "/srv/cache/cache.lock", syscall: "openat", errno: EACCES))
        #expect(error.code == .storage)
        #expect(
            error.message
                == "cannot open the cache folder /srv/cache: cannot open the lock file /srv/cache/cache.lock (openat: Permission denied, errno 13); check the folder's permissions"
        )
        // The same for a failure once open (a blob folder made read-only), and an error without
        // a remedy of its own still gets the cache's.
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ItemStoreTests.open(folder)
        let denied = store.disk.storageError(
            "cannot store k in",
            FileSystemError("cannot write", path: folder + "/blobs/00/x", syscall: "linkat", errno: EACCES))
        #expect(
            denied.message
                == "cannot store k in the cache at \(folder): cannot write \(folder)/blobs/00/x (linkat: Permission denied, errno 13); check the folder's permissions"
        )
        let other = store.disk.storageError("cannot store k in", CancellationError())
        #expect(other.message.hasSuffix("; check the folder's permissions and free space"))
        try await store.close()
    }

    @Test("a damaged index is set aside and the cache starts again empty; the next store works")
    func damagedIndex() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // A 64 MiB limit keeps a damaged index of up to 4 MiB beside the new one.
        var store: ItemStore? = try ItemStoreTests.open(folder, limit: 64 << 20, inline: 1 << 20)
        for index in 0..<200 { try await store!.store(Self.bytes(3000, UInt8(index)), for: Self.key("k\(index)")) }
        try await store!.close()
        // Checkpoint the log into the file, then overwrite pages in its middle.
        try Self.tamper(folder, "PRAGMA wal_checkpoint(TRUNCATE)", [])
        store = nil
        try Self.damagePages(of: folder, every: 8)
        let reopened = try ItemStoreTests.open(folder, limit: 64 << 20, inline: 1 << 20)
        #expect(reopened.openingRepairs.indexSetAside)
        #expect(FileManager.default.fileExists(atPath: folder + "/index.sqlite.damaged"))
        #expect(try reopened.blockingStatistics().count == 0)
        try await reopened.store(Self.bytes(10), for: Self.key("new"))
        #expect(try reopened.blockingItem(for: Self.key("new"))?.item.data == Self.bytes(10))
        // Not a database at all.
        try await reopened.close()
        try Data(repeating: 0x42, count: 8192).write(to: URL(fileURLWithPath: folder + "/index.sqlite"))
        try? FileManager.default.removeItem(atPath: folder + "/index.sqlite-wal")
        try? FileManager.default.removeItem(atPath: folder + "/index.sqlite-shm")
        let again = try ItemStoreTests.open(folder, inline: 1 << 20)
        #expect(again.openingRepairs.indexSetAside)
        #expect(try again.blockingStatistics().count == 0)
    }
}

/// An index whose schema is not the one its migrations made (a table dropped, the migrations'
/// record emptied): every command exited 5 naming permissions and free space, for good. It is
/// damage, set aside as a damaged page is.
@Suite("An index with a broken schema is set aside, not a wedge")
struct BrokenSchemaTests {
    /// A limit whose log budget (1 MiB) keeps the damaged copy: the smallest index takes 76 KiB
    /// on ext4, more than a 1 MiB limit's 64 KiB budget, and a copy over it is deleted instead.
    static let limit: Int64 = 16 << 20

    @Test(
        "a dropped table or an emptied migration record: the store starts again empty and works",
        arguments: ["DROP TABLE stats", "DROP TABLE item", "DELETE FROM grdb_migrations"])
    func brokenSchema(sql: String) async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ItemStoreTests.open(folder, limit: Self.limit)
        try await store.store(Data("v".utf8), for: CacheFolderSafetyTests.key("a"))
        try await store.close()
        try CacheFolderSafetyTests.tamper(folder, sql, [])
        // The damage is found at the open or at the first use; either way the next store works.
        var reopened = try? ItemStoreTests.open(folder, limit: Self.limit)
        if let opened = reopened { _ = try? opened.blockingStatistics() }
        if reopened == nil || !(reopened!.openingRepairs.indexSetAside) {
            try? await reopened?.close()
            reopened = try ItemStoreTests.open(folder, limit: Self.limit)
        }
        let working = try #require(reopened)
        try await working.store(Data("w".utf8), for: CacheFolderSafetyTests.key("b"))
        #expect(try working.blockingItem(for: CacheFolderSafetyTests.key("b"))?.item.data == Data("w".utf8))
        #expect(FileManager.default.fileExists(atPath: folder + "/index.sqlite.damaged"))
    }

    /// A neighbour who may write the folder's parent renames the cache folder away and puts a
    /// folder of its own in its place, whose `index.sqlite` links to another program's database.
    /// The index was opened by path: every connection opened after that (a reader of the pool,
    /// the checkpointer's) opened the neighbour's file. Through the folder's descriptor
    /// (`HeldFolderPath`), they all open the index of the folder that was checked.
    @Test("a cache folder swapped under an open cache: later connections still open its own index")
    func swappedFolderKeepsItsIndex() async throws {
        let folder = temporaryCacheFolder()
        let moved = folder + ".moved"
        let victim = try CacheFolderSafetyTests.Victim(size: 10)
        defer {
            for path in [folder, moved, victim.folder] { try? FileManager.default.removeItem(atPath: path) }
        }
        let database = victim.folder + "/app.sqlite"
        let app = try DatabaseQueue(path: database)
        try app.inDatabase { db in
            try db.execute(sql: "CREATE TABLE secrets (v TEXT); INSERT INTO secrets VALUES ('x')")
        }
        try app.close()
        let before = try Data(contentsOf: URL(fileURLWithPath: database))

        let store = try ItemStoreTests.open(folder, inline: 16)
        try await store.addToCounters(["mine": 5])
        try await store.store(CacheFolderSafetyTests.bytes(10, 3), for: CacheFolderSafetyTests.key("a"))
        try FileManager.default.moveItem(atPath: folder, toPath: moved)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        try FileManager.default.createSymbolicLink(atPath: folder + "/index.sqlite", withDestinationPath: database)

        // Reads at once need readers beside the first: the pool opens them now.
        let counts = try await withThrowingTaskGroup(of: Int64?.self) { group in
            for _ in 0..<8 { group.addTask { try await store.counters()["mine"] } }
            return try await group.reduce(into: [Int64?]()) { $0.append($1) }
        }
        #expect(counts == Array(repeating: 5, count: 8))
        try await store.store(CacheFolderSafetyTests.bytes(10, 4), for: CacheFolderSafetyTests.key("b"))
        try await store.close()

        #expect(try Data(contentsOf: URL(fileURLWithPath: database)) == before)
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: victim.folder).sorted() == ["app.sqlite", "id_ed25519"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["index.sqlite"])
        let reopened = try ItemStoreTests.open(moved, inline: 16)
        #expect(
            try reopened.blockingItem(for: CacheFolderSafetyTests.key("b"))?.item.data
                == CacheFolderSafetyTests.bytes(10, 4))
        try await reopened.close()
    }
}
