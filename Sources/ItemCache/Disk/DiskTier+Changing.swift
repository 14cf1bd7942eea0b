import DatabaseKit
import FileKit
import Foundation
import GRDB
import Synchronization

extension DiskTier {
    /// Updates the record of `key` after a revalidation: expiry, validators and (when given)
    /// the stored response. Returns the new record, or nil when the item is gone.
    func refresh(
        _ key: CacheKey, expires: Date?, mustRevalidate: Bool, etag: String?, lastModified: String?,
        response: HTTPResponseRecord? = nil, afterCommit: ((ItemInfo?) -> Void)? = nil
    ) throws(ItemCacheError) -> ItemInfo? {
        do {
            return try transaction(
                { db in
                    try db.execute(
                        sql: """
                            UPDATE item SET expires = ?, mustRevalidate = ?, etag = coalesce(?, etag), lastModified = coalesce(?, lastModified), accessed = ?,
                            response = coalesce(?, response), contentType = coalesce(?, contentType)
                            WHERE key = ?
                            """,
                        arguments: [
                            expires?.timeIntervalSince1970, mustRevalidate, etag, lastModified,
                            self.clock.now.timeIntervalSince1970, response?.encoded, response?.headers["content-type"],
                            key.rawValue,
                        ])
                    return try Row.fetchOne(
                        db, sql: "SELECT \(Self.columns) FROM item WHERE key = ?", arguments: [key.rawValue]
                    ).flatMap(Self.info)
                }, afterCommit: afterCommit)
        } catch {
            throw storageError("cannot update \(key.rawValue) in", error)
        }
    }

    /// Reads the item of `key`, hands it to `transform` and stores what that returns (nil: no
    /// change), all in one write transaction: no other write of any process comes in between,
    /// so read-modify-write steps (a provider's list actions) never lose an update. A new
    /// file is linked before the commit, as in ``write(_:afterCommit:)``. Returns the item as
    /// stored (or as found, when `transform` changed nothing).
    func modify(
        _ key: CacheKey, _ transform: @escaping (CachedItem?) throws -> PendingWrite?,
        afterCommit: ((CachedItem?) -> Void)? = nil
    ) throws(ItemCacheError) -> CachedItem? {
        // A file may be made: hold the write window, as `write` does.
        do {
            try lockFile.lock(slot: Self.writeWindowSlot, exclusive: false)
        } catch {
            throw storageError("cannot lock", error)
        }
        defer { lockFile.unlock(slot: Self.writeWindowSlot) }
        // Each attempt of the transaction (a busy retry runs it again) may make a file; only the
        // committed attempt's file stays.
        let made = Mutex<[BlobName]>([])
        let outcome: (item: CachedItem?, file: BlobName?, oldFiles: [BlobName])
        do {
            outcome = try transaction(
                { db in
                    let current = try self.read(key, in: db)
                    guard let write = try transform(current) else { return (current, nil, []) }
                    guard write.info.size <= self.limit else {
                        throw ItemCacheError(
                            code: .tooLarge,
                            message:
                                "\(key.rawValue) would have \(write.info.size) bytes, more than the cache's disk limit of \(self.limit); raise the limit (CacheConfiguration.diskLimit)",
                            key: key)
                    }
                    var file: BlobName?
                    if write.data.count > self.inlineThreshold {
                        let name = BlobName(newFor: key)
                        made.withLock { $0.append(name) }
                        try self.blobs.write(write.data, as: name)
                        file = name
                    }
                    let oldFiles = try self.insert([write], files: [file], db)
                    return (CachedItem(key: key, data: write.data, info: write.info), file, oldFiles)
                }, afterCommit: { afterCommit?($0.item) })
        } catch {
            for name in made.withLock({ $0 }) { blobs.remove(name) }
            throw storageError("cannot update \(key.rawValue) in", error)
        }
        for name in made.withLock({ $0 }) where name != outcome.file { blobs.remove(name) }
        for file in outcome.oldFiles { blobs.remove(file) }
        return outcome.item
    }

