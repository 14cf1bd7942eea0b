import DatabaseKit
import FileKit
import Foundation
import GRDB
import GRDBSQLite
import Metrics
import Synchronization

/// One value on its way to the disk tier: the bytes and the record the index will hold.
struct PendingWrite: Sendable {
    var key: CacheKey
    var data: Data
    var info: ItemInfo
}

/// The disk tier: a SQLite index (GRDB, WAL) and a folder of blob files, shared by every process
/// that opens the same folder.
///
/// - Each row holds the whole key, its context and URL, groups (table `itemGroup`), size, times,
///   pin, validators, content type, the caller's metadata, and the value itself (`inlineValue`,
///   up to the inline threshold) or the name of its file (`file`).
/// - Triggers keep the `stats` row's byte and item counts in step with every insert, delete and
///   resize, in the same transaction, so every process sees one exact total.
/// - A write links its files before its transaction commits and evicts in that transaction until
///   the total is at most the limit (expired first, then least recently used, never pinned);
///   old files are unlinked after the commit.
/// - Writers hold a shared lock on slot 0 of `cache.lock` from a file's creation to its row's
///   commit; reconciliation takes it exclusively, so it never mistakes a file being written for
///   an orphan.
/// - Gets go through ``IndexReader``, a read connection of its own with one prepared statement.
/// - Reads are recorded in memory (by row id) and written to `accessed` with the next write (or
///   ``flushTouches()``): a read costs no write transaction.
final class DiskTier: Sendable {
    let pool: DatabasePool
    let reader: IndexReader
    let checkpointer: WALCheckpointer
    let blobs: BlobFolder
    let lockFile: RangeLockFile
    let inlineThreshold: Int
    /// The folder's disk limit as last read from the index (every write reads it again in its
    /// transaction, so a limit set by another process applies from its next write).
    private let knownLimit = Atomic<Int64>(CacheConfiguration.defaultDiskLimit)
    /// Reads not yet written to `accessed`: row id → time of the read.
    private let touches = Mutex<[Int64: Double]>([:])
    /// Items the running transaction evicted (transactions of one process run one at a time),
    /// counted in `<prefix>_evictions` once it commits.
    private let evictedInTransaction = Atomic<Int>(0)
    private let evictions: Counter

    /// The lock-file slot of the write window (shared) and reconciliation (exclusive).
    static let writeWindowSlot: Int64 = 0

    init(configuration: CacheConfiguration) throws(ItemCacheError) {
        let folder = configuration.folder
        inlineThreshold = configuration.inlineThreshold
        evictions = Counter(label: configuration.metricsPrefix + "_evictions")
        blobs = BlobFolder(root: folder + "/blobs", durability: configuration.durability)
        do {
            try FileSystem.makeFolder(folder)
            try FileSystem.makeFolder(folder + "/blobs")
            lockFile = try RangeLockFile(path: folder + "/cache.lock")
            var database = Configuration()
            database.busyMode = .timeout(configuration.busyTimeout.seconds)
            let synchronous = configuration.durability == .full ? "FULL" : "NORMAL"
            let checkpointer = WALCheckpointer(path: folder + "/index.sqlite", synchronous: synchronous)
            self.checkpointer = checkpointer
            database.prepareDatabase { db in
                try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
                // URL filters (ItemQuery) compare case-sensitively, as URLs do.
                try db.execute(sql: "PRAGMA case_sensitive_like = ON")
                checkpointer.install(on: db)
            }
            pool = try SharedDatabase.openPool(path: folder + "/index.sqlite", configuration: database, migrator: Self.migrator)
            reader = try IndexReader(pool: pool, busyTimeout: configuration.busyTimeout.seconds)
        } catch {
            throw ItemCacheError(code: .storage,
                                 message: "cannot open the cache folder \(folder): \(error); check its permissions and free space, or delete the folder to start empty",
                                 underlying: error)
        }
        try setUpLimit(configuration.diskLimit)
    }

