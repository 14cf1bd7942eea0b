import DatabaseKit
import FileKit
import Foundation
import GRDB
import GRDBSQLite

extension DiskTier {
    /// The columns of a summary (queries, ``info(for:)``): the whole key, then the record.
    static let columns = """
        item.id, item.key, item.context, item.url, item.size, item.created, item.accessed, item.expires, \
        item.mustRevalidate, item.pinned, item.etag, item.lastModified, item.contentType, item.metadata, \
        \(groupsColumn), item.response
        """

    /// The item's groups joined by U+001F: the row's copy, or (rows older than the copy) the
    /// `itemGroup` rows. `coalesce` evaluates the subquery only when the copy is NULL.
    static let groupsColumn =
        "coalesce(item.groupNames, (SELECT group_concat(name, char(31)) FROM itemGroup WHERE itemId = item.id))"

    /// The stored item, or nil. A value that is missing, cut short, of other bytes than its
    /// checksum, or not a regular file drops its row: the item is a miss, never a torn or
    /// wrong value.
    ///
    /// With `filesOver`, a value kept in a file and larger than that is not read: the item
    /// holds its file, opened and checked (``openValue(_:)``).
    func read(_ key: CacheKey, filesOver: Int64? = nil) throws(ItemCacheError) -> CachedItem? {
        if let filesOver, let row = try indexRow(for: key), row.inlineValue == nil, row.info.size > filesOver {
            guard let opened = try openValue(key) else { return nil }
            switch opened.content {
            case .bytes(let data):
                return CachedItem(key: key, data: data, info: opened.info)
            case .file(let descriptor):
                let file = ValueFile(
                    descriptor: descriptor, size: opened.info.size, checksum: opened.checksum,
                    shownAs: "the cached value of \(key.rawValue)")
                return CachedItem(key: key, file: file, info: opened.info)
            }
        }
        for _ in 0..<4 {
            guard let row = try indexRow(for: key) else { return nil }
            let outcome: BlobFolder.ReadOutcome
            do {
                outcome = try value(of: row)
            } catch {
                throw storageError("cannot read \(key.rawValue) from", error)
            }
            switch outcome {
            case .value(let data):
                touch(row)
                return CachedItem(key: key, data: data, info: row.info)
            case .missing:
                // A concurrent replace or eviction (the row changed too: read it again), or a
                // lost file (the row still names it: drop the row).
                if drop(row) { return nil }
            case .damaged:
                damaged.increment()
                if drop(row) { return nil }
            }
        }
        return nil
    }

    /// The row of `key` as a get reads it (``IndexReader``); nil when there is none.
    func indexRow(for key: CacheKey) throws(ItemCacheError) -> IndexRow? {
        do {
            return try reader.row(for: key.rawValue)
        } catch {
            throw storageError("cannot read \(key.rawValue) from", error)
        }
    }

    /// The value of `row`: inline (checked against its checksum) or its file (a regular file
    /// of the recorded size and checksum, under a name this cache makes).
    func value(of row: IndexRow) throws(FileSystemError) -> BlobFolder.ReadOutcome {
        if let inline = row.inlineValue {
            guard Int64(inline.count) == row.info.size else { return .damaged("its inline value has another size") }
            if let checksum = row.checksum, CRC32C.checksum(inline) != checksum {
                return .damaged("its inline value does not match its checksum")
            }
            return .value(inline)
        }
        guard let text = row.file else { return .damaged("it has neither a value nor a file") }
        guard let name = BlobName(text) else { return .damaged("its file name is not one this cache makes") }
        return try blobs.read(name, size: row.info.size, checksum: row.checksum)
    }

    /// Deletes `row` if it is unchanged (same file, or still inline); unlinks its file when
    /// the name is one this cache makes (a damaged value's file is of no use). Returns whether
    /// the row went (false: another process changed it meanwhile, read it again).
    func drop(_ row: IndexRow) -> Bool {
        let dropped = try? transaction { db in
            try db.execute(sql: "DELETE FROM item WHERE id = ? AND file IS ?", arguments: [row.id, row.file])
            return db.changesCount
        }
        if dropped == 1, let text = row.file, let name = BlobName(text) { blobs.remove(name) }
        return dropped == 1
    }

    /// The record of the item, without its value; nil when there is none.
    func info(for key: CacheKey) throws(ItemCacheError) -> ItemInfo? {
        do {
            return try pool.unsafeRead { db in
                try Row.fetchOne(
                    db.cachedStatement(sql: "SELECT \(Self.columns) FROM item WHERE key = ?"), arguments: [key.rawValue]
                ).flatMap(Self.info)
            }
        } catch {
            throw storageError("cannot read \(key.rawValue) from", error)
        }
    }

