import DatabaseKit
import Foundation
import GRDB

extension DiskTier {
    // MARK: - Queries

    func summaries(_ query: ItemQuery) throws(ItemCacheError) -> [ItemSummary] {
        do {
            return try pool.read { db in
                let sql = try query.request(now: clock.now).select(SQL(sql: Self.columns)).makePreparedRequest(
                    db, forSingleResult: false)
                // A damaged row is left out of the answer (reconciliation and eviction deal with it).
                return try Row.fetchAll(sql.statement).compactMap { row in
                    guard let key = Self.key(row), let info = Self.info(row) else { return nil }
                    return ItemSummary(key: key, info: info)
                }
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
            return try pool.read { db in try unlimited.request(now: clock.now).fetchCount(db) }
        } catch {
            throw storageError("cannot count", error)
        }
    }

    // MARK: - Statistics

    /// The index's counts. A missing `stats` row (damage, a hostile edit) is counted from the
    /// rows themselves; reconciliation puts it back.
    func statistics() throws(ItemCacheError) -> CacheStatistics {
        let now = clock.now
        do {
            return try pool.read { db in
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT coalesce((SELECT count FROM stats WHERE id = 1), (SELECT count(*) FROM item)),
                               coalesce((SELECT bytes FROM stats WHERE id = 1), (SELECT CAST(total(size) AS INTEGER) FROM item)),
                               (SELECT diskLimit FROM stats WHERE id = 1),
                               (SELECT count(*) FROM item WHERE pinned = 1), (SELECT CAST(total(size) AS INTEGER) FROM item WHERE pinned = 1),
                               (SELECT count(*) FROM item WHERE mustRevalidate = 1 OR expires <= ?),
                               EXISTS (SELECT 1 FROM stats WHERE id = 1)
                        """, arguments: [now.timeIntervalSince1970])!
                var limit = self.knownLimit.load(ordering: .relaxed)
                // A damaged `stats` row (text where a count belongs) reads as nothing.
                if row.lenient(6) == true {
                    limit = max(0, row.lenient(2) ?? CacheConfiguration.defaultDiskLimit)
                    self.knownLimit.store(limit, ordering: .relaxed)
                }
                return CacheStatistics(
                    count: row.lenient(0) ?? 0, bytes: row.lenient(1) ?? 0, limit: limit, pinned: row.lenient(3) ?? 0,
                    pinnedBytes: row.lenient(4) ?? 0, expired: row.lenient(5) ?? 0)
            }
        } catch {
            throw storageError("cannot read the statistics of", error)
        }
    }
}
