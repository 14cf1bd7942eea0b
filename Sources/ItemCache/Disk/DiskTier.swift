import DatabaseKit
import FileKit
import Foundation
import GRDB
import GRDBSQLite
import Metrics
import Synchronization
import Transport

/// One value on its way to the disk tier: the bytes and the record the index will hold.
struct PendingWrite: Sendable {
    var key: CacheKey
    var data: Data
    var info: ItemInfo
    /// The value's CRC-32C, computed before any lock is taken.
    let checksum: UInt32
    /// A value that came as a staged file (``data`` is then empty): the file is named as the
    /// blob, never copied.
    let file: ValueFile?

    init(key: CacheKey, data: Data, info: ItemInfo) {
        self.key = key
        self.data = data
        self.info = info
        checksum = CRC32C.checksum(data)
        file = nil
    }

    /// A write of the staged file `file`.
    init(key: CacheKey, file: ValueFile, info: ItemInfo) {
        (self.key, self.data, self.info, self.checksum, self.file) = (key, Data(), info, file.checksum, file)
    }

    /// The value's size.
    var size: Int64 { file?.size ?? Int64(data.count) }

    /// Whether the value goes to a file of its own rather than inside the index: over
    /// `inlineThreshold`, or staged as a file already.
    func makesFile(inlineThreshold: Int) -> Bool { file != nil || data.count > inlineThreshold }
}

/// The disk tier: a SQLite index (GRDB, WAL) and a folder of blob files, shared by every process
/// that opens the same folder. Its roles live in files of their own:
///
/// - `CacheFolder`: the folder as descriptors, and what may be touched (docs/security.md);
/// - `DiskTier+Schema`: the index's tables and migrations;
/// - `DiskTier+Reading`: gets (through ``IndexReader``), records, and the reads recorded for LRU;
/// - `DiskTier+Writing`: stores, and eviction down to the limit;
/// - `DiskTier+Transaction`: the write transaction every change runs in;
/// - `DiskTier+Changing`: revalidation, read-modify-write and removal;
/// - `DiskTier+Queries`: queries and statistics;
/// - `DiskTier+Reconciliation`: making the index and the files agree, and repairing the index;
/// - `BlobFolder` and `BlobName`: the value files and their names.
///
/// - Each row holds the whole key, its context and URL, groups (table `itemGroup`), size, times,
///   pin, validators, content type, the caller's metadata, the value's CRC-32C, and the value
///   itself (`inlineValue`, up to the inline threshold) or the name of its file (`file`).
/// - Triggers keep the `stats` row's byte and item counts in step with every insert, delete and
///   resize, in the same transaction, so every process sees one exact total.
/// - A write links its files before its transaction commits and evicts in that transaction until
///   the total is at most the limit (expired first, then least recently used, never pinned);
///   old files are unlinked after the commit.
/// - Writers hold a shared lock on slot 0 of `cache.lock` from a file's creation to its row's
///   commit; reconciliation takes it exclusively, so it never mistakes a file being written for
///   an orphan.
/// - Reads are recorded in memory (by row id, or by key when memory answered them) and written
///   to `accessed` with the next write (or ``flushTouches()``): a read costs no write
///   transaction.
final class DiskTier: Sendable {
    let folder: CacheFolder
    let pool: DatabasePool
    let reader: IndexReader
    let checkpointer: WALCheckpointer
    let blobs: BlobFolder
    let lockFile: RangeLockFile
    let inlineThreshold: Int
    /// The folder's disk limit as last read from the index (every write reads it again in its
    /// transaction, so a limit set by another process applies from its next write).
    let knownLimit = Atomic<Int64>(CacheConfiguration.defaultDiskLimit)
    /// The configuration's clock: every time the index records or compares (reads, expiry,
    /// eviction's "expired first") is its `now`.
    let clock: any CacheClock
    /// Reads not yet written to `accessed`.
    let touches = Mutex(Touches())
    /// Items the running transaction evicted (transactions of one process run one at a time),
    /// counted in `<prefix>_evictions` once it commits.
    let evictedInTransaction = Atomic<Int>(0)
    let evictions: Counter
    /// Values found damaged on a read (other bytes than recorded, a file of the wrong kind):
    /// `<prefix>_damaged`. The item is dropped and read as a miss.
    let damaged: Counter

    /// The lock-file slot of the write window (shared) and reconciliation (exclusive).
    static let writeWindowSlot: Int64 = 0
    /// The lock-file slot of setting a damaged index aside (keys use 1 … 2^40).
    static let repairSlot: Int64 = (1 << 40) + 1

    /// The path SQLite opens the index of `folder` by: through the folder's descriptor
    /// (`HeldFolderPath`), so a folder renamed away and another put in its place after the
    /// checks is never the one opened; the folder's path where SQLite cannot keep that.
    static func indexPath(in folder: CacheFolder) -> String {
        HeldFolderPath.path("index.sqlite", inFolder: folder.descriptor) ?? folder.path + "/index.sqlite"
    }

