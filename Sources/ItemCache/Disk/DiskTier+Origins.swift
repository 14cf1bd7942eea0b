import DatabaseKit
import Foundation
import GRDB

/// Whether a load may ask an origin now (``ItemCaching/originGate(_:now:backoff:)``).
public enum OriginGate: Sendable, Equatable {
    /// Ask it. `probing`: it was failing and this load is the one attempt that probes it (a
    /// success clears the backoff).
    case open(probing: Bool)
    /// It failed and its next attempt is due at `retryAt`: answer without it. `message` is its
    /// last failure, `status` the failing status it answered (nil: no answer).
    case closed(retryAt: Date, message: String, status: Int?)
}

extension DiskTier {
    /// The origin's gate at `now`. A due backoff is claimed for this caller (its next attempt
    /// moves a period on), so that of all the processes sharing the folder one probes. A row
    /// whose next attempt lies further off than `backoff` allows (a clock jump, a hostile
    /// row) is treated as due.
    func originGate(_ origin: String, now: Date, backoff: OriginBackoff) throws(ItemCacheError) -> OriginGate {
        do {
            // Nearly always no row: a read, not a write transaction, on every fetch.
            let known = try pool.read { db in
                try Bool.fetchOne(
                    db, sql: "SELECT 1 FROM originFailure WHERE origin = ?", arguments: [origin]) ?? false
            }
            guard known else { return .open(probing: false) }
            return try transaction { db -> OriginGate in
                guard
                    let row = try Row.fetchOne(
                        db, sql: "SELECT failures, retryAt, message, status FROM originFailure WHERE origin = ?",
                        arguments: [origin])
                else { return .open(probing: false) }
                // A damaged row (another type) reads as one failure, due now.
                let failures: Int = row.lenient(0) ?? 1
                let retryAt = Date(timeIntervalSince1970: row.lenient(1) ?? 0)
                let longest = max(backoff.maximum.seconds, OriginBackoff.longestRetryAfter)
                if retryAt > now, retryAt.timeIntervalSince(now) <= longest {
                    let status: Int? = row.lenient(3)
                    // A row is another process's words (or a neighbour's): bounded before use.
                    let message: String = row.lenient(2) ?? ""
                    return .closed(
                        retryAt: retryAt, message: String(message.prefix(500)),
                        status: status.flatMap { (100...999).contains($0) ? $0 : nil })
                }
                let next = now.addingTimeInterval(backoff.delay(afterFailures: max(1, failures)).seconds)
                try db.execute(
                    sql: "UPDATE originFailure SET retryAt = ? WHERE origin = ?",
                    arguments: [next.timeIntervalSince1970, origin])
                return .open(probing: true)
            }
        } catch {
            throw storageError("cannot read the failing origins of", error)
        }
    }

