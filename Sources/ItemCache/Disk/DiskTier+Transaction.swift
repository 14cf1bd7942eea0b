import Foundation
import GRDB

extension DiskTier {
    /// Runs `body` in an immediate write transaction, with the reads recorded since the last
    /// write applied first, then `afterCommit` with its result while this process's other
    /// writes still wait. A busy database (another process writing) is waited for by SQLite's
    /// busy timeout, and the whole transaction is tried again a few times before it fails.
    ///
    /// A transaction started while this thread runs another's `body` (a write from inside
    /// `ItemStore.update`'s transform) throws ``ItemCacheError/Code/nestedWrite``: it would wait
    /// for the lock its caller holds (GRDB stops the process on such a call).
    func transaction<T>(_ body: @escaping (Database) throws -> T, afterCommit: ((T) -> Void)? = nil) throws -> T {
        if WriteNesting.isWriting {
            throw ItemCacheError(
                code: .nestedWrite,
                message:
                    "a cache write was started inside another write's closure (ItemStore.update's transform or a provider's list action) on the cache at \(folder.path); return the value from the closure instead"
            )
        }
        let pendingTouches = touches.withLock { touches in
            defer { touches = Touches() }
            return touches
        }
        var attempt = 0
        while true {
            do {
                return try pool.writeWithoutTransaction { db in
                    // BEGIN and COMMIT as cached statements: `inTransaction` compiles both
                    // anew on every call.
                    try db.cachedStatement(sql: "BEGIN IMMEDIATE").execute()
                    evictedInTransaction.store(0, ordering: .relaxed)
                    let result: T
                    do {
                        for (id, accessed) in pendingTouches.rows {
                            try db.cachedStatement(sql: "UPDATE item SET accessed = max(accessed, ?) WHERE id = ?")
                                .execute(arguments: [accessed, id])
                        }
                        for (key, accessed) in pendingTouches.keys {
                            try db.cachedStatement(sql: "UPDATE item SET accessed = max(accessed, ?) WHERE key = ?")
                                .execute(arguments: [accessed, key])
                        }
                        result = try WriteNesting.marking { try body(db) }
                        try db.cachedStatement(sql: "COMMIT").execute()
                    } catch {
                        if db.isInsideTransaction { try? db.rollback() }
                        throw error
                    }
                    let evicted = evictedInTransaction.exchange(0, ordering: .relaxed)
                    if evicted > 0 { evictions.increment(by: Int64(evicted)) }
                    afterCommit?(result)
                    return result
                }
            } catch let error as DatabaseError
                where (error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED) && attempt < 5
            {
                attempt += 1
                usleep(UInt32(20_000 * attempt))
            }
        }
    }

    /// Which threads are running a write transaction's body: a thread-specific mark, set for
    /// the body's length.
    enum WriteNesting {
        private static let key: pthread_key_t = {
            var key = pthread_key_t()
            pthread_key_create(&key, nil)
            return key
        }()

        /// Whether this thread is inside a write transaction's body.
        static var isWriting: Bool { pthread_getspecific(key) != nil }

        /// Runs `body` marked as a write's.
        static func marking<T>(_ body: () throws -> T) rethrows -> T {
            let outer = pthread_getspecific(key)
            pthread_setspecific(key, UnsafeRawPointer(bitPattern: 1))
            defer { pthread_setspecific(key, outer) }
            return try body()
        }
    }

    /// Writes the reads recorded so far to the index.
    func flushTouches() {
        guard !touches.withLock({ $0.rows.isEmpty && $0.keys.isEmpty }) else { return }
        _ = try? transaction { _ in () }
    }
}

/// Reads recorded in memory until the next write transaction writes them to `accessed`: by row
/// id for a disk read, by key for a read memory answered. A later time wins (`max`), so a row
/// made after the read, under a reused id or the same key, keeps its own.
struct Touches {
    /// The most keys of memory reads that wait at once.
    static let maxKeys = 65_536
    var rows: [Int64: Double] = [:]
    var keys: [String: Double] = [:]
}