    /// Whether the index in `folder` opens and reads (a test before setting it aside).
    static func indexOpens(in folder: CacheFolder) -> Bool {
        do {
            var configuration = Configuration()
            configuration.readonly = true
            let queue = try DatabaseQueue(path: indexPath(in: folder), configuration: configuration)
            defer { try? queue.close() }
            return try queue.read { db in
                _ = try Row.fetchAll(db, sql: "SELECT id, file, size FROM item")
                _ = try Row.fetchOne(db, sql: "SELECT * FROM stats WHERE id = 1")
                // A schema whose migrations' record is not whole (emptied, or rows removed) is
                // damage too: opening it runs them again over tables that exist.
                guard try migrator.hasCompletedMigrations(db) else { return false }
                return try String.fetchOne(db, sql: "PRAGMA quick_check") == "ok"
            }
        } catch {
            return false
        }
    }

    /// Opens the index and the blob folder in `folder` (checked and open already).
    init(folder: CacheFolder, configuration: CacheConfiguration) throws(ItemCacheError) {
        self.folder = folder
        clock = configuration.clock
        inlineThreshold = configuration.inlineThreshold
        evictions = Counter(label: configuration.metricsPrefix + "_evictions")
        damaged = Counter(label: configuration.metricsPrefix + "_damaged")
        let path = Self.indexPath(in: folder)
        do {
            blobs = try BlobFolder(in: folder, durability: configuration.durability)
            lockFile = try folder.openLockFile()
            // SQLite opens its files by path: none of them may be a planted symlink, and a new
            // index (and the log and shared memory, which take its mode) is private.
            try folder.prepareFile("index.sqlite", create: true)
            try folder.prepareFile("index.sqlite-wal", create: false)
            try folder.prepareFile("index.sqlite-shm", create: false)
            // A rollback journal SQLite would read as a hot journal at opening (a link to
            // someone's file, or a folder, wedged every command).
            try folder.prepareFile("index.sqlite-journal", create: false)
            var database = Configuration()
            // GRDB and SQLite take whole milliseconds in an Int32: a longer timeout is their longest.
            database.busyMode = .timeout(configuration.busyTimeout.secondsForInt32Milliseconds)
            let synchronous = configuration.durability == .full ? "FULL" : "NORMAL"
            // The log's budget follows the limit this process knows (the folder's may differ
            // until the next open; the log is bounded either way).
            let walBudget = Self.walBudget(for: configuration.diskLimit ?? CacheConfiguration.defaultDiskLimit)
            let checkpointer = WALCheckpointer(
                path: path, synchronous: synchronous, budgetBytes: walBudget, keeping: folder)
            self.checkpointer = checkpointer
            database.prepareDatabase { db in
                // A new index gives freed pages back to the file system (a no-op on an index
                // made before: that needs a VACUUM, which a cache can do without).
                if !db.configuration.readonly {
                    try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL")
                    try db.execute(sql: "PRAGMA journal_size_limit = \(walBudget)")
                }
                try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
                // URL filters (ItemQuery) compare case-sensitively, as URLs do.
                try db.execute(sql: "PRAGMA case_sensitive_like = ON")
                checkpointer.install(on: db)
                // The pool's connections name the folder through its descriptor: it stays
                // open until the last of them closes.
                withExtendedLifetime(folder) {}
            }
            pool = try SharedDatabase.openPool(path: path, configuration: database, migrator: Self.migrator)
            reader = try IndexReader(
                pool: pool, busyTimeout: configuration.busyTimeout.secondsForInt32Milliseconds, keeping: folder)
        } catch let error as ItemCacheError {
            throw error
        } catch {
            throw Self.openingError(folder.path, error)
        }
        try setUpLimit(configuration.diskLimit)
    }

    /// The error for a folder that cannot be opened: a damaged index says so (the caller sets
    /// it aside), anything else names the folder's permissions and space.
    static func openingError(_ folder: String, _ error: any Error) -> ItemCacheError {
        if DiskTier.isDamage(error) {
            return ItemCacheError(
                code: .damagedIndex,
                message:
                    "the cache index \(folder)/index.sqlite is damaged: \(error); it is set aside and made again empty when the cache opens",
                underlying: error)
        }
        // Out of descriptors, SQLite says only "unable to open": the folder is fine.
        // Nor is an index this user may not write, unless the error already says so.
        if let reason = FileSystemError.descriptorShortageReason()
            ?? ((error as? FileSystemError)?.remedy == nil
                ? FileSystemError.databaseAccessReason(path: folder + "/index.sqlite") : nil)
        {
            return ItemCacheError(
                code: .storage, message: "cannot open the cache folder \(folder): \(reason)", underlying: error)
        }
        return ItemCacheError(
            code: .storage,
            message:
                "cannot open the cache folder \(folder): \(withRemedy(error, "check its permissions and free space, or delete the folder to start empty"))",
            underlying: error)
    }