    /// Whether any origin has a recorded failure.
    func anyOriginFailures() throws(ItemCacheError) -> Bool {
        do {
            return try pool.read { db in
                try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM originFailure)") ?? false
            }
        } catch {
            throw storageError("cannot read the failing origins of", error)
        }
    }

    /// Records a failure of `origin` at `now`: its next attempt is due after the backoff for
    /// one more failure in a row, or after `retryAfter` seconds when the origin asked for longer.
    func recordOriginFailure(
        _ origin: String, message: String, status: Int?, now: Date, backoff: OriginBackoff, retryAfter: Double?
    ) throws(ItemCacheError) -> Date {
        // A URL too long to keep costs a row the folder's limit does not count: it gets no
        // backoff rather than growing the index.
        guard origin.utf8.count <= Self.longestFailureKey else { return now }
        do {
            return try transaction { db -> Date in
                // A damaged or hostile count (Int.max, 1e300, text) is read leniently and capped
                // as it is written: `1 + Int.max` stopped every process whose fetch failed.
                let previous: Int =
                    try Row.fetchOne(
                        db, sql: "SELECT failures FROM originFailure WHERE origin = ?", arguments: [origin])?
                    .lenient(0) ?? 0
                let failures = 1 + min(max(previous, 0), 1_000)
                var delay = backoff.delay(afterFailures: failures).seconds
                if let retryAfter { delay = max(delay, min(retryAfter, OriginBackoff.longestRetryAfter)) }
                let retryAt = now.addingTimeInterval(delay)
                try db.execute(
                    sql: """
                        INSERT OR REPLACE INTO originFailure (origin, failures, at, retryAt, message, status)
                        VALUES (?, ?, ?, ?, ?, ?)
                        """,
                    arguments: [
                        origin, min(failures, 1_000), now.timeIntervalSince1970, retryAt.timeIntervalSince1970,
                        String(message.prefix(Self.longestFailureMessage)), status,
                    ])
                try Self.keepNewestFailureRows(db, table: "originFailure", key: "origin", limit: self.failureRowLimit)
                return retryAt
            }
        } catch {
            throw storageError("cannot record a failing origin in", error)
        }
    }

    /// The longest key or origin a failure row is kept for, and the longest message it keeps.
    static let longestFailureKey = 2_048
    static let longestFailureMessage = 500

    /// How many rows each failure table keeps, the newest: the rows are outside the footprint
    /// the limit counts, so they are bounded by it (1,000 rows of at most 2.5 KiB under the
    /// default limit, 16 under a 512 KiB one); a storm of failing URLs once grew a 256 KiB
    /// cache's index to 10 MB.
    var failureRowLimit: Int { Int(max(16, min(1_000, limit / (32 << 10)))) }

    /// Deletes all but the `limit` newest rows of `table` (keyed by `key`, dated by `at`).
    static func keepNewestFailureRows(_ db: Database, table: String, key: String, limit: Int) throws {
        try db.execute(
            sql:
                "DELETE FROM \(table) WHERE \(key) IN (SELECT \(key) FROM \(table) ORDER BY at DESC LIMIT -1 OFFSET ?)",
            arguments: [limit])
    }

    /// Forgets the failures of `origin`: it answered.
    func clearOriginFailure(_ origin: String) throws(ItemCacheError) {
        do {
            try transaction { db in
                try db.execute(sql: "DELETE FROM originFailure WHERE origin = ?", arguments: [origin])
            }
        } catch {
            throw storageError("cannot clear a failing origin in", error)
        }
    }

    /// The most variants a lookup reads; the loader starts over when a URL reaches it.
    static let variantLimit = 64

    /// The keys of the stored variants of `key` (responses that named request headers in
    /// `Vary`), read by range on the key index, at most ``variantLimit``.
    func variantKeys(of key: CacheKey) throws(ItemCacheError) -> [CacheKey] {
        let prefix = key.rawValue + CacheKey.variantMarker
        let end = String(prefix.dropLast()) + "!"
        do {
            return try pool.read { db in
                try String.fetchAll(
                    db, sql: "SELECT key FROM item WHERE key >= ? AND key < ? LIMIT ?",
                    arguments: [prefix, end, Self.variantLimit])
            }
            .map { CacheKey(rawValue: $0, context: key.context, url: key.url) }
        } catch {
            throw storageError("cannot list the variants of \(key.rawValue) in", error)
        }
    }
}

extension DiskTier {
    /// The keys stored for loads of `key` that sent a credential (``CacheKey/sentWith(headers:url:account:)``),
    /// their variants among them, read by range on the key index, at most `limit`.
    func credentialKeys(of key: CacheKey, limit: Int) throws(ItemCacheError) -> [CacheKey] {
        let prefix = key.rawValue + CacheKey.credentialMarker
        let end = String(prefix.dropLast()) + "!"
        do {
            return try pool.read { db in
                try String.fetchAll(
                    db, sql: "SELECT key FROM item WHERE key >= ? AND key < ? LIMIT ?", arguments: [prefix, end, limit])
            }
            .map { CacheKey(rawValue: $0, context: key.context, url: key.url) }
        } catch {
            throw storageError("cannot list the entries of \(key.rawValue) kept for credentials in", error)
        }
    }
}
