import Foundation
import GRDB
import GRDBSQLite

/// Opening a SQLite database (WAL) that several processes may create, open and migrate at the
/// same moment: the sync client's state database and the item cache's index.
public enum SharedDatabase {
    /// Opens the pool at `path` and runs `migrator` on it.
    ///
    /// Switching a new database to WAL takes an exclusive lock that SQLite's busy timeout does
    /// not wait for, so two processes creating the same database at once can see `SQLITE_BUSY`
    /// there: the loser tries again shortly (at most about two seconds in all).
    ///
    /// Two processes that open a new database at once race through the migrations: GRDB reads
    /// which ones ran outside their transactions, so the loser's migration fails on what the
    /// winner made, and rolls back. Running the migrator again then finds it applied; each
    /// failure means another migration is done, so a few tries always suffice.
    public static func openPool(path: String, configuration: Configuration, migrator: DatabaseMigrator) throws
        -> DatabasePool
    {
        let pool = try open(path, configuration)
        for attempt in 1... {
            do {
                try migrator.migrate(pool)
                break
            } catch  where attempt < 10 {
                continue
            }
        }
        return pool
    }

    private static func open(_ path: String, _ configuration: Configuration) throws -> DatabasePool {
        var attempt = 1
        while true {
            do {
                return try DatabasePool(path: path, configuration: configuration)
            } catch let error as DatabaseError where error.resultCode == .SQLITE_BUSY && attempt < 25 {
                usleep(UInt32(8_000 * attempt))
                attempt += 1
            }
        }
    }
}

extension SharedDatabase {
    /// Whether `error` says the database file is damaged (not a database, a page that does not
    /// read back, or a schema that is not the one its migrations made: a table or column gone,
    /// or the migrations' record emptied so that they run again over tables that exist), as
    /// opposed to a full disk, a lock or missing permissions.
    public static func isDamage(_ error: any Error) -> Bool {
        guard let error = error as? DatabaseError else { return false }
        if error.resultCode == .SQLITE_CORRUPT || error.resultCode == .SQLITE_NOTADB { return true }
        guard error.resultCode == .SQLITE_ERROR, let message = error.message else { return false }
        return ["no such table", "no such column", "already exists"].contains { message.contains($0) }
    }

    /// Whether the file at `path` starts as every SQLite database does (`SQLite format 3` and a
    /// NUL), or is empty (SQLite makes an empty file a database). A file that does not is no
    /// database at all, damaged or not: someone's other file given by mistake, never one to
    /// delete as damaged.
    public static func looksLikeSQLite(_ path: String) -> Bool {
        let fd = Glibc.open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return true } // nothing to read: not a file to judge
        defer { close(fd) }
        var header = [UInt8](repeating: 0, count: 16)
        let count = read(fd, &header, 16)
        return count == 0 || (count == 16 && header == Array("SQLite format 3\0".utf8))
    }

    /// The first column of each row `queries` return from the SQLite database at `path`, read
    /// through one connection of SQLite's C API opened read-only and `immutable` (no GRDB set-up,
    /// no lock, no `-wal` or `-shm` made, the journal mode left as it is); nil for a query that
    /// fails (a table that is not there), or for all when the file cannot be read so. For
    /// telling another program's database from this one's before opening it to migrate.
    public static func strings(readingOnly path: String, _ queries: [String]) -> [[String]?]? {
        var components = URLComponents()
        components.scheme = "file"
        components.path = path
        components.queryItems = [URLQueryItem(name: "immutable", value: "1")]
        guard let uri = components.string else { return nil }
        var handle: OpaquePointer?
        defer { sqlite3_close_v2(handle) }
        guard
            sqlite3_open_v2(uri, &handle, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI, nil)
                == SQLITE_OK
        else { return nil }
        return queries.map { sql in
            var statement: OpaquePointer?
            defer { sqlite3_finalize(statement) }
            guard sqlite3_prepare_v2(handle, sql, -1, &statement, nil) == SQLITE_OK else { return nil }
            var values: [String] = []
            while true {
                switch sqlite3_step(statement) {
                case SQLITE_ROW: values.append(sqlite3_column_text(statement, 0).map { String(cString: $0) } ?? "")
                case SQLITE_DONE: return values
                default: return nil
                }
            }
        }
    }

    /// `error` in one line: SQLite's code and message without the statement GRDB appends
    /// (a migration's is pages long), else the error's own description.
    public static func shortDescription(_ error: any Error) -> String {
        guard let error = error as? DatabaseError else { return "\(error)" }
        return "SQLite error \(error.resultCode.rawValue): \(error.message ?? "unknown")"
    }
}
