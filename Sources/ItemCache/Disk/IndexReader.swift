import Foundation
import GRDB
import GRDBSQLite
import Synchronization

/// One item's row as a get reads it: everything but the key (the caller has it) and the value
/// or the name of its file.
struct IndexRow {
    var id: Int64
    var info: ItemInfo
    /// The value, when it lives in the index.
    var inlineValue: Data?
    /// The value's file, when it is not inline, as the index has it (check it with ``BlobName``
    /// before any use).
    var file: String?
    /// The value's CRC-32C; nil for a row written before checksums.
    var checksum: UInt32?
}

/// The disk tier's get path: a read-only SQLite connection of its own, outside GRDB's pool
/// (the pool serves every other read and the writes),
/// with the one statement a get runs prepared once and its columns read with the C API.
///
/// A pool read costs more than the statement (measured: about two thirds of a 4 KiB get): it
/// checks a reader out, hops onto the reader's dispatch queue and runs `PRAGMA schema_version`
/// first (a second read transaction), and GRDB's rows copy values into boxes or build a
/// column-name index per cursor. Here a get takes a mutex and runs one statement in autocommit
/// mode: its read transaction ends when the statement is reset, so no snapshot outlives the get
/// (checkpoints are never held back, and the next get sees every commit made before it starts).
///
/// One thread at a time uses the connection; a get that finds it busy reads through the pool.
final class IndexReader: Sendable {
    private let connection: Mutex<Connection>
    private let pool: DatabasePool

    /// The columns of ``IndexRow``: the record (the key's three columns excepted), its groups,
    /// then the value or its file.
    static let sql = """
        SELECT id, size, created, accessed, expires, mustRevalidate, pinned, etag, lastModified, contentType, metadata, \
        \(DiskTier.groupsColumn), inlineValue, file, checksum, response \
        FROM item WHERE key = ?
        """

    /// Opens a second connection to the pool's database (which must exist: the pool made it),
    /// keeping `owner` (the folder whose descriptor the path leads through) until it closes.
    init(pool: DatabasePool, busyTimeout: TimeInterval, keeping owner: any AnyObject & Sendable) throws {
        self.pool = pool
        connection = Mutex(try Connection(path: pool.path, busyTimeout: busyTimeout, keeping: owner))
    }

    /// The row of `key`, or nil when there is none.
    func row(for key: String) throws -> IndexRow? {
        let result = connection.withLockIfAvailable { connection -> Result<IndexRow?, any Error> in
            Result { try Self.row(for: key, connection.statement, connection.handle) }
        }
        if let result { return try result.get() }
        return try pool.unsafeRead { db in
            try Self.row(for: key, db.cachedStatement(sql: Self.sql).sqliteStatement, db.sqliteConnection)
        }
    }

    /// The row of `key` read with `statement` (``sql``, prepared on `connection`, the database
    /// being read): bound, stepped once, read and reset (which ends the read transaction).
    static func row(for key: String, _ statement: OpaquePointer, _ connection: OpaquePointer?) throws -> IndexRow? {
        try key.withCString { text throws -> IndexRow? in
            // SQLITE_STATIC: SQLite reads the key in place; the binding is cleared before the
            // buffer goes away.
            defer {
                sqlite3_reset(statement)
                sqlite3_clear_bindings(statement)
            }
            var code = sqlite3_bind_text(statement, 1, text, Int32(key.utf8.count), nil)
            if code == SQLITE_OK { code = sqlite3_step(statement) }
            switch code {
            case SQLITE_ROW: return decode(statement)
            case SQLITE_DONE: return nil
            default:
                throw DatabaseError(
                    resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(connection)),
                    sql: sql)
            }
        }
    }

    /// The record from the current row of ``sql``, read by column index with concrete types.
    private static func decode(_ handle: OpaquePointer) -> IndexRow {
        func text(_ column: Int32) -> String? {
            guard let bytes = sqlite3_column_text(handle, column) else { return nil }
            return String(
                decoding: UnsafeBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(handle, column))),
                as: UTF8.self)
        }
        var metadata: [String: String] = [:]
        if let metadataText = text(10),
            let decoded = try? JSONDecoder().decode([String: String].self, from: Data(metadataText.utf8))
        {
            metadata = decoded
        }
        let expires =
            sqlite3_column_type(handle, 4) == SQLITE_NULL
            ? nil : Date(timeIntervalSince1970: sqlite3_column_double(handle, 4))
        var info = ItemInfo(
            size: sqlite3_column_int64(handle, 1),
            created: Date(timeIntervalSince1970: sqlite3_column_double(handle, 2)),
            accessed: Date(timeIntervalSince1970: sqlite3_column_double(handle, 3)), expires: expires,
            mustRevalidate: sqlite3_column_int64(handle, 5) != 0, pinned: sqlite3_column_int64(handle, 6) != 0,
            etag: text(7), lastModified: text(8), contentType: text(9), metadata: metadata)
        if let groups = text(11) { info.groups = DiskTier.groups(from: groups) }
        if let response = text(15) { info.response = HTTPResponseRecord(encoded: response) }
        var inlineValue: Data?
        if sqlite3_column_type(handle, 12) != SQLITE_NULL {
            // A zero-length blob has no pointer.
            let count = Int(sqlite3_column_bytes(handle, 12))
            inlineValue = sqlite3_column_blob(handle, 12).map { Data(bytes: $0, count: count) } ?? Data()
        }
        // The column holds the unsigned 32-bit checksum.
        let checksum =
            sqlite3_column_type(handle, 14) == SQLITE_NULL
            ? nil : UInt32(truncatingIfNeeded: sqlite3_column_int64(handle, 14))
        return IndexRow(
            id: sqlite3_column_int64(handle, 0), info: info, inlineValue: inlineValue, file: text(13),
            checksum: checksum)
    }

    /// The connection and its statement; closed when the reader goes.
    private final class Connection {
        let handle: OpaquePointer
        let statement: OpaquePointer
        /// Released after `deinit` closed the handle: the path may lead through its descriptor.
        let owner: any AnyObject & Sendable

        init(path: String, busyTimeout: TimeInterval, keeping owner: any AnyObject & Sendable) throws {
            self.owner = owner
            var handle: OpaquePointer?
            var code = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nil)
            guard code == SQLITE_OK, let handle else {
                let message = handle.map { String(cString: sqlite3_errmsg($0)) }
                sqlite3_close_v2(handle)
                throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message)
            }
            func check(_ code: Int32, _ sql: String? = nil) throws {
                guard code == SQLITE_OK else {
                    let error = DatabaseError(
                        resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(handle)),
                        sql: sql)
                    sqlite3_close_v2(handle)
                    throw error
                }
            }
            try check(sqlite3_busy_timeout(handle, Int32(busyTimeout * 1000)))
            // mmap: pages of the main file are read in place, without a read(2) each; address
            // space only, the kernel's page cache holds the pages either way. A 32 MiB page
            // cache (it grows only as pages are read, and empties when another connection
            // writes): pages still in the log are otherwise read again with a pread each time.
            // diskcache sets 64 MiB and 8,192 pages.
            let pragmas = "PRAGMA mmap_size = 67108864; PRAGMA cache_size = -32768"
            try check(sqlite3_exec(handle, pragmas, nil, nil, nil), pragmas)
            var statement: OpaquePointer?
            code = sqlite3_prepare_v3(handle, IndexReader.sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
            try check(code, IndexReader.sql)
            self.handle = handle
            self.statement = statement!
        }

        deinit {
            sqlite3_finalize(statement)
            sqlite3_close_v2(handle)
        }
    }
}