    /// many went.
    func remove(selecting select: @escaping (Database) throws -> [Int64], afterCommit: (() -> Void)? = nil)
        throws(ItemCacheError) -> Int
    {
        let removed: (count: Int, files: [BlobName])
        do {
            removed = try transaction(
                { db in
                    var removed = (count: 0, files: [BlobName]())
                    for id in try select(db) {
                        if let row = try Row.fetchOne(
                            db.cachedStatement(sql: "SELECT file FROM item WHERE id = ?"), arguments: [id])
                        {
                            try db.cachedStatement(sql: "DELETE FROM item WHERE id = ?").execute(arguments: [id])
                            removed.count += 1
                            // Only names the cache makes are unlinked: a hostile row's
                            // `../../victim/file` goes with its row, and nothing else does.
                            if let text: String = row.lenient(0), let name = BlobName(text) {
                                removed.files.append(name)
                            }
                        }
                    }
                    return removed
                }, afterCommit: { _ in afterCommit?() })
        } catch {
            throw storageError("cannot remove items from", error)
        }
        for file in removed.files { blobs.remove(file) }
        return removed.count
    }

    /// Removes the item of `key` and, unless `includingVariants` is false, its variants (the
    /// responses stored under its secondary keys); returns whether there was one.
    @discardableResult
    func remove(_ key: CacheKey, includingVariants: Bool = true, afterCommit: (() -> Void)? = nil)
        throws(ItemCacheError) -> Bool
    {
        let prefix = key.rawValue + CacheKey.variantMarker
        let variants = includingVariants && key.variantNames == nil
        return try remove(
            selecting: { db in
                variants
                    ? try Int64.fetchAll(
                        db, sql: "SELECT id FROM item WHERE key = ? OR (key >= ? AND key < ?)",
                        arguments: [key.rawValue, prefix, String(prefix.dropLast()) + "!"])
                    : try Int64.fetchAll(db, sql: "SELECT id FROM item WHERE key = ?", arguments: [key.rawValue])
            },
            afterCommit: afterCommit) > 0
    }

    // MARK: - Failed fetches

    /// Adds `amounts` to the folder's counters (a counter starts at 0), saturating.
    func addToCounters(_ amounts: [String: Int64]) throws(ItemCacheError) {
        do {
            try transaction { db in
                for (name, amount) in amounts where amount != 0 {
                    // Read leniently: a damaged or hostile value (text, 1e300) counts as 0.
                    let current: Int64 =
                        try Row.fetchOne(db, sql: "SELECT value FROM counter WHERE name = ?", arguments: [name])?
                        .lenient(0) ?? 0
                    let sum = current.addingReportingOverflow(amount)
                    let value = sum.overflow ? (amount > 0 ? Int64.max : Int64.min) : sum.partialValue
                    try db.execute(
                        sql: "INSERT OR REPLACE INTO counter (name, value) VALUES (?, ?)", arguments: [name, value])
                }
            }
        } catch {
            throw storageError("cannot add to the counters of", error)
        }
    }

    /// The folder's counters.
    func counters() throws(ItemCacheError) -> [String: Int64] {
        do {
            return try pool.read { db in
                var counters: [String: Int64] = [:]
                for row in try Row.fetchAll(db, sql: "SELECT name, value FROM counter") {
                    // A damaged or hostile row (a text value) reads as nothing, never a crash.
                    let (name, value): (DatabaseValue, DatabaseValue) = (row[0], row[1])
                    if case .string(let name) = name.storage, case .int64(let value) = value.storage {
                        counters[name] = value
                    }
                }
                return counters
            }
        } catch {
            throw storageError("cannot read the counters of", error)
        }
    }

    /// How far ahead of this process's clock a failure or mark recorded by another process may
    /// be dated and still count: 30 s of skew between hosts sharing a folder.
    static let clockAllowance: TimeInterval = 30

    /// Records that a fetch of `key` failed now (replacing an older record; records older than
    /// an hour go).
    func recordFailure(_ error: ItemCacheError, for key: CacheKey, at now: Date) throws(ItemCacheError) {
        do {
            try recordFetchRow(
                key.rawValue, code: error.code.description + (error.httpStatus.map { ":\($0)" } ?? ""),
                message: error.message, at: now)
        } catch {
            throw storageError("cannot record a failed fetch of \(key.rawValue) in", error)
        }
    }

