import DatabaseKit
import FileKit
import Foundation
import GRDB

extension DiskTier {
    /// Throws ``ItemCacheError/Code/tooLarge`` for the first of `writes` that the folder's limit
    /// cannot hold even when empty, beside its index and log. Once per call, not per value:
    /// the budget counts the shard folders with an `fstat`.
    func checkFits(_ writes: [PendingWrite]) throws(ItemCacheError) {
        let folders = blobs.shardFolderCount()
        let budget = Self.rowBudget(for: limit, shardFolders: folders)
        // A value file has a shard folder, even in an empty cache: one that fitted only
        // without it (a fresh cache) was written, linked, then refused by eviction.
        let fileBudget = Self.rowBudget(for: limit, shardFolders: max(1, folders))
        for write in writes {
            let makesFile = write.makesFile(inlineThreshold: inlineThreshold)
            guard Self.cost(of: write, inline: !makesFile) > (makesFile ? fileBudget : budget) else { continue }
            throw ItemCacheError(
                code: .tooLarge,
                message:
                    "\(write.key.rawValue) has \(write.info.size) bytes, more than the cache's disk limit of \(limit) bytes can hold beside its index and log (\(budget) bytes for values); raise the limit (CacheConfiguration.diskLimit) or store it elsewhere",
                key: write.key)
        }
    }

    /// Stores `writes` in one transaction (later ones win over earlier ones of the same key),
    /// evicting until the total is at most the limit. `afterCommit` runs right after the commit,
    /// before any other write of this process can commit (so the memory tier follows the disk's
    /// order). Blocks: call it on the I/O pool.
    func write(_ writes: [PendingWrite], afterCommit: (() -> Void)? = nil) throws(ItemCacheError) {
        try checkFits(writes)
        // Only a write that makes files needs the window: reconciliation must not take a file
        // between its link and its row's commit for an orphan. Inline values make no file.
        let makesFiles = writes.contains { $0.makesFile(inlineThreshold: inlineThreshold) }
        if makesFiles {
            do {
                try lockFile.lock(slot: Self.writeWindowSlot, exclusive: false)
            } catch {
                throw storageError("cannot lock", error)
            }
        }
        var names: [BlobName?] = []
        var oldFiles: [BlobName] = []
        do {
            for write in writes {
                if write.makesFile(inlineThreshold: inlineThreshold) {
                    let name = BlobName(newFor: write.key)
                    names.append(name)
                    if let file = write.file {
                        try blobs.link(file, as: name)
                    } else {
                        try blobs.write(write.data, as: name)
                    }
                } else {
                    names.append(nil)
                }
            }
            oldFiles = try transaction(
                { db in try self.insert(writes, files: names, db) }, afterCommit: { _ in afterCommit?() })
        } catch {
            if makesFiles { lockFile.unlock(slot: Self.writeWindowSlot) }
            for case let name? in names { blobs.remove(name) }
            if let error = error as? ItemCacheError { throw error }
            throw storageError("cannot store \(writes.map(\.key.rawValue).prefix(3).joined(separator: ", ")) in", error)
        }
        if makesFiles { lockFile.unlock(slot: Self.writeWindowSlot) }
        for file in oldFiles { blobs.remove(file) }
    }

    /// A new key's row; nothing happens when the key has one (then ``updateSQL`` replaces it).
    static let insertSQL = """
        INSERT INTO item (key, context, url, size, created, accessed, expires, mustRevalidate, pinned, etag, lastModified, \
        contentType, metadata, inlineValue, file, groupNames, checksum, response) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT(key) DO NOTHING
        """
    /// Replaces a row in place (the key, and so its context and URL, stay). `item_resized`
    /// keeps the byte total exact; the count does not change.
    static let updateSQL = """
        UPDATE item SET size = ?, created = ?, accessed = ?, expires = ?, mustRevalidate = ?, pinned = ?, etag = ?, \
        lastModified = ?, contentType = ?, metadata = ?, inlineValue = ?, file = ?, groupNames = ?, checksum = ?, \
        response = ? WHERE id = ?
        """

