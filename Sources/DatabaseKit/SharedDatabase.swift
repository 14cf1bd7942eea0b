import Foundation
import GRDB

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
        if error is SchemaDamage { return true }
        guard let error = error as? DatabaseError else { return false }
        if error.resultCode == .SQLITE_CORRUPT || error.resultCode == .SQLITE_NOTADB { return true }
        guard error.resultCode == .SQLITE_ERROR, let message = error.message else { return false }
        return ["no such table", "no such column", "already exists"].contains { message.contains($0) }
    }

    /// `error` in one line: SQLite's code and message without the statement GRDB appends
    /// (a migration's is pages long), else the error's own description.
    public static func shortDescription(_ error: any Error) -> String {
        guard let error = error as? DatabaseError else { return "\(error)" }
        return "SQLite error \(error.resultCode.rawValue): \(error.message ?? "unknown")"
    }

    /// What `migrator` makes of an empty database: each table, index and trigger by name, with
    /// what it is (SQLite's own objects left out): a table's columns (name, type, NOT NULL, key
    /// order), an index's table and columns, a trigger's SQL. Not a table's SQL text, which
    /// SQLite rewrites when a table is renamed (a staged table renamed into place).
    public static func schema(madeBy migrator: DatabaseMigrator) throws -> [String: String] {
        let queue = try DatabaseQueue()
        try migrator.migrate(queue)
        return try queue.read(schema(of:))
    }

    /// The first way the schema of `db` differs from `expected` (``schema(madeBy:)``), else nil:
    /// a table, index or trigger gone, renamed or altered is a damaged database, whoever did
    /// it. Objects of its own that someone added (an index for a query, a test's counter) are
    /// not: whoever can add them can as well change the rows.
    public static func schemaDamage(in db: Database, expected: [String: String]) throws -> SchemaDamage? {
        let found = try schema(of: db)
        for name in expected.keys.sorted() where found[name] != expected[name] {
            return SchemaDamage(
                detail: found[name] == nil ? "'\(name)' is missing" : "'\(name)' is not as its migrations made it")
        }
        return nil
    }

    private static func schema(of db: Database) throws -> [String: String] {
        var schema: [String: String] = [:]
        let objects = try Row.fetchAll(
            db, sql: "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")
        for object in objects {
            let type: String = object["type"] ?? ""
            let name: String = object["name"] ?? ""
            let table: String = object["tbl_name"] ?? ""
            let quoted = "'" + name.replacingOccurrences(of: "'", with: "''") + "'"
            switch type {
            case "table":
                let columns = try Row.fetchAll(
                    db, sql: "SELECT name, type, \"notnull\", pk FROM pragma_table_info(\(quoted))")
                schema[name] =
                    "table: "
                    + columns.map {
                        "\($0[0] as String? ?? "") \($0[1] as String? ?? "") \($0[2] as Int? ?? 0) \($0[3] as Int? ?? 0)"
                    }
                    .joined(separator: ", ")
            case "index":
                let columns = try String.fetchAll(db, sql: "SELECT name FROM pragma_index_info(\(quoted))")
                schema[name] = "index on \(table): " + columns.joined(separator: ", ")
            default:
                schema[name] = "\(type) on \(table): " + (object["sql"] as String? ?? "")
            }
        }
        return schema
    }
}

/// A database whose tables, indexes or triggers are not the ones its migrations made.
public struct SchemaDamage: Error, Sendable, CustomStringConvertible {
    /// What differs: "'syncState' is missing".
    public let detail: String
    public var description: String { "its schema differs from the one its migrations made: \(detail)" }
}
