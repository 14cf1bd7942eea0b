import DatabaseKit
import FileKit
import Foundation
import GRDB
import GRDBSQLite
import StorageFormat
import Synchronization
import Transport

/// Everything content-sync remembers between runs, in one SQLite file outside the content
/// folder: the local version, the storage's ETags, the last check, the update in progress with
/// its completed downloads, and the history of updates.
///
/// GRDB on the system libsqlite3, WAL mode (readers never block the one writer). Writes run on
/// GRDB's own queue, so awaiting them never blocks Swift's cooperative threads.
///
/// Internal: apps read what it holds through ``CacheManager`` and ``SyncStatus``, as plain values.
final class StateStore: Sendable {
    let pool: DatabasePool
    /// The database file.
    let path: String
    /// The database's folder, held open: SQLite opens the file through it (`HeldFolderPath`),
    /// so a folder renamed away and another put in its place is never the one read or written.
    /// Nil where it cannot be opened; SQLite then opens `path`.
    let folder: HeldFolder?

    /// How many history entries are kept. Older ones go as new ones are recorded, except the
    /// newest success, which ``lastSuccess()`` reports however many failures followed it.
    static let historyRetention = 1_000

    /// Opens (creating when needed) the state database at `path`.
    init(path: String) throws(SyncError) {
        self.path = path
        let folder = (path as NSString).deletingLastPathComponent
        try Self.checkOwnedFiles(of: path)
        try Self.refuseForeignDatabase(at: path)
        var held: HeldFolder?
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            // A link at the folder's own path is followed: the caller chose it. A folder this
            // user may not list (mode 0300) cannot be held: SQLite opens the path, as before.
            held = try? LongPath.openFolder(
                folder.isEmpty ? "." : folder, followingLink: true, operation: "cannot open the state database's folder"
            ).map { descriptor throws(FileSystemError) in try HeldFolder(adopting: descriptor, shownAs: folder) }
            let name = (path as NSString).lastPathComponent
            // Checked again in the folder held: the one checked by path above may have been
            // renamed away, and another put in its place, since.
            if let held { try Self.checkCompanions(of: path, in: held.descriptor) }
            let opened = held.flatMap { HeldFolderPath.path(name, inFolder: $0.descriptor) } ?? path
            var configuration = Configuration()
            configuration.busyMode = .timeout(Self.busyTimeout)
            // Every connection keeps the folder's descriptor open until it closes.
            let keeper = held
            configuration.prepareDatabase { _ in withExtendedLifetime(keeper) {} }
            pool = try SharedDatabase.openPool(path: opened, configuration: configuration, migrator: Self.migrator)
            self.folder = held
        } catch {
            // Out of descriptors, SQLite says only "unable to open": the file is fine, and
            // deleting it would cost a whole restore for nothing.
            // Nor is a database this user may not write (or on a read-only disk) damaged.
            if let reason = FileSystemError.descriptorShortageReason()
                ?? FileSystemError.databaseAccessReason(path: path)
            {
                throw SyncError(
                    code: .stateStore, message: "cannot open the state database \(path): \(reason)", underlying: error)
            }
            if SharedDatabase.isDamage(error), !SharedDatabase.looksLikeSQLite(path) {
                // No underlying error: not ``isDamage(_:)``, which a reset would delete.
                throw SyncError(
                    code: .stateStore,
                    message:
                        "\(path) is not a state database (not an SQLite file at all): give the state database's path; if it was this agent's state, damaged beyond reading, delete it by hand to start over"
                )
            }
            if SharedDatabase.isDamage(error) {
                throw SyncError(
                    code: .stateStore,
                    message:
                        "the state database \(path) is damaged (\(SharedDatabase.shortDescription(error))); \(Self.damageRemedy)",
                    underlying: error)
            }
            throw SyncError(
                code: .stateStore,
                message:
                    "cannot open the state database \(path): \(SharedDatabase.shortDescription(error)); if it is this agent's state, delete it to start over (the next run restores from the archive); if not, give the state database's path",
                underlying: error)
        }
    }

    /// Refuses another program's SQLite database given as the state database: tables of its own
    /// and none of this agent's (nor the migrations' record). Migrating it added this agent's
    /// tables to it (an outside audit), and a reset could have deleted it.
    static func refuseForeignDatabase(at path: String) throws(SyncError) {
        guard let info = FileSystem.status(of: path), info.st_mode & S_IFMT == S_IFREG, info.st_size > 0,
            let answers = SharedDatabase.strings(
                readingOnly: path,
                [
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
                    "SELECT identifier FROM grdb_migrations",
                ]),
            let tables = answers[0], !tables.isEmpty
        else { return }
        // This agent's: one of its own migrations recorded (a GRDB app keeps `grdb_migrations`
        // too), or, the record emptied (damage), several of its tables.
        let migrations = Set(answers[1] ?? [])
        if !migrations.isDisjoint(with: ownMigrationMarks) { return }
        if tables.filter(ownTables.contains).count >= 3 { return }
        throw SyncError(
            code: .configuration,
            message:
                "\(path) is another program's SQLite database (it has tables of its own and none of this agent's): give the state database's own path"
        )
    }

    /// Migrations only this agent's state database records (``migrator``'s identifiers).
    private static let ownMigrationMarks: Set<String> = [
        "v2: error codes", "v3: base URL", "v4: rollback protection", "v5: file fingerprints",
        "v6: attempt bookkeeping",
    ]
    /// Tables only this agent's state database holds.
    private static let ownTables: Set<String> = [
        "syncState", "cachedResource", "pendingPlan", "completedDownload", "updateHistory", "fileFingerprint",
        "treeIndex", "treeEntry", "liveFolder", "fullCheck", "trustPin",
    ]

    /// What to do about a damaged state database.
    static let damageRemedy =
        "reset the folder, or delete the database, to start over (the next sync restores from the archive)"

    /// The folder a damaged database at `path` records, read without migrating or checking
    /// anything; nil when that cannot be read.
    static func recordedFolder(damagedDatabase path: String) -> String? {
        var configuration = Configuration()
        configuration.readonly = true
        return try? DatabaseQueue(path: path, configuration: configuration).read { db in
            try String.fetchOne(db, sql: "SELECT contentDirectory FROM syncState WHERE id = 1")
        }
    }

    /// Empties a damaged database in place, through this store's own connections, and runs the
    /// migrations again: a reset through a store that opened before the damage (a manager's),
    /// which cannot delete the file under its own connections. Throws when the file is too
    /// damaged to be written over; deleting it is then the way out.
    func eraseDamaged() async throws(SyncError) {
        do {
            try await pool.erase()
            try Self.migrator.migrate(pool)
        } catch {
            throw SyncError(
                code: .stateStore,
                message:
                    "cannot empty the damaged state database \(path) in place (\(SharedDatabase.shortDescription(error))): delete it to start over (the next sync restores from the archive)",
                underlying: error)
        }
    }

    /// Whether `error` (thrown by ``init(path:)``) says the database is damaged, as opposed to a
    /// lock, a permission or the disk.
    static func isDamage(_ error: SyncError) -> Bool {
        error.code == .stateStore && error.underlying.map(SharedDatabase.isDamage) == true
    }

    /// Refuses a state database whose files are not plain files where they are expected.
    ///
    /// SQLite follows a symlink at the database's own path (to keep its -wal beside the real
    /// file), and opens its `-wal`, `-shm` and `-journal` files and the update lock
    /// (`<database>.lock`) through one: a symlink planted at any of them, even dangling, would
    /// have an update create or write a file elsewhere. Each one that exists must be a regular
    /// file; the error names it and the fix.
    static func checkOwnedFiles(of path: String) throws(SyncError) {
        var info = stat()
        if lstat(path, &info) == 0 {
            switch info.st_mode & S_IFMT {
            case S_IFREG: break
            case S_IFLNK:
                throw SyncError(
                    code: .configuration,
                    message:
                        "the state database \(path) is a symlink; give the real file's path (through a symlink an update could write elsewhere)"
                )
            case S_IFDIR:
                throw SyncError(
                    code: .configuration,
                    message:
                        "the state database \(path) is a folder, not a file: give a file's path (or leave the option out for the default under $XDG_STATE_HOME)"
                )
            default:
                throw SyncError(
                    code: .configuration,
                    message: "the state database \(path) is not a regular file: give a file's path")
            }
        }
        try checkCompanions(of: path, in: nil)
    }

    /// Refuses a `-wal`, `-shm`, `-journal` or `.lock` file of the database at `path` that is
    /// not a regular file: looked up in `folder` (a descriptor of the database's folder) when
    /// given, else by path.
    static func checkCompanions(of path: String, in folder: Int32?) throws(SyncError) {
        var info = stat()
        let name = (path as NSString).lastPathComponent
        for (suffix, role) in [
            ("-wal", "write-ahead log"), ("-shm", "shared memory index"), ("-journal", "journal"),
            (".lock", "update lock"),
        ] {
            let owned = path + suffix
            let found =
                folder.map { fstatat($0, name + suffix, &info, AT_SYMLINK_NOFOLLOW) } ?? lstat(owned, &info)
            guard found == 0, info.st_mode & S_IFMT != S_IFREG else { continue }
            let kind = info.st_mode & S_IFMT == S_IFLNK ? "a symlink" : "not a regular file"
            throw SyncError(
                code: .configuration,
                message:
                    "the state database's \(role) \(owned) is \(kind), so an update could write elsewhere through it; remove it (it is made again; the database's other files are kept)"
            )
        }
    }

    /// Migrations are never edited once shipped: add a new one instead.
    private static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(
                sql: """
                    CREATE TABLE syncState (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        localVersion TEXT,
                        state TEXT NOT NULL,
                        lastError TEXT,
                        lastCheck DATETIME,
                        contentDirectory TEXT NOT NULL
                    );
                    CREATE TABLE cachedResource (
                        url TEXT PRIMARY KEY,
                        etag TEXT NOT NULL,
                        body BLOB NOT NULL,
                        fetchedAt DATETIME NOT NULL
                    );
                    CREATE TABLE pendingPlan (
                        id INTEGER PRIMARY KEY CHECK (id = 1),
                        identity TEXT NOT NULL,
                        kind TEXT NOT NULL,
                        fromVersion TEXT,
                        toVersion TEXT NOT NULL,
                        phase TEXT NOT NULL,
                        stagedDevice INTEGER,
                        stagedInode INTEGER,
                        createdAt DATETIME NOT NULL
                    );
                    CREATE TABLE completedDownload (
                        planIdentity TEXT NOT NULL,
                        path TEXT NOT NULL,
                        bytes INTEGER NOT NULL,
                        PRIMARY KEY (planIdentity, path)
                    );
                    CREATE TABLE updateHistory (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        startedAt DATETIME NOT NULL,
                        finishedAt DATETIME NOT NULL,
                        fromVersion TEXT,
                        toVersion TEXT,
                        kind TEXT NOT NULL,
                        outcome TEXT NOT NULL,
                        error TEXT,
                        bytesDownloaded INTEGER NOT NULL,
                        filesDownloaded INTEGER NOT NULL
                    );
                    """)
        }
        migrator.registerMigration("v2: error codes") { db in
            try db.execute(sql: "ALTER TABLE syncState ADD COLUMN lastErrorCode TEXT")
        }
        migrator.registerMigration("v3: base URL") { db in
            try db.execute(sql: "ALTER TABLE syncState ADD COLUMN baseURL TEXT")
        }
        migrator.registerMigration("v4: rollback protection") { db in
            try db.execute(sql: "ALTER TABLE syncState ADD COLUMN highestAcceptedVersion TEXT")
        }
        migrator.registerMigration("v5: file fingerprints") { db in
            try db.create(table: "fileFingerprint") { table in
                table.column("device", .integer).notNull()
                table.column("inode", .integer).notNull()
                table.column("size", .integer).notNull()
                table.column("modifiedNanoseconds", .integer).notNull()
                table.column("sha256", .text).notNull()
                table.primaryKey(["device", "inode"])
            }
        }
        migrator.registerMigration("v6: attempt bookkeeping") { db in
            try db.execute(
                sql: """
                    ALTER TABLE updateHistory ADD COLUMN errorCode TEXT;
                    ALTER TABLE syncState ADD COLUMN consecutiveFailures INTEGER NOT NULL DEFAULT 0;
                    """)
        }
        migrator.registerMigration("v7: trust pins") { db in
            try db.execute(
                sql: """
                    CREATE TABLE trustPin (
                        keyID TEXT PRIMARY KEY,
                        publicKey TEXT NOT NULL,
                        pinnedAt DATETIME NOT NULL
                    );
                    """)
        }
        // Swift, not SQL: SQLite cannot find a URL's user info in prose. Before it, a base URL's
        // password or token was kept in the base URL, the stored files' keys, a restore's plan
        // identity and every message that quoted a URL.
        migrator.registerMigration("v8: no secrets in URLs", migrate: redactStoredURLs)
        // The previous version kept in the staging area as the base of the next one (see
        // ``TwinState``): which folder it is, the version it is caught up against, and where it
        // may differ from it.
        migrator.registerMigration("v9: twin tree") { db in
            try db.execute(
                sql: """
                    CREATE TABLE twin (
                        id INTEGER PRIMARY KEY,
                        device INTEGER NOT NULL,
                        inode INTEGER NOT NULL,
                        baseVersion TEXT NOT NULL
                    );
                    CREATE TABLE twinChange (path TEXT PRIMARY KEY) WITHOUT ROWID;
                    ALTER TABLE pendingPlan ADD COLUMN keepsTwin BOOLEAN NOT NULL DEFAULT 0;
                    """)
        }
        // The current version's tree as verified at its switch (each file's fingerprint, each
        // folder's digest, the root's as ''), so a replay checks only the folders it changes;
        // and the twin's folders' ctimes, so a catch-up sees what changed in the twin meanwhile.
        migrator.registerMigration("v10: tree index") { db in
            try db.execute(
                sql: """
                    CREATE TABLE treeEntry (
                        path TEXT PRIMARY KEY,
                        isFolder INTEGER NOT NULL,
                        size INTEGER NOT NULL,
                        hash TEXT NOT NULL
                    ) WITHOUT ROWID;
                    CREATE TABLE treeIndex (id INTEGER PRIMARY KEY, version TEXT NOT NULL, shape TEXT NOT NULL);
                    CREATE TABLE twinFolder (path TEXT PRIMARY KEY, ctime INTEGER NOT NULL) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v11: twin catch-up progress") { db in
            try db.execute(sql: "ALTER TABLE pendingPlan ADD COLUMN twinCaughtUp BOOLEAN NOT NULL DEFAULT 0")
        }
        // The content folder's folders' ctimes as recorded right after the switch, so a replay
        // plans from the tree index while none changed; and when an update last listed the whole
        // folder and checked every file's identity (the full check).
        migrator.registerMigration("v12: live folders") { db in
            try db.execute(
                sql: """
                    CREATE TABLE liveFolder (path TEXT PRIMARY KEY, ctime INTEGER NOT NULL) WITHOUT ROWID;
                    CREATE TABLE fullCheck (id INTEGER PRIMARY KEY, checkedAt DOUBLE NOT NULL);
                    """)
        }
        // Each tree-index entry's folder ('a/b/' for 'a/b/c', '' at the top; NULL for the root
        // itself), so a replay lists a folder from the index with one indexed lookup.
        migrator.registerMigration("v13: tree index by folder") { db in
            try db.execute(
                sql: """
                    ALTER TABLE treeEntry ADD COLUMN parent TEXT;
                    UPDATE treeEntry SET parent = rtrim(path, replace(path, '/', '')) WHERE path <> '';
                    CREATE INDEX treeEntryByParent ON treeEntry(parent);
                    """)
        }
        // The index's folders, read by every replay that plans from the index: without it that
        // read scanned every entry (100,000 rows for 1,000 folders).
        migrator.registerMigration("v14: tree index folders") { db in
            try db.execute(sql: "CREATE INDEX treeEntryFolders ON treeEntry(path) WHERE isFolder = 1")
        }
        // Each entry keyed by its folder and name ('a/b/' and 'c' for 'a/b/c'; '' and '' for the
        // root), so a folder's entries are one range of the table: listing a folder no longer
        // looks each entry up again by path (a B-tree search per row, a third of a replay's
        // database time), and an update writes one tree instead of two. Rows are copied as
        // they are: one that does not read as an entry is refused where it is read, as before.
        migrator.registerMigration("v15: tree index keyed by folder and name") { db in
            try db.execute(
                sql: """
                    CREATE TABLE treeNode (
                        parent TEXT NOT NULL,
                        name TEXT NOT NULL,
                        isFolder INTEGER NOT NULL,
                        size INTEGER NOT NULL,
                        hash TEXT NOT NULL,
                        PRIMARY KEY (parent, name)
                    ) WITHOUT ROWID;
                    INSERT OR IGNORE INTO treeNode (parent, name, isFolder, size, hash)
                        SELECT coalesce(parent, ''), CASE WHEN parent IS NULL THEN '' ELSE substr(path, length(parent) + 1) END,
                            isFolder, size, hash
                        FROM treeEntry WHERE parent IS NOT NULL OR path = '';
                    DROP TABLE treeEntry;
                    ALTER TABLE treeNode RENAME TO treeEntry;
                    CREATE INDEX treeEntryFolders ON treeEntry(parent, name) WHERE isFolder = 1;
                    """)
        }
        // A restore's tree check streams its findings here, batch by batch, instead of holding the
        // tree (``IndexUpdate/staged(_:)``): the switch's transaction renames the first two into
        // the index and the fingerprints, copies the folder times into the live folders, and
        // empties what is left. Rows left by a run
        // that stopped before its switch are cleared by the next streamed check.
        migrator.registerMigration("v16: staged tree index") { db in
            try db.execute(sql: stagedTreeEntryTable + stagedFingerprintTable)
            try db.execute(
                sql: "CREATE TABLE stagedLiveFolder (path TEXT PRIMARY KEY, ctime INTEGER NOT NULL) WITHOUT ROWID")
        }
        // Before it, the value of a secret query parameter (`?token=`) was kept as v8 kept user info.
        migrator.registerMigration("v17: no secrets in URL queries", migrate: redactStoredURLs)
        return migrator
    }

    /// Rewrites every stored URL and message with `Redaction/text(_:)` (a cached copy whose key
    /// changes is deleted: the next fetch is unconditional), zeroing the space the old values
    /// leave in their pages.
    private static func redactStoredURLs(_ db: Database) throws {
        try db.execute(sql: "PRAGMA secure_delete = ON")
        defer { try? db.execute(sql: "PRAGMA secure_delete = OFF") }
        for url in try String.fetchAll(db, sql: "SELECT url FROM cachedResource") where Redaction.text(url) != url {
            try db.execute(sql: "DELETE FROM cachedResource WHERE url = ?", arguments: [url])
        }
        for (table, column) in [
            ("syncState", "baseURL"), ("syncState", "lastError"), ("updateHistory", "error"),
            ("pendingPlan", "identity"), ("completedDownload", "planIdentity"),
        ] {
            for value in try String.fetchAll(
                db, sql: "SELECT DISTINCT \(column) FROM \(table) WHERE \(column) IS NOT NULL")
            where Redaction.text(value) != value {
                try db.execute(
                    sql: "UPDATE OR REPLACE \(table) SET \(column) = ? WHERE \(column) = ?",
                    arguments: [Redaction.text(value), value])
            }
        }
    }

    private func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(SyncError) -> T {
        do {
            return try await pool.write(body)
        } catch {
            throw Self.failure(error, "writing", path)
        }
    }

    /// A write that lands even when the calling task is cancelled: the record of a cancelled
    /// update is written as it winds down (GRDB's async `write` refuses to start in a cancelled
    /// task). It runs on GRDB's writer queue, like any write.
    private func writeRegardlessOfCancellation<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T)
        async throws(SyncError) -> T
    {
        let result: Result<T, any Error> = await withCheckedContinuation { continuation in
            pool.asyncWrite(body) { _, result in continuation.resume(returning: result) }
        }
        switch result {
        case .success(let value):
            return value
        case .failure(let error):
            throw SyncError(
                code: .stateStore, message: "writing the state database \(path) failed: \(error)", underlying: error)
        }
    }

    private func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(SyncError) -> T {
        do {
            return try await pool.read(body)
        } catch {
            throw Self.failure(error, "reading", path)
        }
    }

    /// A database error as a ``SyncError``. GRDB refuses to start work in a cancelled task: that
    /// is the update being cancelled, not a broken database.
    private static func failure(_ error: any Error, _ doing: String, _ path: String) -> SyncError {
        if error is CancellationError {
            return SyncError(
                code: .cancelled, message: "the update was cancelled; run it again to continue where it stopped",
                underlying: error)
        }
        let reason =
            SharedDatabase.isDamage(error)
            ? "; it is damaged: \(damageRemedy)"
            : FileSystemError.databaseAccessReason(path: path).map { "; \($0)" } ?? ""
        return SyncError(
            code: .stateStore,
            message: "\(doing) the state database \(path) failed: \(SharedDatabase.shortDescription(error))\(reason)",
            underlying: error)
    }

    // MARK: - Sync state

    func syncState() async throws(SyncError) -> SyncStateRecord? {
        try await read { db in try SyncStateRecord.fetchOne(db, key: 1) }
    }

    /// Changes the state row, creating it for `contentDirectory` first when absent.
    func updateSyncState(contentDirectory: String, _ change: @escaping @Sendable (inout SyncStateRecord) -> Void)
        async throws(SyncError)
    {
        try await write { db in
            var record =
                try SyncStateRecord.fetchOne(db, key: 1)
                ?? SyncStateRecord(localVersion: nil, state: "unknown", contentDirectory: contentDirectory)
            change(&record)
            try record.save(db)
        }
    }

    // MARK: - Cached storage files

    /// The key `url`'s stored copy is kept under: the URL with its password or token redacted, so
    /// that none is written to the database (under another password it is the same file).
    static func key(_ url: URL) -> String {
        Redaction.url(url)
    }

    func cachedResource(_ url: URL) async throws(SyncError) -> CachedResourceRecord? {
        try await read { db in try CachedResourceRecord.fetchOne(db, key: Self.key(url)) }
    }

    /// The stored ETag of `url`, without reading its body (a change list's may be 60 MB).
    func cachedETag(_ url: URL) async throws(SyncError) -> String? {
        try await read { db in
            try String.fetchOne(db, sql: "SELECT etag FROM cachedResource WHERE url = ?", arguments: [Self.key(url)])
        }
    }

    /// Forgets the stored copies of `urls`.
    func deleteCachedResources(_ urls: [URL]) async throws(SyncError) {
        guard !urls.isEmpty else { return }
        let keys = urls.map(Self.key)
        try await write { db in _ = try CachedResourceRecord.deleteAll(db, keys: keys) }
    }

    /// Stores a storage file and its ETag.
    ///
    /// One statement made for the call, not the record's `save`: that runs an UPDATE and then an
    /// INSERT, two statements GRDB keeps cached with their arguments bound, and SQLite keeps its
    /// own copy of a bound blob, so a 60 MB change list stayed in memory three times over.
    func saveCachedResource(_ record: CachedResourceRecord) async throws(SyncError) {
        try await write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO cachedResource (url, etag, body, fetchedAt) VALUES (?, ?, ?, ?)",
                arguments: [record.url, record.etag, record.body, record.fetchedAt])
        }
    }

    // MARK: - Pending plan

    func pendingPlan() async throws(SyncError) -> PendingPlanRecord? {
        try await read { db in try PendingPlanRecord.fetchLenient(db) }
    }

    /// Starts tracking `plan`, dropping any other pending plan and its completed downloads.
    ///
    /// `twinChanges` are the paths where the plan's version differs from the current content:
    /// they join the twin's dirty set in the same transaction, before the twin is touched (the
    /// set only grows until a switch, so it covers any half-done patch). With `keepingTwin` false
    /// the recorded twin is forgotten first, before its folder goes. Nil `twinChanges` (a
    /// restore, or a tree with intruders) keeps no twin after the switch.
    func beginPlan(_ plan: PendingPlanRecord, twinChanges: [SafeRelativePath]? = nil, keepingTwin: Bool = false)
        async throws(SyncError)
    {
        try await write { db in
            if !keepingTwin { try Self.dropTwin(db) }
            if let twinChanges { try Self.addTwinChanges(twinChanges, in: db) }
            var plan = plan
            plan.keepsTwin = twinChanges != nil
            if var existing = try PendingPlanRecord.fetchLenient(db), existing.identity == plan.identity {
                existing.keepsTwin = plan.keepsTwin
                try existing.update(db)
                return
            }
            try CompletedDownloadRecord.deleteAll(db)
            try PendingPlanRecord.deleteAll(db)
            try plan.insert(db)
        }
    }

    /// Marks the pending plan as switching to the staged folder `device`/`inode`; `keepsTwin`
    /// false says the previous version is not to be kept as a twin after all (a tree check
    /// repaired paths the dirty set does not name).
    func markSwitching(device: Int64, inode: Int64, keepsTwin: Bool = true) async throws(SyncError) {
        try await write { db in
            guard var plan = try PendingPlanRecord.fetchLenient(db) else { return }
            plan.phase = .switching
            plan.stagedDevice = device
            plan.stagedInode = inode
            plan.keepsTwin = plan.keepsTwin && keepsTwin
            try plan.update(db)
        }
    }

    /// Records that the pending plan's catch-up of the twin has done its removals.
    func markTwinCaughtUp() async throws(SyncError) {
        try await write { db in
            guard var plan = try PendingPlanRecord.fetchLenient(db) else { return }
            plan.twinCaughtUp = true
            try plan.update(db)
        }
    }

    // MARK: - Twin

    /// The twin on record, or nil when there is none or a row of its dirty set is not a safe
    /// path (a damaged or hostile database: the twin is then not trusted, and rebuilt).
    func twin() async throws(SyncError) -> TwinState? {
        try await read { db in
            guard
                let row = try Row.fetchOne(db, sql: "SELECT device, inode, baseVersion FROM twin WHERE id = 1"),
                let device: Int64 = row.lenient(0), let inode: Int64 = row.lenient(1),
                let base: String = row.lenient(2)
            else { return nil }
            var changes: [SafeRelativePath] = []
            for text in try String.fetchAll(db, sql: "SELECT path FROM twinChange") {
                guard let path = try? SafeRelativePath(validating: text), !path.isRoot else { return nil }
                changes.append(path)
            }
            return TwinState(device: device, inode: inode, baseVersion: base, changes: changes)
        }
    }

    /// The twin's folder alone, its dirty set unread: what an update that finds nothing to do
    /// keeps while it clears the staging area's leftovers. After a 10,000-file update the dirty
    /// set is 10,000 paths, and reading them (``twin()``) was half of the next no-change poll.
    func twinIdentity() async throws(SyncError) -> (device: Int64, inode: Int64)? {
        try await read { db in
            guard
                let row = try Row.fetchOne(db, sql: "SELECT device, inode FROM twin WHERE id = 1"),
                let device: Int64 = row.lenient(0), let inode: Int64 = row.lenient(1)
            else { return nil }
            return (device, inode)
        }
    }

    /// Forgets the twin (call it before its folder is removed: a new folder could get its inode).
    func dropTwin() async throws(SyncError) {
        try await write { db in try Self.dropTwin(db) }
    }

    /// Adds `paths` to the twin's dirty set.
    private static func addTwinChanges(_ paths: [SafeRelativePath], in db: Database) throws {
        try BulkInsert.run(db, sql: "INSERT OR IGNORE INTO twinChange (path) VALUES (?)", paths) { path, row in
            row.text(path.string)
        }
    }

    private static func dropTwin(_ db: Database) throws {
        try db.execute(sql: "DELETE FROM twin; DELETE FROM twinChange; DELETE FROM twinFolder")
    }

    /// The twin's folders (by content path, the root as '') and their `ctime`s as recorded after
    /// the switch that made it the twin; empty when none are recorded, or when a row is not a
    /// safe path (a damaged or hostile database: the twin is then not verified).
    func twinFolders() async throws(SyncError) -> [SafeRelativePath: Int64] {
        try await read { db in try Self.folderTimes(in: "twinFolder", db) }
    }

    /// The content folder's folders and their `ctime`s as recorded right after the switch to the
    /// current version (see ``twinFolders()``; empty the same way).
    func liveFolders() async throws(SyncError) -> [SafeRelativePath: Int64] {
        try await read { db in try Self.folderTimes(in: "liveFolder", db) }
    }

    private static func folderTimes(in table: String, _ db: Database) throws -> [SafeRelativePath: Int64] {
        var folders: [SafeRelativePath: Int64] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT path, ctime FROM \(table)") {
            guard let path = safePath(row[0]), let ctime: Int64 = row.lenient(1) else { return [:] }
            folders[path] = ctime
        }
        return folders
    }

    /// A stored content path ('' for the root), or nil when the row is not one.
    private static func safePath(_ value: DatabaseValue) -> SafeRelativePath? {
        guard let text = String.fromDatabaseValue(value) else { return nil }
        return text.isEmpty ? .root : try? SafeRelativePath(validating: text)
    }

    /// Forgets the content folder's recorded folder times: the next replay lists the folder.
    func dropLiveFolders() async throws(SyncError) {
        try await write { db in try db.execute(sql: "DELETE FROM liveFolder") }
    }

    /// When an update last listed the whole content folder and checked every file's identity.
    func lastFullCheck() async throws(SyncError) -> Date? {
        try await read { db in
            // Read leniently: a damaged value (text, a blob) is no full check, never a crash.
            let row = try Row.fetchOne(db, sql: "SELECT checkedAt FROM fullCheck WHERE id = 1")
            return (row?.lenient(0) as Double?).flatMap { $0.isFinite ? Date(timeIntervalSince1970: $0) : nil }
        }
    }

    /// Records that a full check of the current version found it whole at `date` (a no-change
    /// update's periodic check; a switch records its own in ``finishPlan``).
    func recordFullCheck(at date: Date) async throws(SyncError) {
        try await write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO fullCheck (id, checkedAt) VALUES (1, ?)",
                arguments: [date.timeIntervalSince1970])
        }
    }

    /// How long a statement waits for another connection's lock.
    static let busyTimeout: TimeInterval = 10

    /// Copies the write-ahead log into the database file and empties it. After an update, so
    /// that the update pays for its own writes: a process exits without closing the database,
    /// and the next one to open it (the next poll) reads the whole log to rebuild its index
    /// (22 MB, +50 ms, after a 10,000-file update at 100,000 files), then copies it at its first
    /// commit past SQLite's 1,000-page mark. Passive first (never waits); the log is then
    /// truncated only if no reader of another process needs it now. Best effort: what is not
    /// done now is done later.
    func checkpoint() async {
        _ = try? await pool.writeWithoutTransaction { db in
            try db.checkpoint(.passive)
            sqlite3_busy_timeout(db.sqliteConnection, 0)
            defer { sqlite3_busy_timeout(db.sqliteConnection, CInt(Self.busyTimeout * 1000)) }
            _ = try? db.checkpoint(.truncate)
        }
    }

    /// The query of ``indexedFolders()``: answered from the partial index `treeEntryFolders`.
    static let indexedFoldersQuery = "SELECT parent, name FROM treeEntry WHERE isFolder = 1 AND name <> ''"

    /// The folders the tree index records (the root not included); nil when a row is not a safe
    /// path.
    func indexedFolders() async throws(SyncError) -> Set<SafeRelativePath>? {
        try await read { db in
            var folders = Set<SafeRelativePath>()
            for row in try Row.fetchAll(db, sql: Self.indexedFoldersQuery) {
                guard let parent = String.fromDatabaseValue(row[0]), let name = String.fromDatabaseValue(row[1]),
                    let path = try? SafeRelativePath(validating: parent + name)
                else { return nil }
                folders.insert(path)
            }
            return folders
        }
    }

    /// The entries of `folder` in the tree index, for a lazy plan (``VirtualTree/init(loader:)``).
    /// Blocking: call it from the planning thread. Nil when the database cannot be read or a row
    /// is not a safe path directly in `folder` (damaged or hostile).
    ///
    /// A plan needs names and kinds only. The whole entries (fingerprints and digests) go into
    /// `listings` for the tree check of the same update (``indexDelta(_:changed:listed:)``),
    /// which then does not read the folder again; a folder with a row that does not read as an
    /// entry is left out of them, so that the check reads it, and refuses it, itself.
    func indexedEntries(of folder: SafeRelativePath, keeping listings: IndexListings? = nil)
        -> [VirtualTree.ListedEntry]?
    {
        let listed = try? pool.read { db -> [VirtualTree.ListedEntry]? in
            var entries: [VirtualTree.ListedEntry] = []
            var whole: [(name: String, entry: TreeDigest.Entry)]? = listings == nil ? nil : []
            let complete = try Self.forEachChild(of: folder, selecting: "isFolder, size, hash", in: db) { name, row in
                guard let isFolder: Bool = row.lenient(1) else { return false }
                entries.append(VirtualTree.ListedEntry(name: name, isFolder: isFolder))
                if whole != nil {
                    if let entry = Self.indexEntry(row) { whole!.append((name, entry)) } else { whole = nil }
                }
                return true
            }
            guard complete else { return nil }
            if let whole { listings?.keep(whole, of: folder) }
            return entries
        }
        return listed ?? nil
    }

    /// Whether the tree index records each of `paths` as a folder (true) or a file (false); a
    /// path it does not record has no key. One read, one lookup by key each; nil when a row's
    /// kind is damaged. (As ``indexedEntries(of:)``, only the kind is read: the tree check
    /// reads the rest, and checks it.)
    func indexedKinds(of paths: [SafeRelativePath]) -> [SafeRelativePath: Bool]? {
        let kinds = try? pool.read { db -> [SafeRelativePath: Bool]? in
            let statement = try db.cachedStatement(sql: "SELECT isFolder FROM treeEntry WHERE parent = ? AND name = ?")
            var kinds: [SafeRelativePath: Bool] = [:]
            for path in paths {
                let key = Self.key(of: path)
                guard let row = try Row.fetchOne(statement, arguments: [key.parent, key.name]) else { continue }
                guard let isFolder: Bool = row.lenient(0) else { return nil }
                kinds[path] = isFolder
            }
            return kinds
        }
        return kinds ?? nil
    }

    /// The tree index's entries directly in `folder`: one range of the table. Nil when a row is
    /// damaged or hostile (not a safe name, or not an entry).
    private static func indexEntries(in folder: SafeRelativePath, _ db: Database) throws
        -> [(name: String, entry: TreeDigest.Entry)]?
    {
        var entries: [(name: String, entry: TreeDigest.Entry)] = []
        let whole = try forEachChild(of: folder, selecting: "isFolder, size, hash", in: db) { name, row in
            guard let entry = indexEntry(row) else { return false }
            entries.append((name, entry))
            return true
        }
        return whole ? entries : nil
    }

    /// Hands `body` the name and row (`name`, then `columns`) of each tree-index entry directly in
    /// `folder`: one range of the table (its key starts with the folder's), less the root's own
    /// row (an empty name, ``key(of:)``). False as soon as a row's name is not one safe component
    /// (``childName(_:under:)``) or `body` refuses the row.
    private static func forEachChild(
        of folder: SafeRelativePath, selecting columns: String, in db: Database, _ body: (String, Row) -> Bool
    ) throws -> Bool {
        let statement = try db.cachedStatement(
            sql: "SELECT name, \(columns) FROM treeEntry WHERE parent = ? AND name <> ''")
        let key = parentKey(of: folder)
        let rows = try Row.fetchCursor(statement, arguments: [key])
        while let row = try rows.next() {
            guard let stored = String.fromDatabaseValue(row[0]), let name = childName(stored, under: key),
                body(name, row)
            else { return false }
        }
        return true
    }

    /// `name` as the name of an entry directly in the folder whose ``parentKey(of:)`` is `key`:
    /// nil unless it is one safe component and the path they make is within the longest path.
    static func childName(_ name: String, under key: String) -> String? {
        guard key.utf8.count + name.utf8.count <= SafeRelativePath.maxPathBytes,
            SafeRelativePath.isSafeComponent(name)
        else { return nil }
        return name
    }

    /// The entry a `treeEntry` row (`name, isFolder, size, hash`) records; nil for a damaged one.
    private static func indexEntry(_ row: Row) -> TreeDigest.Entry? {
        guard let isFolder: Bool = row.lenient(1), let size: Int64 = row.lenient(2),
            let hash: String = row.lenient(3), hash.utf8.count == 64, hash.utf8.allSatisfy({ HexDigest.isLowerHex($0) })
        else { return nil }
        if isFolder { return .folder(digest: hash) }
        return size >= 0 ? .file(FileFingerprint(size: size, sha256: hash)) : nil
    }

    /// The `parent` column of the entries in `folder`: its path and a slash, '' for the root.
    private static func parentKey(of folder: SafeRelativePath) -> String {
        folder.isRoot ? "" : folder.string + "/"
    }

    /// The key of `path`'s row in the tree index: its folder's ``parentKey(of:)`` and its name;
    /// '' and '' for the root (no entry has an empty name).
    private static func key(of path: SafeRelativePath) -> (parent: String, name: String) {
        guard let name = path.lastComponent else { return ("", "") }
        return (parentKey(of: path.parent), name)
    }

    /// How many file fingerprints are stored (rows of files gone since a whole check included).
    func fingerprintCount() async throws(SyncError) -> Int {
        try await read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM fileFingerprint") ?? 0 }
    }

    // MARK: - Tree index

    /// The version the tree index describes and its shape (``TreeShape/text``), if any.
    func treeIndex() async throws(SyncError) -> (version: String, shape: String)? {
        try await read { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT version, shape FROM treeIndex WHERE id = 1"),
                let version: String = row.lenient(0), let shape: String = row.lenient(1)
            else { return nil }
            return (version, shape)
        }
    }

    /// ``SyncPlan/indexDelta(changed:recorded:)`` against the recorded tree index. A recorded
    /// row that does not read as an entry (a damaged or hostile database) reads as missing, and
    /// the delta is nil. A folder the planning listed already is taken from `listed`.
    func indexDelta(_ plan: SyncPlan, changed: [SafeRelativePath], listed: IndexListings? = nil)
        async throws(SyncError) -> TreeIndexDelta?
    {
        try await read { db in
            // The delta lists each folder it hashes again, once: one range of the table (a damaged
            // row makes the whole folder unreadable, and the delta nil).
            plan.indexDelta(changed: changed) { folder in
                listed?.entries(of: folder) ?? (try? Self.indexEntries(in: folder, db)) ?? nil
            }
        }
    }

    /// The staged tables that become `treeEntry` and `fileFingerprint` at a switch (renamed, not
    /// copied: a copy would leave the file twice the index's size, the staged pages free), so
    /// each has their columns and keys: the definitions of migrations v15 (`treeNode`) and v5,
    /// which stay written there as shipped. `StreamedTreeCheckTests` compares the schemas.
    private static let stagedTreeEntryTable = """
        CREATE TABLE stagedTreeEntry (
            parent TEXT NOT NULL,
            name TEXT NOT NULL,
            isFolder INTEGER NOT NULL,
            size INTEGER NOT NULL,
            hash TEXT NOT NULL,
            PRIMARY KEY (parent, name)
        ) WITHOUT ROWID;
        """
    private static let stagedFingerprintTable = """
        CREATE TABLE stagedFingerprint (
            device INTEGER NOT NULL,
            inode INTEGER NOT NULL,
            size INTEGER NOT NULL,
            modifiedNanoseconds INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            PRIMARY KEY (device, inode)
        );
        """

    /// Empties the staged index (``IndexUpdate/staged(_:)``), before a streamed check fills it.
    func clearStagedIndex() async throws(SyncError) {
        try await write { db in try Self.clearStagedIndex(db) }
    }

    private static func clearStagedIndex(_ db: Database) throws {
        try db.execute(sql: "DELETE FROM stagedTreeEntry; DELETE FROM stagedFingerprint; DELETE FROM stagedLiveFolder")
    }

    /// Adds one batch of a streamed tree check's entries to the staged index, in one
    /// transaction. Synchronous: called from the blocking thread that walks the tree, which
    /// waits for the writer rather than holding more than a batch.
    func stage(_ batch: [TreeDigest.StreamedEntry]) throws(SyncError) {
        do {
            try pool.write { db in
                let entry = try BulkInsert(db, sql: Self.indexInsert(into: "stagedTreeEntry"))
                let fingerprint = try BulkInsert(db, sql: Self.fingerprintInsert(into: "stagedFingerprint"))
                let folder = try BulkInsert(
                    db, sql: "INSERT OR REPLACE INTO stagedLiveFolder (path, ctime) VALUES (?, ?)")
                for item in batch {
                    switch item {
                    case .file(let path, let found, let identity):
                        try entry.insert { Self.bindIndexRow(path, .file(found), &$0) }
                        if let identity {
                            let record = FileFingerprintRecord(identity, found)
                            try fingerprint.insert { Self.bindFingerprint(record, &$0) }
                        }
                    case .folder(let path, let digest, let changed):
                        try entry.insert { Self.bindIndexRow(path, .folder(digest: digest), &$0) }
                        if let changed {
                            try folder.insert { row in
                                row.text(path.string)
                                row.integer(changed)
                            }
                        }
                    }
                }
            }
        } catch {
            throw Self.failure(error, "writing", path)
        }
    }

    /// The insert of one tree index row into `table` (`treeEntry` or `stagedTreeEntry`): the
    /// index's rows and the staged ones that become them are written alike.
    private static func indexInsert(into table: String) -> String {
        "INSERT OR REPLACE INTO \(table) (parent, name, isFolder, size, hash) VALUES (?, ?, ?, ?, ?)"
    }

    /// The insert of one fingerprint row into `table` (`fileFingerprint` or `stagedFingerprint`).
    private static func fingerprintInsert(into table: String) -> String {
        "INSERT OR REPLACE INTO \(table) (device, inode, size, modifiedNanoseconds, sha256) VALUES (?, ?, ?, ?, ?)"
    }

    /// Binds `record` in ``fingerprintInsert(into:)``'s order.
    private static func bindFingerprint(_ record: FileFingerprintRecord, _ row: inout BulkInsert.Row) {
        row.integer(record.device)
        row.integer(record.inode)
        row.integer(record.size)
        row.integer(record.modifiedNanoseconds)
        row.text(record.sha256)
    }

    /// Binds the tree index row of `path` (parent, name, isFolder, size, hash) to `row`.
    private static func bindIndexRow(_ path: SafeRelativePath, _ entry: TreeDigest.Entry, _ row: inout BulkInsert.Row) {
        let key = key(of: path)
        row.text(key.parent)
        row.text(key.name)
        switch entry {
        case .folder(let digest):
            row.integer(1)
            row.integer(0)
            row.text(digest)
        case .file(let fingerprint):
            row.integer(0)
            row.integer(fingerprint.size)
            row.text(fingerprint.sha256)
        }
    }

    /// Writes the tree index for `version` in `db`.
    private static func recordIndex(_ update: IndexUpdate, version: String, in db: Database) throws {
        let insertSQL = indexInsert(into: "treeEntry")
        func record(_ entries: some Sequence<(SafeRelativePath, TreeDigest.Entry)>) throws {
            try BulkInsert.run(db, sql: insertSQL, entries) { entry, row in bindIndexRow(entry.0, entry.1, &row) }
        }
        let shape: TreeShape
        switch update {
        case .drop:
            try db.execute(sql: "DELETE FROM treeIndex")
            return
        case .shape(let only):
            try db.execute(sql: "DELETE FROM treeEntry")
            shape = only
        case .whole(let tree):
            try db.execute(sql: "DELETE FROM treeEntry")
            try record(TreeDigest.folderDigests(of: tree).lazy.map { ($0.0, .folder(digest: $0.1)) })
            try record(tree.files.lazy.map { ($0.key, .file($0.value)) })
            shape = TreeShape(folders: tree.folders, files: tree.files.keys)
        case .staged(let streamed):
            try db.execute(
                sql: """
                    DROP TABLE treeEntry;
                    ALTER TABLE stagedTreeEntry RENAME TO treeEntry;
                    CREATE INDEX treeEntryFolders ON treeEntry(parent, name) WHERE isFolder = 1;
                    """ + stagedTreeEntryTable)
            shape = streamed
        case .delta(let delta, let newShape):
            // A path, and everything below it: the rows whose folder key starts with its path and
            // a slash ('/' sorts just before '0' in bytes).
            // Bound through the C API (``BulkInsert``), as the entries are: a delta can remove
            // thousands of paths (a replay that deletes or replaces many), on the switch's
            // critical path.
            let remove = try BulkInsert(db, sql: "DELETE FROM treeEntry WHERE parent = ? AND name = ?")
            let removeBelow = try BulkInsert(
                db, sql: "DELETE FROM treeEntry WHERE parent >= ?1 || '/' AND parent < ?1 || '0'")
            for path in delta.removed where !path.isRoot {
                let key = key(of: path)
                try remove.insert { row in
                    row.text(key.parent)
                    row.text(key.name)
                }
                try removeBelow.insert { row in row.text(path.string) }
            }
            try record(delta.entries.lazy.map { ($0.key, $0.value) })
            shape = newShape
        }
        try db.execute(
            sql: "INSERT OR REPLACE INTO treeIndex (id, version, shape) VALUES (1, ?, ?)",
            arguments: [version, shape.text])
    }

    /// The downloads an older client recorded for a plan (the table is no longer written: a
    /// finished download is one present in `next/`; its rows are cleared at every switch).
    func completedDownloads(planIdentity: String) async throws(SyncError) -> Set<String> {
        try await read { db in
            Set(
                try String.fetchAll(
                    db, sql: "SELECT path FROM completedDownload WHERE planIdentity = ?", arguments: [planIdentity]))
        }
    }

    /// The version switch is durable: one transaction sets the new version, clears the plan
    /// and appends the history row.
    ///
    /// `twin` is the folder now holding the previous version, kept as the next one's base: it
    /// differs from the new version at `twinChanges` (nil keeps the recorded dirty set, a
    /// superset after an interrupted switch). A nil `twin` forgets any.
    func finishPlan(
        contentDirectory: String, newVersion: String, history: UpdateHistoryEntry,
        fingerprints: [FileFingerprintRecord] = [], replacingFingerprints: Bool = true,
        twin: (device: Int64, inode: Int64)? = nil, twinChanges: [SafeRelativePath]? = nil,
        twinFolders: [SafeRelativePath: Int64]? = nil, index: IndexUpdate = .drop,
        liveFolders: [SafeRelativePath: Int64]? = nil, fullCheckAt: Date? = nil
    ) async throws(SyncError) {
        try await write { db in
            try Self.recordIndex(index, version: newVersion, in: db)
            // The new content's folders, read after the swap: without them the next replay lists
            // the folder whole.
            try Self.replaceFolderTimes(in: "liveFolder", with: liveFolders, db)
            if let fullCheckAt {
                try db.execute(
                    sql: "INSERT OR REPLACE INTO fullCheck (id, checkedAt) VALUES (1, ?)",
                    arguments: [fullCheckAt.timeIntervalSince1970])
            }
            // The recorded folders are the new twin's, or none (a twin kept after an interrupted
            // switch is then not verified, and its catch-up is checked whole).
            try Self.replaceFolderTimes(in: "twinFolder", with: twin == nil ? nil : twinFolders, db)
            if let twin {
                try db.execute(
                    sql: "INSERT OR REPLACE INTO twin (id, device, inode, baseVersion) VALUES (1, ?, ?, ?)",
                    arguments: [twin.device, twin.inode, newVersion])
                if let twinChanges {
                    try db.execute(sql: "DELETE FROM twinChange")
                    try Self.addTwinChanges(twinChanges, in: db)
                }
            } else {
                try Self.dropTwin(db)
            }
            // The new version's files: what the next update's tree check need not hash again
            // (after a check that read only the changed files, the others' rows stay).
            if case .staged = index {
                // The streamed check's folders (the root's time, read after the swap, is in
                // `liveFolders`) and files, the latter replacing all others.
                try db.execute(
                    sql: """
                        INSERT OR REPLACE INTO liveFolder (path, ctime) SELECT path, ctime FROM stagedLiveFolder;
                        DROP TABLE fileFingerprint;
                        ALTER TABLE stagedFingerprint RENAME TO fileFingerprint;
                        """ + Self.stagedFingerprintTable)
            } else if replacingFingerprints {
                try FileFingerprintRecord.deleteAll(db)
            }
            try Self.clearStagedIndex(db)
            try BulkInsert.run(db, sql: Self.fingerprintInsert(into: "fileFingerprint"), fingerprints) { record, row in
                Self.bindFingerprint(record, &row)
            }
            var record =
                try SyncStateRecord.fetchOne(db, key: 1)
                ?? SyncStateRecord(localVersion: nil, state: "unknown", contentDirectory: contentDirectory)
            record.localVersion = newVersion
            try record.save(db)
            try PendingPlanRecord.deleteAll(db)
            try CompletedDownloadRecord.deleteAll(db)
            try Self.record(history, contentDirectory: contentDirectory, in: db)
        }
    }

    /// Makes `table` (`liveFolder` or `twinFolder`: a path and a `ctime` a row) hold exactly
    /// `times` (nothing for nil), writing only the rows that differ. An update moves the times of
    /// the folders it touched, a few of thousands; rewriting every row cost a tenth of a small
    /// update, in the transaction and again in the checkpoint that copies its pages. A row that
    /// does not read as a path and a time makes the table be written whole.
    static func replaceFolderTimes(
        in table: String, with times: [SafeRelativePath: Int64]?, _ db: Database
    ) throws {
        guard let times, !times.isEmpty else {
            try db.execute(sql: "DELETE FROM \(table)")
            return
        }
        var stored: [String: Int64] = [:]
        var whole = false
        let rows = try Row.fetchCursor(db, sql: "SELECT path, ctime FROM \(table)")
        while let row = try rows.next() {
            guard let path: String = row.lenient(0), let ctime: Int64 = row.lenient(1) else {
                whole = true
                break
            }
            stored[path] = ctime
        }
        if whole {
            try db.execute(sql: "DELETE FROM \(table)")
            stored = [:]
        }
        let upsert = try db.cachedStatement(sql: "INSERT OR REPLACE INTO \(table) (path, ctime) VALUES (?, ?)")
        for (path, ctime) in times {
            let key = path.string
            if stored.removeValue(forKey: key) != ctime { try upsert.execute(arguments: [key, ctime]) }
        }
        let delete = try db.cachedStatement(sql: "DELETE FROM \(table) WHERE path = ?")
        for key in stored.keys { try delete.execute(arguments: [key]) }
    }

    /// The fingerprints remembered for the current version's files.
    ///
    /// Read by column index from one cursor, not decoded as records: this runs on every replay,
    /// over a row per mirrored file (Codable decoding was an eighth of a 100,000-file update).
    func fileFingerprints() async throws(SyncError) -> [FileIdentity: FileFingerprint] {
        try await read { db in
            let count = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM fileFingerprint") ?? 0
            var result: [FileIdentity: FileFingerprint] = [:]
            result.reserveCapacity(count)
            let rows = try Row.fetchCursor(
                db, sql: "SELECT device, inode, size, modifiedNanoseconds, sha256 FROM fileFingerprint")
            // A damaged row is left out: its file is hashed again.
            while let row = try rows.next() {
                guard let device: Int64 = row.lenient(0), let inode: Int64 = row.lenient(1),
                    let size: Int64 = row.lenient(2), let modified: Int64 = row.lenient(3),
                    let sha256: String = row.lenient(4)
                else { continue }
                let identity = FileIdentity(
                    device: UInt64(bitPattern: device), inode: UInt64(bitPattern: inode), size: size,
                    modifiedNanoseconds: modified)
                result[identity] = FileFingerprint(size: size, sha256: sha256)
            }
            return result
        }
    }

    func clearPlan() async throws(SyncError) {
        try await write { db in
            try PendingPlanRecord.deleteAll(db)
            try CompletedDownloadRecord.deleteAll(db)
        }
    }

    // MARK: - History

    /// Records how an attempt ended, and what follows for the state row: its state, last error
    /// and count of consecutive failures. Written even when the calling task is cancelled.
    func recordAttempt(_ history: UpdateHistoryEntry, contentDirectory: String) async throws(SyncError) {
        try await writeRegardlessOfCancellation { db in
            try Self.record(history, contentDirectory: contentDirectory, in: db)
        }
    }

    /// Inserts `history`, updates the state row to match its outcome and drops entries past
    /// ``historyRetention`` (never the newest success). Part of the caller's transaction.
    private static func record(_ history: UpdateHistoryEntry, contentDirectory: String, in db: Database) throws {
        var state =
            try SyncStateRecord.fetchOne(db, key: 1)
            ?? SyncStateRecord(localVersion: nil, state: "unknown", contentDirectory: contentDirectory)
        switch history.outcome {
        case .succeeded, .upToDate:
            state.state = "succeeded"
            state.lastError = nil
            state.lastErrorCode = nil
            state.consecutiveFailures = 0
        case .failed:
            state.state = "failed"
            // Redacted where it is stored, as the history row is (UpdateHistoryRecord): an
            // origin can echo a registered secret into a message no rule by name finds.
            state.lastError = history.message.map(Redaction.text)
            state.lastErrorCode = history.errorCode?.description
            state.consecutiveFailures += 1
        case .cancelled:
            state.state = "suspended"
        }
        try state.save(db)
        var row = UpdateHistoryRecord(history)
        try row.insert(db)
        try db.execute(
            sql: """
                DELETE FROM updateHistory
                WHERE id <= (SELECT id FROM updateHistory ORDER BY id DESC LIMIT 1 OFFSET ?)
                  AND id IS NOT (SELECT MAX(id) FROM updateHistory WHERE outcome IN ('succeeded', 'upToDate'))
                """, arguments: [historyRetention])
    }

    /// The most recent attempts, newest first.
    func history(limit: Int = 50) async throws(SyncError) -> [UpdateHistoryRecord] {
        try await read { db in
            try UpdateHistoryRecord.fetchLenient(db, UpdateHistoryRecord.order(Column("id").desc).limit(limit))
        }
    }

    /// The newest attempt that succeeded or found the folder up to date.
    func lastSuccess() async throws(SyncError) -> UpdateHistoryRecord? {
        try await read { db in
            try UpdateHistoryRecord.fetchLenient(
                db,
                UpdateHistoryRecord.filter(
                    [UpdateHistoryEntry.Outcome.succeeded.rawValue, UpdateHistoryEntry.Outcome.upToDate.rawValue]
                        .contains(Column("outcome"))
                ).order(Column("id").desc).limit(20)
            ).first
        }
    }

    /// Forgets everything: version, ETags, plan and history.
    // MARK: - Trust pins

    /// The signing keys the folder was last synced with (key id → public key, base64). They
    /// outlive ``reset()``: only ``forgetTrustPins()`` drops them.
    func trustPins() async throws(SyncError) -> [String: String] {
        try await read { db in
            var pins: [String: String] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT keyID, publicKey FROM trustPin") {
                if let id: String = row.lenient(0), let key: String = row.lenient(1) { pins[id] = key }
            }
            return pins
        }
    }

    /// Replaces the pins with `keys` (key id → public key, base64).
    func setTrustPins(_ keys: [String: String]) async throws(SyncError) {
        try await write { db in
            try db.execute(sql: "DELETE FROM trustPin")
            for (id, key) in keys {
                try db.execute(
                    sql: "INSERT INTO trustPin (keyID, publicKey, pinnedAt) VALUES (?, ?, ?)",
                    arguments: [id, key, Date()])
            }
        }
    }

    /// Drops every pin; returns the key ids dropped.
    func forgetTrustPins() async throws(SyncError) -> [String] {
        try await write { db in
            let ids = try String.fetchAll(db, sql: "SELECT keyID FROM trustPin ORDER BY keyID")
            try db.execute(sql: "DELETE FROM trustPin")
            return ids
        }
    }

    /// ``SyncStateRecord/state`` while a reset runs: what the folder still holds was synced
    /// here, and the next update may replace it.
    static let resettingState = "resetting"

    /// The first step of a reset: the folder is still this state's, but holds no version (its
    /// next update restores, and replaces whatever is left), and nothing of its plan or twin is
    /// used again. A reset killed after this and before ``reset()`` can be run again.
    func forgetVersion() async throws(SyncError) {
        try await write { db in
            try db.execute(sql: "UPDATE syncState SET localVersion = NULL, state = ?", arguments: [Self.resettingState])
            try PendingPlanRecord.deleteAll(db)
            try Self.dropTwin(db)
        }
    }

    func reset() async throws(SyncError) {
        try await write { db in
            try SyncStateRecord.deleteAll(db)
            try CachedResourceRecord.deleteAll(db)
            try PendingPlanRecord.deleteAll(db)
            try CompletedDownloadRecord.deleteAll(db)
            try UpdateHistoryRecord.deleteAll(db)
            try FileFingerprintRecord.deleteAll(db)
            try Self.dropTwin(db)
            try db.execute(
                sql: "DELETE FROM treeIndex; DELETE FROM treeEntry; DELETE FROM liveFolder; DELETE FROM fullCheck")
        }
    }
}

/// What a switch records of the new version's tree (see ``StateStore/treeIndex()``).
enum IndexUpdate: Sendable {
    /// None: the next replay checks the whole staged tree and records it.
    case drop
    /// The whole tree, as a full check read it.
    case whole(ContentTree)
    /// The whole tree as a streamed check wrote it to the staged tables
    /// (``StateStore/stage(_:)``), of this shape.
    case staged(TreeShape)
    /// The changes to the recorded tree, as an incremental check computed them (or a whole
    /// check that found the tree the recorded one plus these changes, nothing repaired).
    case delta(TreeIndexDelta, shape: TreeShape)
    /// The shape alone, and no entries: a storage without a tree digest, whose staged tree is
    /// the plan's, unchecked.
    case shape(TreeShape)

    /// Whether the index records entries a replay can plan from.
    var hasEntries: Bool {
        switch self {
        case .whole, .staged, .delta: return true
        case .drop, .shape: return false
        }
    }

    /// The new version's folders whose `ctime`s the switch reads: all of them for a whole tree,
    /// none but the root for a staged one (the check recorded the others' times as it listed
    /// them, and the swap moves only the root's).
    var folders: [SafeRelativePath]? {
        switch self {
        case .whole(let tree): return Array(tree.folders)
        case .staged: return []
        case .drop, .shape, .delta: return nil
        }
    }
}

extension FingerprintCache {
    /// Loads the fingerprints stored with the current version, once per engine (one update).
    func loadStored(from store: StateStore) async throws(SyncError) {
        guard claimLoading() else { return }
        load(try await store.fileFingerprints())
    }
}

/// The previous version kept in the staging area after a switch, as the base of the next one: a
/// hard-link twin of the current content that may differ from it only at ``changes`` (a folder
/// there: its whole subtree). The next replay moves it to `next/` and catches it up path by
/// path (``SyncPlan/twinPatch(dirty:keep:)``) instead of linking every file again.
struct TwinState: Sendable, Equatable {
    /// The twin folder's device and inode: it is trusted only where it is still that folder.
    var device: Int64
    var inode: Int64
    /// The version of the current content the dirty set is relative to.
    var baseVersion: String
    /// The dirty set.
    var changes: [SafeRelativePath]

    /// The twin folder's device and inode.
    var identity: (device: Int64, inode: Int64) { (device, inode) }
}

/// The tree index's folders as one update's planning listed them, whole (fingerprints and
/// digests), for the tree check of the same update (``StateStore/indexDelta(_:changed:listed:)``):
/// the update holds its lock throughout and writes the index only at its switch, so a folder
/// listed while planning reads the same when checked.
final class IndexListings: Sendable {
    private let folders = Mutex<[SafeRelativePath: [(name: String, entry: TreeDigest.Entry)]]>([:])

    func keep(_ entries: [(name: String, entry: TreeDigest.Entry)], of folder: SafeRelativePath) {
        folders.withLock { $0[folder] = entries }
    }

    func entries(of folder: SafeRelativePath) -> [(name: String, entry: TreeDigest.Entry)]? {
        folders.withLock { $0[folder] }
    }
}
