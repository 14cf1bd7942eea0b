import Foundation
import GRDB
import Testing

@testable import ContentSync

/// The switch's many-row inserts bind through SQLite's C API: every value must land as GRDB
/// would have bound it, and a failing row must throw.
@Suite struct BulkInsertTests {
    @Test func textAndIntegersLandExactlyAndAFailingRowThrows() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (a TEXT NOT NULL, b INTEGER NOT NULL, c TEXT, PRIMARY KEY (a, b))")
            let rows: [(String, Int64, String)] = [
                ("", 0, "empty text, not NULL"), ("naïve/файл/日本", Int64.max, "x"), ("emoji 🙂 é", Int64.min, ""),
                (String(repeating: "long ", count: 2_000), -1, "y"),
            ]
            try BulkInsert.run(db, sql: "INSERT INTO t (a, b, c) VALUES (?, ?, ?)", rows) { row, bound in
                bound.text(row.0)
                bound.integer(row.1)
                bound.text(row.2)
            }
            let read = try Row.fetchAll(db, sql: "SELECT a, b, c, typeof(a) FROM t ORDER BY rowid")
            #expect(read.count == rows.count)
            for (stored, row) in zip(read, rows) {
                #expect(stored[0] as String == row.0 && stored[1] as Int64 == row.1 && stored[2] as String == row.2)
                #expect(stored[3] as String == "text")
            }
            // The same key again: SQLite's constraint error, after the first new row landed.
            let error = #expect(throws: DatabaseError.self) {
                try BulkInsert.run(db, sql: "INSERT INTO t (a, b, c) VALUES (?, ?, ?)", [("new", 1), ("", 0)]) {
                    row, bound in
                    bound.text(row.0)
                    bound.integer(Int64(row.1))
                    bound.text("z")
                }
            }
            #expect(error?.resultCode == .SQLITE_CONSTRAINT)
            #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM t WHERE a = 'new'") == 1)
            // The cached statement is reset: GRDB can use it again.
            try db.cachedStatement(sql: "INSERT INTO t (a, b, c) VALUES (?, ?, ?)").execute(arguments: ["g", 2, "h"])
            #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM t") == rows.count + 2)
        }
    }
}