    /// The record from a row that starts with ``columns``; nil when a column holds a value of
    /// the wrong type (a damaged or hostile row: read as no item, never a crash).
    static func info(_ row: Row) -> ItemInfo? {
        guard let size: Int64 = row.lenient(4), let created: Double = row.lenient(5),
            let accessed: Double = row.lenient(6), let mustRevalidate: Bool = row.lenient(8),
            let pinned: Bool = row.lenient(9)
        else { return nil }
        let expires: Double? = row.lenient(7)
        if expires == nil && !row.hasNull(atIndex: 7) { return nil }
        let groups: String? = row.lenient(14)
        let metadataText: String? = row.lenient(13)
        var metadata: [String: String] = [:]
        if let metadataText,
            let decoded = try? JSONDecoder().decode([String: String].self, from: Data(metadataText.utf8))
        {
            metadata = decoded
        }
        var info = ItemInfo(
            size: size, created: Date(timeIntervalSince1970: created), accessed: Date(timeIntervalSince1970: accessed),
            expires: expires.map(Date.init(timeIntervalSince1970:)), mustRevalidate: mustRevalidate, pinned: pinned,
            etag: row.lenient(10), lastModified: row.lenient(11), contentType: row.lenient(12), metadata: metadata)
        info.groups = groups.map(Self.groups(from:)) ?? []
        info.response = (row.lenient(15) as String?).flatMap(HTTPResponseRecord.init(encoded:))
        return info
    }

    /// Group names as ``groupsColumn`` joins them.
    static func groups(from joined: String) -> [String] {
        joined.split(separator: "\u{1F}").map(String.init).sorted()
    }

    /// The key from a row that starts with ``columns``; nil for a damaged row.
    static func key(_ row: Row) -> CacheKey? {
        guard let raw: String = row.lenient(1), let context: String = row.lenient(2) else { return nil }
        let url: String? = row.lenient(3)
        if url == nil && !row.hasNull(atIndex: 3) { return nil }
        return CacheKey(rawValue: raw, context: context, url: url)
    }

    /// Records a read of `row`. Keyed by row id (no string hashing); `max(accessed, …)` when
    /// writing makes a reused id harmless, since a row made after this read has a later
    /// `accessed` already.
    func touch(_ row: IndexRow) {
        let now = clock.now.timeIntervalSince1970
        touches.withLock { $0.rows[row.id] = now }
    }

    /// Records a read of `key` that memory answered at `now` (the clock the caller read for the
    /// expiry check), so eviction's "least recently used" counts every read, not only those
    /// that reach the disk. Keyed by the key's text (memory holds no row id); at most
    /// ``Touches/maxKeys`` keys wait for the next write, and a hit past that is not recorded.
    func touch(_ key: CacheKey, at now: Date) {
        let time = now.timeIntervalSince1970
        touches.withLock { touches in
            guard touches.keys.count < Touches.maxKeys || touches.keys[key.rawValue] != nil else { return }
            touches.keys[key.rawValue] = time
        }
    }

    /// The item of `key` as the transaction of `db` sees it; nil when there is none or its
    /// value is missing or damaged.
    func read(_ key: CacheKey, in db: Database) throws -> CachedItem? {
        guard
            let row = try IndexReader.row(
                for: key.rawValue, db.cachedStatement(sql: IndexReader.sql).sqliteStatement, db.sqliteConnection)
        else { return nil }
        guard case .value(let data) = try value(of: row) else { return nil }
        return CachedItem(key: key, data: data, info: row.info)
    }

    // MARK: - Values as files (ItemStore.withValue)

    /// The value of `key`, opened and checked: its bytes when inline, else its open file
    /// (checked for kind, size and checksum by one chunked read, then rewound). Nil when none
    /// is stored, or it was damaged (then dropped).
    /// `checksum` is the CRC-32C of the bytes as read.
    func openValue(_ key: CacheKey) throws(ItemCacheError) -> (
        content: StoredValue.Content, info: ItemInfo, checksum: UInt32
    )? {
        for _ in 0..<4 {
            guard let row = try indexRow(for: key) else { return nil }
            if row.inlineValue != nil {
                guard let item = try read(key) else { return nil }
                return (.bytes(item.data), item.info, CRC32C.checksum(item.data))
            }
            guard let text = row.file, let name = BlobName(text) else {
                damaged.increment()
                if drop(row) { return nil } else { continue }
            }
            let opened: BlobFolder.Opened
            do {
                opened = try blobs.openVerified(name, size: row.info.size)
            } catch {
                throw storageError("cannot read \(key.rawValue) from", error)
            }
            switch opened {
            case .unusable(.missing):
                if drop(row) { return nil }
            case .unusable:
                damaged.increment()
                if drop(row) { return nil }
            case .file(let descriptor):
                let read = try? ValueFile.checksum(of: descriptor, size: row.info.size, shownAs: blobs.path(name))
                guard let read, row.checksum.map({ $0 == read }) ?? true else {
                    close(descriptor)
                    damaged.increment()
                    if drop(row) { return nil }
                    continue
                }
                touch(row)
                return (.file(descriptor: descriptor), row.info, read)
            }
        }
        return nil
    }
}