    /// `error` followed by `remedy`, unless the error names a remedy of its own (a
    /// `FileSystemError` does, for permissions and space): a message says its remedy once.
    static func withRemedy(_ error: any Error, _ remedy: String) -> String {
        if let error = error as? FileSystemError, error.remedy != nil { return "\(error)" }
        return "\(error); \(remedy)"
    }

    /// Whether `error` says the index file is damaged (`SharedDatabase/isDamage(_:)`), as
    /// opposed to a full disk or missing permissions.
    static func isDamage(_ error: any Error) -> Bool {
        if let error = error as? ItemCacheError {
            return error.code == .damagedIndex || error.underlying.map(isDamage) ?? false
        }
        return SharedDatabase.isDamage(error)
    }

    /// The disk limit every process sharing the folder enforces.
    var limit: Int64 { knownLimit.load(ordering: .relaxed) }

    /// Stores `limit` in the index when one is given (the folder's limit is the last one set),
    /// evicting down to it at once, and learns the folder's limit.
    private func setUpLimit(_ limit: Int64?) throws(ItemCacheError) {
        do {
            if let limit {
                // A lower limit holds at once: eviction runs in the same transaction.
                let evicted = try transaction { db in
                    try db.execute(sql: "UPDATE stats SET diskLimit = ? WHERE id = 1", arguments: [limit])
                    self.knownLimit.store(limit, ordering: .relaxed)
                    do {
                        return try self.evict(db, keeping: [])
                    } catch let error as ItemCacheError where error.code == .tooLarge {
                        // Pinned items hold more than the new limit: they stay (and writes
                        // fail until some are unpinned); the limit is set all the same.
                        return []
                    }
                }
                for file in evicted { blobs.remove(file) }
            }
            _ = try pool.read { db in try self.usage(db) }
        } catch {
            throw storageError("cannot set the disk limit of", error)
        }
    }

    /// The rows' footprint (``costSQL(_:)``) and the folder's disk limit, as this transaction
    /// sees them.
    ///
    /// Every write reads them: two integer columns, read with the C API (`Row.fetchOne` would
    /// copy the row into boxed values first).
    func usage(_ db: Database) throws -> (bytes: Int64, limit: Int64, statsMissing: Bool) {
        let statement = try db.cachedStatement(sql: "SELECT cost, diskLimit FROM stats WHERE id = 1").sqliteStatement
        defer { sqlite3_reset(statement) }
        var usage = (bytes: Int64(0), limit: CacheConfiguration.defaultDiskLimit, statsMissing: false)
        switch sqlite3_step(statement) {
        case SQLITE_ROW:
            usage.bytes = sqlite3_column_int64(statement, 0)
            if sqlite3_column_type(statement, 1) != SQLITE_NULL {
                usage.limit = max(0, sqlite3_column_int64(statement, 1))
            }
        case SQLITE_DONE:
            // No stats row (damage, or a hostile edit): the total from the rows themselves and
            // the limit last known; a write (``restoreStats(_:)``) or reconciliation puts the
            // row back.
            usage.bytes =
                try Int64.fetchOne(db, sql: "SELECT CAST(total(\(Self.costSQL("item"))) AS INTEGER) FROM item") ?? 0
            usage.limit = knownLimit.load(ordering: .relaxed)
            usage.statsMissing = true
            return usage
        case let code:
            throw DatabaseError(
                resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)))
        }
        knownLimit.store(usage.limit, ordering: .relaxed)
        return usage
    }

    /// Puts a missing `stats` row back, inside a write transaction, with the rows' totals and
    /// the limit last known (the triggers keep it exact from then on).
    func restoreStats(_ db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO stats (id, bytes, count, diskLimit, cost)
                SELECT 1, CAST(total(size) AS INTEGER), count(*), ?, CAST(total(\(Self.costSQL("item"))) AS INTEGER) FROM item
                WHERE NOT EXISTS (SELECT 1 FROM stats WHERE id = 1)
                """, arguments: [knownLimit.load(ordering: .relaxed)])
    }

    /// A failure of the index or the files, as the caller sees it: a damaged index is
    /// ``ItemCacheError/Code/damagedIndex`` (the store sets it aside and starts again); anything
    /// else names the folder with the remedy for permissions and space.
    func storageError(_ what: String, _ error: any Error) -> ItemCacheError {
        if let error = error as? ItemCacheError { return error }
        if Self.isDamage(error) {
            return ItemCacheError(
                code: .damagedIndex,
                message:
                    "\(what) the cache at \(folder.path): its index is damaged (\(error)); the cache sets it aside and starts empty",
                underlying: error)
        }
        if (error as? FileSystemError)?.code == .noSpace || (error as? DatabaseError)?.resultCode == .SQLITE_FULL {
            return ItemCacheError(
                code: .storage,
                message:
                    "\(what) the cache at \(folder.path): the disk is full (\(error)); free space on it or lower the cache's limit",
                underlying: error)
        }
        return ItemCacheError(
            code: .storage,
            message:
                "\(what) the cache at \(folder.path): \(Self.withRemedy(error, "check the folder's permissions and free space"))",
            underlying: error)
    }
}
