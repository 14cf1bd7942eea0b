import DatabaseKit
import FileKit
import Foundation
import GRDB

extension DiskTier {
    /// What ``reconcile()`` found and fixed.
    struct Reconciliation: Sendable, Equatable {
        /// Files no row named (a crash between writing a file and committing its row), removed.
        var orphanFiles = 0
        /// Rows whose file was missing, cut short or not a regular file, or whose file name is
        /// not one this cache makes (damage, a hostile edit), removed.
        var orphanRows = 0
        /// Whether the `stats` row was missing or its counts wrong, and was made again.
        var statsRepaired = false
    }

    /// Makes the index and the files agree, both ways: files with no row are unlinked, rows with
    /// no complete file (or a name this cache never makes) are deleted, and the `stats` row is
    /// checked against the rows. Safe while other processes use the folder: it holds the write
    /// window exclusively while it compares names, and deletes a row only if it still names the
    /// file it found missing.
    ///
    /// Only the cache's own names are ever removed (``BlobName``, and `.tmp-` files of the
    /// same shape); shard folders are entered without following symlinks, and anything else
    /// in the folder is left alone.
    func reconcile() throws(ItemCacheError) -> Reconciliation {
        var result = Reconciliation()
        do {
            try lockFile.lock(slot: Self.writeWindowSlot, exclusive: true)
            let listing = try blobs.listing()
            let named = try pool.read { db in
                try Set(String.fetchAll(db, sql: "SELECT file FROM item WHERE file IS NOT NULL"))
            }
            for name in listing.files where !named.contains(name.description) {
                blobs.remove(name)
                result.orphanFiles += 1
            }
            for temporary in listing.temporaries {
                blobs.removeTemporary(temporary.name, shard: temporary.shard)
                result.orphanFiles += 1
            }
            lockFile.unlock(slot: Self.writeWindowSlot)
            let rows = try pool.read { db in
                try Row.fetchAll(db, sql: "SELECT id, file, size FROM item WHERE file IS NOT NULL")
            }
            let damaged = rows.filter { row in
                guard let text: String = row.lenient(1), let name = BlobName(text), let size: Int64 = row.lenient(2)
                else { return true }
                return blobs.size(of: name) != size
            }
            if !damaged.isEmpty {
                result.orphanRows = try transaction { db in
                    var count = 0
                    for row in damaged {
                        try db.execute(
                            sql: "DELETE FROM item WHERE id = ? AND file IS ?",
                            arguments: [row[0] as DatabaseValue, row[1] as DatabaseValue])
                        count += db.changesCount
                    }
                    return count
                }
                for row in damaged {
                    if let text: String = row.lenient(1), let name = BlobName(text) { blobs.remove(name) }
                }
            }
            result.statsRepaired = try repairStats()
        } catch {
            lockFile.unlock(slot: Self.writeWindowSlot)
            throw storageError("cannot reconcile the index and the files of", error)
        }
        return result
    }

    /// Puts the `stats` row back when it is missing, or its counts when they disagree with the
    /// rows (the limit stays). Returns whether anything was wrong.
    private func repairStats() throws -> Bool {
        try transaction { db in
            let actual = try Row.fetchOne(
                db,
                sql:
                    "SELECT count(*), CAST(total(size) AS INTEGER), CAST(total(\(Self.costSQL("item"))) AS INTEGER) FROM item"
            )!
            let (count, bytes, cost): (Int64, Int64, Int64) = (
                actual.lenient(0) ?? 0, actual.lenient(1) ?? 0, actual.lenient(2) ?? 0
            )
            guard let stats = try Row.fetchOne(db, sql: "SELECT count, bytes, cost FROM stats WHERE id = 1") else {
                try db.execute(
                    sql: "INSERT INTO stats (id, bytes, count, cost) VALUES (1, ?, ?, ?)",
                    arguments: [bytes, count, cost])
                return true
            }
            // A count of another type (damage, a hostile edit) differs, and is written again.
            guard stats.lenient(0) != count || stats.lenient(1) != bytes || stats.lenient(2) != cost else {
                return false
            }
            try db.execute(
                sql: "UPDATE stats SET count = ?, bytes = ?, cost = ? WHERE id = 1", arguments: [count, bytes, cost])
            return true
        }
    }
}
