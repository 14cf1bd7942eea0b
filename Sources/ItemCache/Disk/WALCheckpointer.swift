import Dispatch
import Foundation
import GRDB
import GRDBSQLite
import Synchronization

/// Moves the index's write-ahead log into the database file off the writers' path.
///
/// SQLite's automatic checkpoint runs inside the `COMMIT` that takes the log past 1,000 pages,
/// so that one write also pays for copying the log and its `fsync`s (on ext4, tens of
/// milliseconds: measured as the p99 of 8 writer processes). Installed as the writer
/// connection's WAL hook instead (which turns the automatic checkpoint off), this starts a
/// passive checkpoint on a queue and connection of its own once a commit leaves the log at
/// ``threshold`` pages or more. Passive: it never waits for, nor blocks, readers and writers.
/// Every process sharing the folder runs one; when two overlap, SQLite lets one work.
///
/// The log is written from its start again only after a checkpoint that copied all of it,
/// which a background checkpoint racing continuous writes rarely manages; so when the log
/// reaches ``hardLimit`` pages, the committing writer checkpoints in place and restarts the
/// log, as SQLite would (the background ones have copied most pages by then), and the log
/// stays bounded.
final class WALCheckpointer: Sendable {
    /// Pages in the log that start a background checkpoint: SQLite's automatic checkpoint size.
    static let threshold: Int32 = 1_000
    /// This folder's thresholds: SQLite's for a large cache, smaller for a small one so the
    /// log stays inside the folder's limit (``DiskTier/walBudget(for:)``).
    let threshold: Int32
    let hardLimit: Int32
    /// Pages in the log at which the committing writer checkpoints in place.
    static let hardLimit: Int32 = 4 * threshold

    private let path: String
    /// What `path` leads through (the folder's descriptor): kept by the connection until it closes.
    private let owner: (any AnyObject & Sendable)?
    private let synchronous: String
    /// Where background checkpoints run, one at a time (internal: tests hold it up).
    let queue = DispatchQueue(label: "item-cache.checkpoint")
    /// Whether a checkpoint is queued or running (at most one at a time).
    private let scheduled = Atomic<Bool>(false)
    /// The log's size when the last background checkpoint was scheduled: the next one waits
    /// for ``threshold`` more pages (the log only shrinks when restarted, so checkpointing
    /// whenever it is over the threshold would run them back to back, measured 15 µs a write).
    private let scheduledAt = Atomic<Int32>(0)
    /// The checkpointing connection, opened on first use (on `queue`).
    private let connection = Mutex<DatabaseQueue?>(nil)

    /// A checkpointer for the database at `path`, whose connection syncs like the writers'
    /// (`synchronous`: NORMAL or FULL).
    init(
        path: String, synchronous: String, budgetBytes: Int64 = Int64(WALCheckpointer.hardLimit) * 4096,
        keeping owner: (any AnyObject & Sendable)? = nil
    ) {
        self.owner = owner
        threshold = Int32(max(1, min(Int64(Self.threshold), budgetBytes / 4096 / 4)))
        hardLimit = 4 * threshold
        self.path = path
        self.synchronous = synchronous
    }

    /// Makes `db` (a writer connection) report its commits here. The connection must not
    /// outlive this object: the pool's configuration, which prepares its connections, keeps it.
    func install(on db: Database) {
        let context = Unmanaged.passUnretained(self).toOpaque()
        _ = sqlite3_wal_hook(
            db.sqliteConnection,
            { context, connection, _, pages in
                let checkpointer = Unmanaged<WALCheckpointer>.fromOpaque(context!).takeUnretainedValue()
                checkpointer.committed(pages: pages, connection: connection)
                return SQLITE_OK
            }, context)
    }

    /// After a commit that left `pages` pages in the log.
    private func committed(pages: Int32, connection: OpaquePointer?) {
        if pages >= hardLimit {
            // The background checkpoints never finished the log: this writer copies the rest
            // itself and restarts it, so the next commit writes the log from its start again.
            // A large cache's log keeps its blocks (RESTART; `journal_size_limit` cuts the
            // file back to the budget at the next restart): later commits overwrite them
            // instead of allocating new ones (measured: a 4 KiB set 15-20% cheaper on tmpfs,
            // where every new page of the log was zeroed and charged). A small cache's log is
            // emptied (TRUNCATE): one commit can take it past its budget, and the folder's
            // limit is tight. Both wait for readers through the busy handler; gets hold the
            // log for microseconds. A background checkpoint still copying makes this one busy
            // at once (SQLite runs one at a time, and its busy handler does not wait for that):
            // the writer waits for it on its queue (it is passive, so it never waits for this
            // writer), or the log would grow by every commit made while it runs (a clean-clone
            // test saw 2 MiB past the budget under load). The result is not checked otherwise:
            // a busy or partial checkpoint is tried again at the next commit.
            let mode = threshold >= Self.threshold ? SQLITE_CHECKPOINT_RESTART : SQLITE_CHECKPOINT_TRUNCATE
            for attempt in 0..<3 {
                if sqlite3_wal_checkpoint_v2(connection, nil, mode, nil, nil) != SQLITE_BUSY {
                    break
                }
                if attempt == 0 && scheduled.load(ordering: .acquiring) {
                    queue.sync {}
                } else {
                    usleep(UInt32(500 << attempt))
                }
            }
            return
        }
        // A small cache's log is checkpointed by its writers alone: a background checkpoint's
        // read of the log would keep the writer's truncation from restarting it.
        guard threshold >= Self.threshold else { return }
        var last = scheduledAt.load(ordering: .relaxed)
        if pages < last {
            // The log was restarted.
            last = 0
            scheduledAt.store(0, ordering: .relaxed)
        }
        guard pages - last >= threshold, !scheduled.exchange(true, ordering: .acquiringAndReleasing) else { return }
        scheduledAt.store(pages, ordering: .relaxed)
        queue.async {
            defer { self.scheduled.store(false, ordering: .releasing) }
            try? self.checkpoint()
        }
    }

    /// One passive checkpoint on this object's connection. Failures are left for the next
    /// one: a checkpoint only moves pages that are safe in the log already.
    private func checkpoint() throws {
        let database = try connection.withLock { connection in
            if let connection { return connection }
            var configuration = Configuration()
            configuration.label = "item-cache.checkpoint"
            let synchronous = synchronous
            let owner = owner
            configuration.prepareDatabase { db in
                withExtendedLifetime(owner) {}
                try db.execute(sql: "PRAGMA synchronous = \(synchronous)")
            }
            let opened = try DatabaseQueue(path: path, configuration: configuration)
            connection = opened
            return opened
        }
        try database.writeWithoutTransaction { db in _ = try db.checkpoint(.passive) }
    }
}
