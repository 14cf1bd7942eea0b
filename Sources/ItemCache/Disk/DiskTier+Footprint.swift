import FileKit
import Foundation

/// The folder's footprint: what the limit bounds is everything the cache keeps on disk, not only
/// its values' bytes.
///
/// - each row costs its value (a file's rounded up to whole 4 KiB blocks, as the file system
///   allocates them) plus ``rowOverhead`` for its row and index entries; the index keeps the
///   total in `stats.cost` (triggers, v6-footprint);
/// - the write-ahead log is kept within ``walBudget(for:)`` (checkpoints start sooner for a small
///   limit, and a writer that finds it full checkpoints and truncates it, or for a large
///   cache restarts it, `journal_size_limit` cutting the file back to the budget), and the
///   folder's own
///   blocks and its shard folders are ``reserve(for:shardFolders:)``;
/// - eviction keeps `cost ≤ limit − reserve`, and pages freed in the index go back to the file
///   system (`auto_vacuum = INCREMENTAL` in a new index).
extension DiskTier {
    /// What a row costs in the index beyond its inline value: the row, its key's entries in
    /// the unique and URL indexes, its LRU and expiry entries (measured: about 200 bytes for a
    /// 60-byte key; a long key costs more, which the reserve's slack absorbs).
    static let rowOverhead: Int64 = 256
    /// A file system block: files are allocated in these.
    static let block: Int64 = 4096

    /// The footprint of a value of `size` bytes stored inline (`inline`) or as a file.
    static func cost(size: Int64, inline: Bool) -> Int64 {
        (inline ? size : (size + block - 1) / block * block) + rowOverhead
    }

    /// The SQL of ``cost(size:inline:)`` for the row `row` (`NEW`, `OLD`, `item`).
    static func costSQL(_ row: String) -> String {
        "(CASE WHEN \(row).file IS NULL THEN \(row).size ELSE ((\(row).size + \(block - 1)) / \(block)) * \(block) END + \(rowOverhead))"
    }

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
