import GRDB
import GRDBSQLite

/// One statement (an `INSERT` of a few values) run for each of many rows, the values bound
/// through SQLite's C API. GRDB's `execute(arguments:)` boxes every value in an array of
/// existentials per row, which cost as much as SQLite's own insert for the thousands of rows a
/// version switch writes (the tree index's changes, the twin's dirty paths, the new files'
/// fingerprints) and the streamed tree check stages, all on an update's critical path.
struct BulkInsert {
    /// Binds one row's values: ``text(_:)`` and ``integer(_:)`` take the statement's parameters
    /// in order.
    struct Row: ~Copyable {
        fileprivate let statement: OpaquePointer
        fileprivate var index: Int32 = 1
        fileprivate var code = SQLITE_OK

        mutating func text(_ value: String) {
            // A C string even when empty (a nil pointer would bind NULL); SQLITE_TRANSIENT: SQLite
            // copies the bytes before this call returns.
            let bound = value.withCString { text in
                sqlite3_bind_text(
                    statement, index, text, Int32(value.utf8.count), unsafeBitCast(-1, to: sqlite3_destructor_type.self)
                )
            }
            next(bound)
        }

        mutating func integer(_ value: Int64) {
            next(sqlite3_bind_int64(statement, index, value))
        }

        private mutating func next(_ bound: Int32) {
            if code == SQLITE_OK { code = bound }
            index += 1
        }
    }

    private let handle: OpaquePointer
    private let connection: OpaquePointer?
    private let sql: String

    /// `sql` prepared (and cached) on `db`, valid within the current access to `db`.
    init(_ db: Database, sql: String) throws {
        handle = try db.cachedStatement(sql: sql).sqliteStatement
        connection = db.sqliteConnection
        self.sql = sql
    }

    /// Runs the statement once with the values `bind` gives; throws SQLite's error. The statement
    /// is reset afterwards either way, so GRDB may use it again.
    func insert(_ bind: (inout Row) -> Void) throws {
        defer {
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
        }
        var row = Row(statement: handle)
        bind(&row)
        var code = row.code
        if code == SQLITE_OK { code = sqlite3_step(handle) }
        guard code == SQLITE_DONE else {
            throw DatabaseError(
                resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(connection)), sql: sql)
        }
    }

    /// Runs `sql` once for each element of `rows`, its values bound by `bind`; throws SQLite's
    /// error for the first row that fails (the rows before it stay written in the transaction,
    /// which the caller's failure rolls back).
    static func run<Rows: Sequence>(
        _ db: Database, sql: String, _ rows: Rows, bind: (Rows.Element, inout Row) -> Void
    ) throws {
        let statement = try BulkInsert(db, sql: sql)
        for element in rows {
            try statement.insert { row in bind(element, &row) }
        }
    }
}
