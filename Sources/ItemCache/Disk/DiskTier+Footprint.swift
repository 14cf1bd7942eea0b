import FileKit
import Foundation

/// The folder's footprint: what the limit bounds is everything the cache keeps on disk, not only
/// its values' bytes.
///
/// - each row costs ``cost(size:inline:keptBytes:keyBytes:urlBytes:groupBytes:)``: its share of
///   the index's pages (an inline value, the response record, metadata, validators, key, URL),
///   its index entries, and its file's blocks (rounded up to whole 4 KiB blocks, as the file
///   system allocates them); the index keeps the total in `stats.cost` (triggers,
///   v10-row-footprint, the same formula in SQL: ``costSQL(_:)``);
/// - the write-ahead log is kept within ``walBudget(for:)`` (checkpoints start sooner for a small
///   limit, and a writer that finds it full checkpoints and truncates it, or for a large
///   cache restarts it, `journal_size_limit` cutting the file back to the budget), and the
///   folder's own blocks and its shard folders are ``reserve(for:shardFolders:)``;
/// - eviction keeps `cost ≤ limit − reserve`, and pages freed in the index go back to the file
///   system (`auto_vacuum = INCREMENTAL` in a new index).
extension DiskTier {
    /// What migration v6-footprint counted for a row beyond its value (``valueCostSQL(_:)``).
    static let rowOverhead: Int64 = 256
    /// A file system block: files are allocated in these; also the index's page size.
    static let block: Int64 = 4096
    /// The bytes of an index page that rows share (a page less its header and cell pointers).
    static let pageRoom: Int64 = 4000
    /// A row's fixed fields (id, sizes, times, flags, checksum) and its cell's header.
    static let rowFields: Int64 = 64
    /// A row's entries in the LRU and expiry indexes.
    static let rowEntries: Int64 = 48

    /// The footprint of a row whose value has `size` bytes, inline (`inline`) or in a file, and
    /// which keeps `keptBytes` more (response record, metadata, validators, content type) and a
    /// key, URL and group names of these many bytes.
    ///
    /// The row's bytes in the table cost their share of a page: a page holds
    /// `pageRoom / payload` such rows (a row of 1,100 bytes costs a third of a page, one of
    /// 2,500 bytes a whole page), and a row over a page costs its pages. The key, URL and group
    /// names are stored again in their indexes, half as much again for pages that are not full.
    static func cost(
        size: Int64, inline: Bool, keptBytes: Int64 = 0, keyBytes: Int64 = 0, urlBytes: Int64 = 0,
        groupBytes: Int64 = 0
    ) -> Int64 {
        let payload = (inline ? size : 0) + keptBytes + keyBytes + urlBytes + groupBytes + rowFields
        let table = payload > pageRoom ? (payload + block - 1) / block * block : block / (pageRoom / payload)
        let indexes = (keyBytes + urlBytes + groupBytes + rowEntries) * 3 / 2
        return table + indexes + (inline ? 0 : (size + block - 1) / block * block)
    }

    /// The largest value, in bytes, that a row for `key` kept as a file fits in `budget` of
    /// ``cost(size:inline:keptBytes:keyBytes:urlBytes:groupBytes:)`` with, less a block for the
    /// response and metadata the row keeps too and one for a new shard folder (as
    /// ``checkFits(_:)`` counts it): what a fetcher may stage (a larger one would be written,
    /// then refused).
    static func largestFileValue(budget: Int64, key: CacheKey) -> Int64 {
        let fixed = cost(
            size: 0, inline: false, keyBytes: Int64(key.rawValue.utf8.count), urlBytes: Int64(key.url?.utf8.count ?? 0))
        return max(0, (budget - fixed - 2 * block) / block * block)
    }

    /// ``cost(size:inline:keptBytes:keyBytes:urlBytes:groupBytes:)`` of a write, as its row
    /// will be.
    static func cost(of write: PendingWrite, inline: Bool) -> Int64 {
        let info = write.info
        func bytes(_ text: String?) -> Int64 { Int64(text?.utf8.count ?? 0) }
        let metadata = info.metadata.isEmpty ? 0 : Int64((try? JSONEncoder().encode(info.metadata).count) ?? 0)
        let kept =
            bytes(info.response?.encoded) + metadata + bytes(info.etag)
            + bytes(info.lastModified) + bytes(info.contentType)
        let groups = bytes(info.groups.joined(separator: "\u{1F}"))
        return cost(
            size: info.size, inline: inline, keptBytes: kept, keyBytes: bytes(write.key.rawValue),
            urlBytes: bytes(write.key.url), groupBytes: groups)
    }