    /// Writes the `fetchFailure` row `key` (replacing an older one) and drops the rows an hour
    /// old, and those dated an hour ahead (a clock that was ahead, a hostile row), which reads
    /// ignore anyway.
    private func recordFetchRow(_ key: String, code: String, message: String, at now: Date) throws {
        // A key too long to keep is not shared (``recordOriginFailure``'s bound).
        guard key.utf8.count <= Self.longestFailureKey else { return }
        try transaction { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO fetchFailure (key, at, code, message) VALUES (?, ?, ?, ?)",
                arguments: [
                    key, now.timeIntervalSince1970, String(code.prefix(64)),
                    String(message.prefix(Self.longestFailureMessage)),
                ])
            try db.execute(
                sql: "DELETE FROM fetchFailure WHERE at < ? OR at > ?",
                arguments: [now.timeIntervalSince1970 - 3600, now.timeIntervalSince1970 + 3600])
            try Self.keepNewestFailureRows(db, table: "fetchFailure", key: "key", limit: self.failureRowLimit)
        }
    }

    /// The `fetchFailure` row that says a fetch of `key` got an answer that may not be kept: the
    /// key behind a byte no key holds, so a reader of failures (this version's or an older
    /// one's) never takes it for one, and no new table (a schema page) is needed.
    static func unstorableRow(_ key: CacheKey) -> String { "\u{1}unstorable " + key.rawValue }

    /// Records that a fetch of `key` got an answer that may not be kept, now (records older
    /// than an hour go, with the failures).
    func recordUnstorable(_ key: CacheKey, at now: Date) throws(ItemCacheError) {
        do {
            try recordFetchRow(Self.unstorableRow(key), code: "unstorable", message: "", at: now)
        } catch {
            throw storageError("cannot record an unstorable answer for \(key.rawValue) in", error)
        }
    }

    /// When a fetch of `key` last got an answer that may not be kept, by any process; nil when
    /// none is recorded (a damaged row reads as none).
    func unstorable(for key: CacheKey) throws(ItemCacheError) -> Date? {
        do {
            return try pool.read { db -> Date? in
                guard
                    let row = try Row.fetchOne(
                        db, sql: "SELECT at FROM fetchFailure WHERE key = ?", arguments: [Self.unstorableRow(key)]),
                    let at: Double = row.lenient(0), at.isFinite
                else { return nil }
                return Date(timeIntervalSince1970: at)
            }
        } catch {
            throw storageError("cannot read the unstorable answers of", error)
        }
    }

    /// The failure of a fetch of `key` recorded at or after `since`, by any process; nil when none.
    func failure(for key: CacheKey, since: Date) throws(ItemCacheError) -> ItemCacheError? {
        do {
            return try pool.read { db -> ItemCacheError? in
                guard
                    let row = try Row.fetchOne(
                        db, sql: "SELECT code, message FROM fetchFailure WHERE key = ? AND at >= ? AND at <= ?",
                        // A failure dated ahead of now (another host's clock, a hostile row) is
                        // no failure of the fetch just waited for: one would be shared for good.
                        arguments: [
                            key.rawValue, since.timeIntervalSince1970,
                            Date().timeIntervalSince1970 + Self.clockAllowance,
                        ])
                else { return nil }
                // `fetch:503`: the code and the failing status.
                // A damaged row (another type) reads as a plain fetch failure with no message.
                let stored: String = row.lenient(0) ?? ""
                let parts = stored.split(separator: ":", maxSplits: 1)
                let message: String = row.lenient(1) ?? ""
                var error = ItemCacheError(
                    code: ItemCacheError.Code(named: String(parts.first ?? "")) ?? .fetch,
                    message: String(message.prefix(500)), key: key)
                error.httpStatus = parts.count > 1 ? Int(parts[1]).flatMap { (100...999).contains($0) ? $0 : nil } : nil
                return error
            }
        } catch {
            throw storageError("cannot read the failed fetches of", error)
        }
    }
}