    /// The disk limit every process sharing the folder enforces.
    var limit: Int64 { knownLimit.load(ordering: .relaxed) }

    /// Stores `limit` in the index when one is given (the folder's limit is the last one set),
    /// and learns the folder's limit.
    private func setUpLimit(_ limit: Int64?) throws(ItemCacheError) {
        do {
            if let limit {
                try transaction { db in try db.execute(sql: "UPDATE stats SET diskLimit = ? WHERE id = 1", arguments: [limit]) }
            }
            _ = try pool.read { db in try self.usage(db) }
        } catch {
            throw storageError("cannot set the disk limit of", error)
        }
    }

    /// The bytes stored and the folder's disk limit, as this transaction sees them.
    ///
    /// Every write reads them: two integer columns, read with the C API (`Row.fetchOne` would
    /// copy the row into boxed values first).
    private func usage(_ db: Database) throws -> (bytes: Int64, limit: Int64) {
        let statement = try db.cachedStatement(sql: "SELECT bytes, diskLimit FROM stats WHERE id = 1").sqliteStatement
        defer { sqlite3_reset(statement) }
        var usage = (bytes: Int64(0), limit: CacheConfiguration.defaultDiskLimit)
        switch sqlite3_step(statement) {
        case SQLITE_ROW:
            usage.bytes = sqlite3_column_int64(statement, 0)
            if sqlite3_column_type(statement, 1) != SQLITE_NULL { usage.limit = sqlite3_column_int64(statement, 1) }
        case SQLITE_DONE:
            break
        case let code:
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)))
        }
        knownLimit.store(usage.limit, ordering: .relaxed)
        return usage
    }

    // MARK: - Schema

    /// Migrations are never edited once shipped: add a new one instead.
    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE item (
                    id INTEGER PRIMARY KEY,
                    key TEXT NOT NULL UNIQUE,
                    context TEXT NOT NULL,
                    url TEXT,
                    size INTEGER NOT NULL,
                    created REAL NOT NULL,
                    accessed REAL NOT NULL,
                    expires REAL,
                    mustRevalidate INTEGER NOT NULL DEFAULT 0,
                    pinned INTEGER NOT NULL DEFAULT 0,
                    etag TEXT,
                    lastModified TEXT,
                    contentType TEXT,
                    metadata TEXT,
                    inlineValue BLOB,
                    file TEXT
                );
                CREATE INDEX item_lru ON item(accessed) WHERE pinned = 0;
                CREATE INDEX item_expiry ON item(expires) WHERE pinned = 0 AND expires IS NOT NULL;
                CREATE INDEX item_url ON item(url);
                CREATE INDEX item_context ON item(context);
                CREATE TABLE itemGroup (
                    itemId INTEGER NOT NULL REFERENCES item(id) ON DELETE CASCADE,
                    name TEXT NOT NULL,
                    PRIMARY KEY (name, itemId)
                ) WITHOUT ROWID;
                CREATE INDEX itemGroup_item ON itemGroup(itemId);
                CREATE TABLE stats (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    bytes INTEGER NOT NULL,
                    count INTEGER NOT NULL
                );
                INSERT INTO stats VALUES (1, 0, 0);
                CREATE TRIGGER item_inserted AFTER INSERT ON item BEGIN
                    UPDATE stats SET bytes = bytes + NEW.size, count = count + 1 WHERE id = 1;
                END;
                CREATE TRIGGER item_deleted AFTER DELETE ON item BEGIN
                    UPDATE stats SET bytes = bytes - OLD.size, count = count - 1 WHERE id = 1;
                END;
                CREATE TRIGGER item_resized AFTER UPDATE OF size ON item BEGIN
                    UPDATE stats SET bytes = bytes - OLD.size + NEW.size WHERE id = 1;
                END;
                """)
        }
        // The disk limit belongs to the folder, not to one process's configuration: every
        // process enforces the one last set (NULL: the default).
        migrator.registerMigration("v2-disk-limit") { db in
            try db.execute(sql: "ALTER TABLE stats ADD COLUMN diskLimit INTEGER")
        }
        // A copy of the item's groups in its row (names joined by U+001F, '' for none), so a get
        // reads them without a second B-tree lookup (measured: that subquery cost about a third
        // of a 4 KiB get). `itemGroup` stays the table queries use. NULL: a row written before
        // this migration (or by an older version sharing the folder), read through `itemGroup`.
        migrator.registerMigration("v3-group-names") { db in
            try db.execute(sql: "ALTER TABLE item ADD COLUMN groupNames TEXT")
        }
        return migrator
    }

    // MARK: - Reading

    /// The columns of a summary (queries, ``info(for:)``): the whole key, then the record.
    static let columns = """
        item.id, item.key, item.context, item.url, item.size, item.created, item.accessed, item.expires, \
        item.mustRevalidate, item.pinned, item.etag, item.lastModified, item.contentType, item.metadata, \
        \(groupsColumn)
        """

    /// The item's groups joined by U+001F: the row's copy, or (rows older than the copy) the
    /// `itemGroup` rows. `coalesce` evaluates the subquery only when the copy is NULL.
    static let groupsColumn = "coalesce(item.groupNames, (SELECT group_concat(name, char(31)) FROM itemGroup WHERE itemId = item.id))"

    /// The stored item, or nil. A file that is missing or cut short drops its row: the item is
    /// a miss, never a torn value.
    func read(_ key: CacheKey) throws(ItemCacheError) -> CachedItem? {
        for _ in 0..<4 {
            let found: IndexRow?
            do {
                found = try reader.row(for: key.rawValue)
            } catch {
                throw storageError("cannot read \(key.rawValue) from", error)
            }
            guard let row = found else { return nil }
            if let inline = row.inlineValue {
                touch(row)
                return CachedItem(key: key, data: inline, info: row.info)
            }
            let id = row.id
            guard let file = row.file else { return nil }
            let data: Data?
            do {
                data = try blobs.read(file, size: row.info.size)
            } catch {
                throw storageError("cannot read \(key.rawValue) from", error)
            }
            if let data {
                touch(row)
                return CachedItem(key: key, data: data, info: row.info)
            }
            // The file is gone: a concurrent replace or eviction (the row changed too; read it
            // again), or damage (the row still names it: drop the row).
            let dropped = try? pool.write { db in
                try db.execute(sql: "DELETE FROM item WHERE id = ? AND file = ?", arguments: [id, file])
                return db.changesCount
            }
            if dropped == 1 { return nil }
        }
        return nil
    }

    /// The record of the item, without its value; nil when there is none.
    func info(for key: CacheKey) throws(ItemCacheError) -> ItemInfo? {
        do {
            return try pool.unsafeRead { db in
                try Row.fetchOne(db.cachedStatement(sql: "SELECT \(Self.columns) FROM item WHERE key = ?"), arguments: [key.rawValue]).map(Self.info)
            }
        } catch {
            throw storageError("cannot read \(key.rawValue) from", error)
        }
    }

    /// The record from a row that starts with ``columns``.
    static func info(_ row: Row) -> ItemInfo {
        let expires: Double? = row[7]
        let groups: String? = row[14]
        let metadataText: String? = row[13]
        var metadata: [String: String] = [:]
        if let metadataText, let decoded = try? JSONDecoder().decode([String: String].self, from: Data(metadataText.utf8)) {
            metadata = decoded
        }
        var info = ItemInfo(size: row[4], created: Date(timeIntervalSince1970: row[5]), accessed: Date(timeIntervalSince1970: row[6]),
                            expires: expires.map(Date.init(timeIntervalSince1970:)), mustRevalidate: row[8], pinned: row[9],
                            etag: row[10], lastModified: row[11], contentType: row[12], metadata: metadata)
        info.groups = groups.map(Self.groups(from:)) ?? []
        return info
    }

    /// Group names as ``groupsColumn`` joins them.
    static func groups(from joined: String) -> [String] {
        joined.split(separator: "\u{1F}").map(String.init).sorted()
    }

    /// The key from a row that starts with ``columns``.
    static func key(_ row: Row) -> CacheKey {
        CacheKey(rawValue: row[1], context: row[2], url: row[3])
    }

    /// Records a read of `row`. Keyed by row id (no string hashing); `max(accessed, …)` when
    /// writing makes a reused id harmless, since a row made after this read has a later
    /// `accessed` already.
    private func touch(_ row: IndexRow) {
        let now = Date().timeIntervalSince1970
        touches.withLock { $0[row.id] = now }
    }

    // MARK: - Writing

    /// Stores `writes` in one transaction (later ones win over earlier ones of the same key),
    /// evicting until the total is at most the limit. `afterCommit` runs right after the commit,
    /// before any other write of this process can commit (so the memory tier follows the disk's
    /// order). Blocks: call it on the I/O pool.
    func write(_ writes: [PendingWrite], afterCommit: (() -> Void)? = nil) throws(ItemCacheError) {
        for write in writes where write.info.size > limit {
            throw ItemCacheError(code: .tooLarge,
                                 message: "\(write.key.rawValue) has \(write.info.size) bytes, more than the cache's disk limit of \(limit); raise the limit (diskLimit, --max-size) or store it elsewhere",
                                 key: write.key)
        }
        // Only a write that makes files needs the window: reconciliation must not take a file
        // between its link and its row's commit for an orphan. Inline values make no file.
        let makesFiles = writes.contains { $0.data.count > inlineThreshold }
        if makesFiles {
            do {
                try lockFile.lock(slot: Self.writeWindowSlot, exclusive: false)
            } catch {
                throw storageError("cannot lock", error)
            }
        }
        var names: [String?] = []
        var oldFiles: [String] = []
        do {
            for write in writes {
                if write.data.count > inlineThreshold {
                    let name = blobs.newName(for: write.key)
                    names.append(name)
                    try blobs.write(write.data, as: name)
                } else {
                    names.append(nil)
                }
            }
            oldFiles = try transaction({ db in try self.insert(writes, files: names, db) }, afterCommit: { _ in afterCommit?() })
        } catch {
            if makesFiles { lockFile.unlock(slot: Self.writeWindowSlot) }
            for case let name? in names { blobs.remove(name) }
            if let error = error as? ItemCacheError { throw error }
            throw storageError("cannot store \(writes.map(\.key.rawValue).prefix(3).joined(separator: ", ")) in", error)
        }
        if makesFiles { lockFile.unlock(slot: Self.writeWindowSlot) }
        for file in oldFiles { blobs.remove(file) }
    }

    /// A new key's row; nothing happens when the key has one (then ``updateSQL`` replaces it).
    private static let insertSQL = """
        INSERT INTO item (key, context, url, size, created, accessed, expires, mustRevalidate, pinned, etag, lastModified, \
        contentType, metadata, inlineValue, file, groupNames) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT(key) DO NOTHING
        """
    /// Replaces a row in place (the key, and so its context and URL, stay). `item_resized`
    /// keeps the byte total exact; the count does not change.
    private static let updateSQL = """
        UPDATE item SET size = ?, created = ?, accessed = ?, expires = ?, mustRevalidate = ?, pinned = ?, etag = ?, \
        lastModified = ?, contentType = ?, metadata = ?, inlineValue = ?, file = ?, groupNames = ? WHERE id = ?
        """

    /// Inserts the rows (replacing older ones in place) and evicts; returns the files no row
    /// names any more. A new key costs one statement; a stored one three (the insert that does
    /// nothing, the read of its old file and groups, the update), and its groups are replaced.
    private func insert(_ writes: [PendingWrite], files: [String?], _ db: Database) throws -> [String] {
        var oldFiles: [String] = []
        for (write, file) in zip(writes, files) {
            let info = write.info
            let metadata = info.metadata.isEmpty ? nil : String(decoding: try JSONEncoder().encode(info.metadata), as: UTF8.self)
            let groupNames = info.groups.joined(separator: "\u{1F}")
            let value = file == nil ? write.data : nil
            let times = (created: info.created.timeIntervalSince1970, accessed: info.accessed.timeIntervalSince1970,
                         expires: info.expires?.timeIntervalSince1970)
            try db.cachedStatement(sql: Self.insertSQL).execute(arguments: [
                write.key.rawValue, write.key.context, write.key.url, info.size, times.created, times.accessed, times.expires,
                info.mustRevalidate, info.pinned, info.etag, info.lastModified, info.contentType, metadata, value, file, groupNames,
            ])
            var id = db.lastInsertedRowID
            if db.changesCount == 0 {
                guard let old = try Row.fetchOne(db.cachedStatement(sql: "SELECT id, file, groupNames FROM item WHERE key = ?"),
                                                 arguments: [write.key.rawValue]) else {
                    throw ItemCacheError(code: .storage, message: "the index refused a row for \(write.key.rawValue) and has none; reconcile or delete the cache folder")
                }
                id = old[0]
                try db.cachedStatement(sql: Self.updateSQL).execute(arguments: [
                    info.size, times.created, times.accessed, times.expires, info.mustRevalidate, info.pinned, info.etag,
                    info.lastModified, info.contentType, metadata, value, file, groupNames, id,
                ])
                if let oldFile: String = old[1] { oldFiles.append(oldFile) }
                if (old[2] as String?) != "" {
                    try db.cachedStatement(sql: "DELETE FROM itemGroup WHERE itemId = ?").execute(arguments: [id])
                }
            }
            for group in info.groups {
                try db.cachedStatement(sql: "INSERT OR IGNORE INTO itemGroup (itemId, name) VALUES (?, ?)").execute(arguments: [id, group])
            }
        }
        oldFiles += try evict(db, keeping: writes)
        return oldFiles
    }

    /// Deletes unpinned items, expired ones first (soonest expired first), then the least
    /// recently used, until the total is at most the limit. Never deletes the keys of `writes`;
    /// throws ``ItemCacheError/Code/tooLarge`` when pinned items and those leave too little room.
    private func evict(_ db: Database, keeping writes: [PendingWrite]) throws -> [String] {
        let usage = try usage(db)
        var total = usage.bytes
        let limit = usage.limit
        guard total > limit else { return [] }
        let keeping = Set(writes.map(\.key.rawValue))
        let now = Date().timeIntervalSince1970
        var files: [String] = []
        for sql in ["SELECT id, key, size, file FROM item WHERE pinned = 0 AND expires IS NOT NULL AND expires <= ? ORDER BY expires LIMIT 64 OFFSET ?",
                    "SELECT id, key, size, file FROM item WHERE pinned = 0 AND ? IS NOT NULL ORDER BY accessed LIMIT 64 OFFSET ?"] {
            var skipped = 0
            while total > limit {
                let rows = try Row.fetchAll(db.cachedStatement(sql: sql), arguments: [now, skipped])
                if rows.isEmpty { break }
                for row in rows where total > limit {
                    let key: String = row[1]
                    if keeping.contains(key) { skipped += 1; continue }
                    try db.cachedStatement(sql: "DELETE FROM item WHERE id = ?").execute(arguments: [row[0] as Int64])
                    total -= row[2] as Int64
                    evictedInTransaction.add(1, ordering: .relaxed)
                    if let file: String = row[3] { files.append(file) }
                }
            }
        }
        if total > limit {
            var pinned: Int64 = 0, written: Int64 = 0
            for row in try Row.fetchAll(db, sql: "SELECT key, size, pinned FROM item WHERE pinned = 1 OR key IN (SELECT value FROM json_each(?))",
                                        arguments: [String(decoding: try JSONEncoder().encode(Array(keeping)), as: UTF8.self)]) {
                if keeping.contains(row[0]) { written += row[1] as Int64 } else { pinned += row[1] as Int64 }
            }
            throw ItemCacheError(code: .tooLarge,
                                 message: "the cache's disk limit of \(limit) bytes cannot hold this write of \(written) bytes: pinned items hold \(pinned) bytes; unpin items, remove some, or raise the limit (diskLimit, --max-size)")
        }
        return files
    }

    /// Runs `body` in an immediate write transaction, with the reads recorded since the last
    /// write applied first, then `afterCommit` with its result while this process's other
    /// writes still wait. A busy database (another process writing) is waited for by SQLite's
    /// busy timeout, and the whole transaction is tried again a few times before it fails.
    func transaction<T>(_ body: @escaping (Database) throws -> T, afterCommit: ((T) -> Void)? = nil) throws -> T {
        let pendingTouches = touches.withLock { touches in
            defer { touches = [:] }
            return touches
        }
        var attempt = 0
        while true {
            do {
                return try pool.writeWithoutTransaction { db in
                    // BEGIN and COMMIT as cached statements: `inTransaction` compiles both
                    // anew on every call.
                    try db.cachedStatement(sql: "BEGIN IMMEDIATE").execute()
                    evictedInTransaction.store(0, ordering: .relaxed)
                    let result: T
                    do {
                        for (id, accessed) in pendingTouches {
                            try db.cachedStatement(sql: "UPDATE item SET accessed = max(accessed, ?) WHERE id = ?").execute(arguments: [accessed, id])
                        }
                        result = try body(db)
                        try db.cachedStatement(sql: "COMMIT").execute()
                    } catch {
                        if db.isInsideTransaction { try? db.rollback() }
                        throw error
                    }
                    let evicted = evictedInTransaction.exchange(0, ordering: .relaxed)
                    if evicted > 0 { evictions.increment(by: Int64(evicted)) }
                    afterCommit?(result)
                    return result
                }
            } catch let error as DatabaseError where (error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED) && attempt < 5 {
                attempt += 1
                usleep(UInt32(20_000 * attempt))
            }
        }
    }

    /// Writes the reads recorded so far to the index.
    func flushTouches() {
        guard !touches.withLock({ $0.isEmpty }) else { return }
        _ = try? transaction { _ in () }
    }

    // MARK: - Changing and removing

    /// Updates the record of `key` after a revalidation: expiry and validators. Returns the new
    /// record, or nil when the item is gone.
    func refresh(_ key: CacheKey, expires: Date?, mustRevalidate: Bool, etag: String?, lastModified: String?,
                 afterCommit: ((ItemInfo?) -> Void)? = nil) throws(ItemCacheError) -> ItemInfo? {
        do {
            return try transaction({ db in
                try db.execute(sql: """
                    UPDATE item SET expires = ?, mustRevalidate = ?, etag = coalesce(?, etag), lastModified = coalesce(?, lastModified), accessed = ?
                    WHERE key = ?
                    """, arguments: [expires?.timeIntervalSince1970, mustRevalidate, etag, lastModified, Date().timeIntervalSince1970, key.rawValue])
                return try Row.fetchOne(db, sql: "SELECT \(Self.columns) FROM item WHERE key = ?", arguments: [key.rawValue]).map(Self.info)
            }, afterCommit: afterCommit)
        } catch {
            throw storageError("cannot update \(key.rawValue) in", error)
        }
    }

    /// Reads the item of `key`, hands it to `transform` and stores what that returns (nil: no
    /// change), all in one write transaction: no other write of any process comes in between,
    /// so read-modify-write steps (a provider's list actions) never lose an update. A new
    /// file is linked before the commit, as in ``write(_:afterCommit:)``. Returns the item as
    /// stored (or as found, when `transform` changed nothing).
    func modify(_ key: CacheKey, _ transform: @escaping (CachedItem?) throws -> PendingWrite?,
                afterCommit: ((CachedItem?) -> Void)? = nil) throws(ItemCacheError) -> CachedItem? {
        // A file may be made: hold the write window, as `write` does.
        do {
            try lockFile.lock(slot: Self.writeWindowSlot, exclusive: false)
        } catch {
            throw storageError("cannot lock", error)
        }
        defer { lockFile.unlock(slot: Self.writeWindowSlot) }
        // Each attempt of the transaction (a busy retry runs it again) may make a file; only the
        // committed attempt's file stays.
        let made = Mutex<[String]>([])
        let outcome: (item: CachedItem?, file: String?, oldFiles: [String])
        do {
            outcome = try transaction({ db in
                let current = try self.read(key, in: db)
                guard let write = try transform(current) else { return (current, nil, []) }
                guard write.info.size <= self.limit else {
                    throw ItemCacheError(code: .tooLarge,
                                         message: "\(key.rawValue) would have \(write.info.size) bytes, more than the cache's disk limit of \(self.limit); raise the limit (diskLimit, --max-size)",
                                         key: key)
                }
                var file: String?
                if write.data.count > self.inlineThreshold {
                    let name = self.blobs.newName(for: key)
                    made.withLock { $0.append(name) }
                    try self.blobs.write(write.data, as: name)
                    file = name
                }
                let oldFiles = try self.insert([write], files: [file], db)
                return (CachedItem(key: key, data: write.data, info: write.info), file, oldFiles)
            }, afterCommit: { afterCommit?($0.item) })
        } catch {
            for name in made.withLock({ $0 }) { blobs.remove(name) }
            throw storageError("cannot update \(key.rawValue) in", error)
        }
        for name in made.withLock({ $0 }) where name != outcome.file { blobs.remove(name) }
        for file in outcome.oldFiles { blobs.remove(file) }
        return outcome.item
    }

    /// The item of `key` as the transaction of `db` sees it; nil when there is none or its file
    /// is missing or cut short.
    private func read(_ key: CacheKey, in db: Database) throws -> CachedItem? {
        guard let row = try IndexReader.row(for: key.rawValue, db.cachedStatement(sql: IndexReader.sql).sqliteStatement, db.sqliteConnection) else { return nil }
        if let inline = row.inlineValue { return CachedItem(key: key, data: inline, info: row.info) }
        guard let file = row.file, let data = try blobs.read(file, size: row.info.size) else { return nil }
        return CachedItem(key: key, data: data, info: row.info)
    }

    /// Deletes the items whose ids `select` returns (run inside the transaction); returns how
    /// many went.
    func remove(selecting select: @escaping (Database) throws -> [Int64], afterCommit: (() -> Void)? = nil) throws(ItemCacheError) -> Int {
        let files: [String]
        do {
            files = try transaction({ db in
                var files: [String] = []
                for id in try select(db) {
                    if let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT file FROM item WHERE id = ?"), arguments: [id]) {
                        try db.cachedStatement(sql: "DELETE FROM item WHERE id = ?").execute(arguments: [id])
                        files.append((row[0] as String?) ?? "")
                    }
                }
                return files
            }, afterCommit: { _ in afterCommit?() })
        } catch {
            throw storageError("cannot remove items from", error)
        }
        for file in files where !file.isEmpty { blobs.remove(file) }
        return files.count
    }

    /// Removes the item of `key`; returns whether there was one.
    @discardableResult
    func remove(_ key: CacheKey, afterCommit: (() -> Void)? = nil) throws(ItemCacheError) -> Bool {
        try remove(selecting: { db in try Int64.fetchAll(db, sql: "SELECT id FROM item WHERE key = ?", arguments: [key.rawValue]) },
                   afterCommit: afterCommit) > 0
    }

    // MARK: - Queries

    func summaries(_ query: ItemQuery) throws(ItemCacheError) -> [ItemSummary] {
        do {
            return try pool.read { db in
                let sql = try query.request().select(SQL(sql: Self.columns)).makePreparedRequest(db, forSingleResult: false)
                return try Row.fetchAll(sql.statement).map { ItemSummary(key: Self.key($0), info: Self.info($0)) }
            }
        } catch {
            throw storageError("cannot query", error)
        }
    }

    func count(_ query: ItemQuery) throws(ItemCacheError) -> Int {
        var unlimited = query
        unlimited.limit = nil
        unlimited.offset = 0
        do {
            return try pool.read { db in try unlimited.request().fetchCount(db) }
        } catch {
            throw storageError("cannot count", error)
        }
    }

    // MARK: - Statistics and reconciliation

    func statistics(now: Date = Date()) throws(ItemCacheError) -> CacheStatistics {
        do {
            return try pool.read { db in
                let row = try Row.fetchOne(db, sql: """
                    SELECT (SELECT count FROM stats), (SELECT bytes FROM stats), (SELECT diskLimit FROM stats),
                           (SELECT count(*) FROM item WHERE pinned = 1), (SELECT coalesce(sum(size), 0) FROM item WHERE pinned = 1),
                           (SELECT count(*) FROM item WHERE mustRevalidate = 1 OR expires <= ?)
                    """, arguments: [now.timeIntervalSince1970])!
                let limit = (row[2] as Int64?) ?? CacheConfiguration.defaultDiskLimit
                self.knownLimit.store(limit, ordering: .relaxed)
                return CacheStatistics(count: row[0], bytes: row[1], limit: limit, pinned: row[3], pinnedBytes: row[4], expired: row[5])
            }
        } catch {
            throw storageError("cannot read the statistics of", error)
        }
    }

    /// What ``reconcile()`` found and fixed.
    struct Reconciliation: Sendable, Equatable {
        /// Files no row named (a crash between writing a file and committing its row), removed.
        var orphanFiles = 0
        /// Rows whose file was missing or cut short (damage, a power loss), removed.
        var orphanRows = 0
    }

    /// Makes the index and the files agree, both ways: files with no row are unlinked, rows with
    /// no complete file are deleted. Safe while other processes use the folder: it holds the
    /// write window exclusively while it compares names, and deletes a row only if it still
    /// names the file it found missing.
    func reconcile() throws(ItemCacheError) -> Reconciliation {
        var result = Reconciliation()
        do {
            try lockFile.lock(slot: Self.writeWindowSlot, exclusive: true)
            let names = blobs.allNames()
            let named = try pool.read { db in try Set(String.fetchAll(db, sql: "SELECT file FROM item WHERE file IS NOT NULL")) }
            for name in names where !named.contains(name) {
                blobs.remove(name)
                result.orphanFiles += 1
            }
            lockFile.unlock(slot: Self.writeWindowSlot)
            let rows = try pool.read { db in try Row.fetchAll(db, sql: "SELECT id, file, size FROM item WHERE file IS NOT NULL") }
            let damaged = rows.filter { blobs.size(of: $0[1]) != ($0[2] as Int64) }
            if !damaged.isEmpty {
                result.orphanRows = try transaction { db in
                    var count = 0
                    for row in damaged {
                        try db.execute(sql: "DELETE FROM item WHERE id = ? AND file = ?", arguments: [row[0] as Int64, row[1] as String])
                        count += db.changesCount
                    }
                    return count
                }
                for row in damaged { blobs.remove(row[1]) }
            }
        } catch {
            lockFile.unlock(slot: Self.writeWindowSlot)
            throw storageError("cannot reconcile the index and the files of", error)
        }
        return result
    }

    private func storageError(_ what: String, _ error: any Error) -> ItemCacheError {
        if let error = error as? ItemCacheError { return error }
        return ItemCacheError(code: .storage,
                              message: "\(what) the cache at \((blobs.root as NSString).deletingLastPathComponent): \(error); check the folder's permissions and free space",
                              underlying: error)
    }
}