    /// What migration v6-footprint counted for the row `row` (`NEW`, `OLD`, `item`): the value
    /// and ``rowOverhead``. Kept as it was for that migration, which runs before the columns
    /// ``costSQL(_:)`` counts exist.
    static func valueCostSQL(_ row: String) -> String {
        "(CASE WHEN \(row).file IS NULL THEN \(row).size ELSE ((\(row).size + \(block - 1)) / \(block)) * \(block) END + \(rowOverhead))"
    }

    /// ``cost(size:inline:keptBytes:keyBytes:urlBytes:groupBytes:)`` in SQL, for the row `row`
    /// (`NEW`, `OLD`, `item`). Without the kept bytes and the page shares, 3,000 small fetched
    /// items (a response record each) took a folder to 13.7 MB under a 1 MB limit.
    static func costSQL(_ row: String) -> String {
        func bytes(_ column: String) -> String { "length(CAST(coalesce(\(row).\(column), '') AS BLOB))" }
        let kept = ["response", "metadata", "etag", "lastModified", "contentType"].map(bytes).joined(separator: " + ")
        let named = "(\(bytes("key")) + \(bytes("url")) + \(bytes("groupNames")))"
        let payload =
            "((CASE WHEN \(row).file IS NULL THEN \(row).size ELSE 0 END) + \(kept) + \(named) + \(rowFields))"
        let table =
            "(CASE WHEN \(payload) > \(pageRoom) THEN ((\(payload) + \(block - 1)) / \(block)) * \(block) ELSE \(block) / (\(pageRoom) / \(payload)) END)"
        let indexes = "((\(named) + \(rowEntries)) * 3 / 2)"
        let file =
            "(CASE WHEN \(row).file IS NULL THEN 0 ELSE ((\(row).size + \(block - 1)) / \(block)) * \(block) END)"
        return "(\(table) + \(indexes) + \(file))"
    }

    /// The columns whose change changes ``costSQL(_:)``: the resize trigger fires on these.
    static let costColumns = "size, file, response, metadata, etag, lastModified, contentType, groupNames, key, url"

    /// The most bytes the log may take: a sixteenth of the limit, from 16 KiB to 16 MiB (SQLite's
    /// own checkpoint point is 4 MiB).
    static func walBudget(for limit: Int64) -> Int64 {
        min(16 << 20, max(16 << 10, limit / 16))
    }

    /// What the folder takes besides its rows: twice the log's budget (a writer truncates or
    /// restarts the log once it reaches the budget, but the commit that reaches it comes first,
    /// and a reader that still needs the log defers that to the next commit), 64 KiB for the index's schema
    /// pages, the folder, `blobs`, tag and lock file, 32 KiB of shared memory while the cache
    /// is open, and a block for each of the `shardFolders` blob folders there are (a folder
    /// goes with its last file, so they are at most as many as the files).
    static func reserve(for limit: Int64, shardFolders: Int) -> Int64 {
        2 * walBudget(for: limit) + (96 << 10) + Int64(shardFolders) * block
    }

    /// The bytes left for rows (``cost(size:inline:)``) under `limit`.
    static func rowBudget(for limit: Int64, shardFolders: Int) -> Int64 {
        max(0, limit - reserve(for: limit, shardFolders: shardFolders))
    }

    /// The smallest limit whose row budget holds `rows` bytes of ``cost(size:inline:)`` beside
    /// `shardFolders` shard folders.
    static func limit(forRows rows: Int64, shardFolders: Int = 0) -> Int64 {
        var (low, high) = (rows, rows + (20 << 20))
        while low < high {
            let middle = low + (high - low) / 2
            if rowBudget(for: middle, shardFolders: shardFolders) >= rows { high = middle } else { low = middle + 1 }
        }
        return low
    }

    /// The row budget of this folder under `limit`, its shard folders counted now (the
    /// `blobs` folder's link count: one a subfolder, whoever made it).
    func rowBudget(for limit: Int64) -> Int64 {
        Self.rowBudget(for: limit, shardFolders: blobs.shardFolderCount())
    }

    /// The folder's real footprint now: the allocated blocks of every file and folder the
    /// cache keeps (index, log, shared memory, tag, lock, blob folders and files). Walks the
    /// blob folders: a `stat` per file.
    func measuredFootprint() -> Int64 {
        var total: Int64 = 0
        var status = stat()
        if fstat(folder.descriptor, &status) == 0 {
            total = FileSystem.adding(FileSystem.allocatedBytes(status), to: total)
        }
        for name in CacheFolder.ownNames where name != "blobs" {
            if fstatat(folder.descriptor, name, &status, AT_SYMLINK_NOFOLLOW) == 0 {
                total = FileSystem.adding(FileSystem.allocatedBytes(status), to: total)
            }
        }
        return FileSystem.adding(blobs.allocatedBytes(), to: total)
    }
}