    /// Inserts the rows (replacing older ones in place) and evicts; returns the files no row
    /// names any more. A new key costs one statement; a stored one three (the insert that does
    /// nothing, the read of its old file and groups, the update), and its groups are replaced.
    func insert(_ writes: [PendingWrite], files: [BlobName?], _ db: Database) throws -> [BlobName] {
        var oldFiles: [BlobName] = []
        for (write, file) in zip(writes, files) {
            let info = write.info
            let metadata =
                info.metadata.isEmpty ? nil : String(decoding: try JSONEncoder().encode(info.metadata), as: UTF8.self)
            let groupNames = info.groups.joined(separator: "\u{1F}")
            let value = file == nil ? write.data : nil
            let times = (
                created: info.created.timeIntervalSince1970, accessed: info.accessed.timeIntervalSince1970,
                expires: info.expires?.timeIntervalSince1970
            )
            try db.cachedStatement(sql: Self.insertSQL).execute(arguments: [
                write.key.rawValue, write.key.context, write.key.url, info.size, times.created, times.accessed,
                times.expires,
                info.mustRevalidate, info.pinned, info.etag, info.lastModified, info.contentType, metadata, value,
                file?.description, groupNames,
                Int64(write.checksum), info.response?.encoded,
            ])
            var id = db.lastInsertedRowID
            if db.changesCount == 0 {
                guard
                    let old = try Row.fetchOne(
                        db.cachedStatement(sql: "SELECT id, file, groupNames FROM item WHERE key = ?"),
                        arguments: [write.key.rawValue])
                else {
                    throw ItemCacheError(
                        code: .storage,
                        message:
                            "the index refused a row for \(write.key.rawValue) and has none; reconcile or delete the cache folder"
                    )
                }
                id = old.lenient(0) ?? id
                try db.cachedStatement(sql: Self.updateSQL).execute(arguments: [
                    info.size, times.created, times.accessed, times.expires, info.mustRevalidate, info.pinned,
                    info.etag,
                    info.lastModified, info.contentType, metadata, value, file?.description, groupNames,
                    Int64(write.checksum), info.response?.encoded, id,
                ])
                // A name that is not the cache's own (damage, a hostile row) is never unlinked.
                if let oldFile: String = old.lenient(1), let name = BlobName(oldFile) { oldFiles.append(name) }
                if (old.lenient(2) as String?) != "" {
                    try db.cachedStatement(sql: "DELETE FROM itemGroup WHERE itemId = ?").execute(arguments: [id])
                }
            }
            for group in info.groups {
                try db.cachedStatement(sql: "INSERT OR IGNORE INTO itemGroup (itemId, name) VALUES (?, ?)").execute(
                    arguments: [id, group])
            }
        }
        oldFiles += try evict(db, keeping: writes)
        return oldFiles
    }

    /// Deletes unpinned items, expired ones first (soonest expired first), then the least
    /// recently used, until the total is at most the limit. Never deletes the keys of `writes`;
    /// throws ``ItemCacheError/Code/tooLarge`` when pinned items and those leave too little room.
    func evict(_ db: Database, keeping writes: [PendingWrite]) throws -> [BlobName] {
        let usage = try usage(db)
        if usage.statsMissing { try restoreStats(db) }
        var total = usage.bytes
        let limit = rowBudget(for: usage.limit)
        guard total > limit else { return [] }
        let keeping = Set(writes.map(\.key.rawValue))
        let now = clock.now.timeIntervalSince1970
        var files: [BlobName] = []
        for sql in [
            "SELECT id, key, size, file, \(Self.costSQL("item")) FROM item WHERE pinned = 0 AND expires IS NOT NULL AND expires <= ? ORDER BY expires LIMIT 64 OFFSET ?",
            "SELECT id, key, size, file, \(Self.costSQL("item")) FROM item WHERE pinned = 0 AND ? IS NOT NULL ORDER BY accessed LIMIT 64 OFFSET ?",
        ] {
            var skipped = 0
            while total > limit {
                let rows = try Row.fetchAll(db.cachedStatement(sql: sql), arguments: [now, skipped])
                if rows.isEmpty { break }
                for row in rows where total > limit {
                    // A damaged row (a value of another type) is evicted like any other.
                    let key: String? = row.lenient(1)
                    if let key, keeping.contains(key) {
                        skipped += 1
                        continue
                    }
                    guard let id: Int64 = row.lenient(0) else { continue }
                    try db.cachedStatement(sql: "DELETE FROM item WHERE id = ?").execute(arguments: [id])
                    let file: String? = row.lenient(3)
                    total -= row.lenient(4) ?? Self.cost(size: row.lenient(2) ?? 0, inline: row.hasNull(atIndex: 3))
                    evictedInTransaction.add(1, ordering: .relaxed)
                    if let file, let name = BlobName(file) { files.append(name) }
                }
            }
        }
        if !files.isEmpty || evictedInTransaction.load(ordering: .relaxed) > 0 { try returnFreePages(db) }
        if total > limit {
            var pinned: Int64 = 0
            var written: Int64 = 0
            for row in try Row.fetchAll(
                db,
                sql: "SELECT key, size, pinned FROM item WHERE pinned = 1 OR key IN (SELECT value FROM json_each(?))",
                arguments: [String(decoding: try JSONEncoder().encode(Array(keeping)), as: UTF8.self)])
            {
                let size: Int64 = row.lenient(1) ?? 0
                if let key: String = row.lenient(0), keeping.contains(key) { written += size } else { pinned += size }
            }
            throw ItemCacheError(
                code: .tooLarge,
                message:
                    "the cache's disk limit of \(usage.limit) bytes cannot hold this write of \(written) bytes: pinned items hold \(pinned) bytes; unpin items, remove some, or raise the limit (CacheConfiguration.diskLimit)"
            )
        }
        return files
    }

    /// Gives the index's free pages back to the file system once they are more than a quarter
    /// of the log's budget (an index made before v6 has no incremental vacuum: a no-op).
    func returnFreePages(_ db: Database) throws {
        let free = try Int64.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0
        if free * Self.block > Self.walBudget(for: limit) / 4 {
            try db.execute(sql: "PRAGMA incremental_vacuum")
        }
    }

    /// Runs `body` in an immediate write transaction, with the reads recorded since the last
}
