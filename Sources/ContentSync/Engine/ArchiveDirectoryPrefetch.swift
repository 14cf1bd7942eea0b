import Synchronization

/// The archive's directory, read while a replay is planned: the archive's ranges then start as
/// soon as the plan names its new files, not two round trips and a parse of thousands of records
/// later (S2: the ranges started 11 ms into the stage, of which 9 ms were the directory).
///
/// It starts once the chain of change lists is in (``ReplayPlanner/plan(from:status:layout:fetched:)``),
/// for an archive the status gives a size, when the connection policy allows transfers and
/// ``limit(changes:listBytes:recordedEntries:)`` gives a limit. Its requests are those
/// ``ArchiveRangeFetcher/fetch`` makes, in the same order, and the fetch takes what it read
/// instead of asking again:
/// - the archive's end (``ArchiveDirectory/tailLength`` bytes);
/// - the directory's part before the end, when the directory is at most the limit: twice the
///   change lists' bytes, or 256 KiB. A larger one is left to the fetch, which knows the new
///   files' bytes (its own limit is an eighth of them).
///
/// So a chain that lists many changes but downloads few files (renames, removals) may cost one
/// more request, for the archive's end, and at most twice its lists' bytes.
final class ArchiveDirectoryPrefetch: Sendable {
    /// What the prefetch read, with the bytes it received.
    enum Read: Sendable {
        /// The directory, whole.
        case directory(ArchiveRangeFetcher.DirectoryRead, received: Int64)
        /// The end only: the directory is larger than the prefetch's limit.
        case tail(ArchiveRangeFetcher.DirectoryTail, received: Int64)
        /// The storage's answer was not the archive's bytes, or the archive is not plainly laid
        /// out (logged): the fetch would have found the same, and takes no range.
        case failed(received: Int64)
    }

    private let task: Task<Read?, Never>
    /// Whether the fetch took what was read (``value()``).
    private let taken = Atomic<Bool>(false)

    /// Reads with `fetcher` (its archive, transport and logger) up to `limit` bytes of directory.
    init(fetcher: ArchiveRangeFetcher, limit: UInt64, policy: ConnectionPolicy) {
        task = Task {
            // A connection that must not transfer now gets no request: the update fails on it
            // before any range (``Stager``), or waits until it may.
            guard await policy.allowsTransfers() else { return nil }
            var outcome = ArchiveRangeFetcher.Outcome()
            do {
                guard let tail = try await fetcher.readTail(into: &outcome) else {
                    return .failed(received: outcome.bytes)
                }
                guard UInt64(tail.location.bytes.count) <= limit else { return .tail(tail, received: outcome.bytes) }
                guard let read = try await fetcher.readDirectory(from: tail, limit: limit, into: &outcome) else {
                    return .failed(received: outcome.bytes)
                }
                return .directory(read, received: outcome.bytes)
            } catch {
                return nil // cancelled: the fetch reads the directory itself
            }
        }
    }

    /// The bytes of directory a chain of `changes` changes whose lists weigh `listBytes` may read
    /// before it is planned, from a tree recorded with `recordedEntries` files and folders; nil:
    /// none. None when the lists hold fewer changes than the fewest new files taken from the
    /// archive (``ArchiveRangeFetcher/minimumFiles``), or when the entries the new version keeps
    /// at least (each change removes at most one) already make a directory over the limit, as
    /// the fetch's own check before its first request does.
    static func limit(changes: Int, listBytes: Int, recordedEntries: Int) -> UInt64? {
        guard changes >= ArchiveRangeFetcher.minimumFiles else { return nil }
        let limit = min(ArchiveRangeFetcher.maxDirectoryBytes, max(256 << 10, 2 * UInt64(max(0, listBytes))))
        let recorded = UInt64(max(0, recordedEntries))
        let kept = recorded - min(recorded, UInt64(changes))
        guard kept <= limit / ArchiveRangeFetcher.minimumRecordBytes else { return nil }
        return limit
    }

    /// What was read; nil when nothing was (the policy said no, or the prefetch was cancelled).
    /// Cancelling the caller cancels the prefetch.
    func value() async -> Read? {
        taken.store(true, ordering: .relaxed)
        return await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }
    }

    /// Cancels the prefetch if it is still running, and waits for it: no request of the
    /// update's outlives it. Returns the bytes it received that the fetch did not take (they
    /// count in the update's bytes downloaded all the same).
    func finish() async -> Int64 {
        task.cancel()
        let read = await task.value
        guard !taken.load(ordering: .relaxed), let read else { return 0 }
        switch read {
        case .directory(_, let received), .tail(_, let received), .failed(let received): return received
        }
    }

    /// Where a replay keeps its prefetch, started from the planner's callback.
    final class Slot: Sendable {
        private let prefetch = Mutex<ArchiveDirectoryPrefetch?>(nil)

        var current: ArchiveDirectoryPrefetch? { prefetch.withLock { $0 } }

        /// Starts `make()`'s prefetch unless one is running.
        func start(_ make: () -> ArchiveDirectoryPrefetch?) {
            prefetch.withLock { current in
                if current == nil { current = make() }
            }
        }

        /// ``ArchiveDirectoryPrefetch/finish()`` of the prefetch, if one started.
        func finish() async -> Int64 {
            await current?.finish() ?? 0
        }
    }
}

extension ArchiveDirectoryPrefetch: Equatable {
    /// The same prefetch.
    static func == (lhs: ArchiveDirectoryPrefetch, rhs: ArchiveDirectoryPrefetch) -> Bool { lhs === rhs }
}
