import Archive
import FileKit
import StorageFormat

/// Composes pending change lists into one net `SyncPlan` before anything is downloaded.
///
/// The storage serves only its latest content, so a client several versions behind cannot
/// replay history literally: a file added in 1.1 and moved in 1.2 exists on the server only at
/// its 1.2 place. The planner therefore replays every change on a *virtual* copy of the local
/// tree (`VirtualTree`), where each file remembers where its bytes come from: an existing
/// local file, or "fetch from the storage". Only the final tree counts, so a file added then
/// removed is never fetched, a file redownloaded twice is fetched once, and an added-then-moved
/// file is fetched once from its final place.
public enum NetPlanner {
    /// Plans the way from `local` (at version `from`) through `lists`, which must already form a
    /// chain ending at `to`.
    public static func plan(local: LocalTree, from: CacheVersion, to: CacheVersion, lists: [ChangeList]) -> SyncPlan {
        var tree = VirtualTree(local: local)
        for list in lists {
            for change in list.changes {
                tree.apply(change, listName: list.url.lastPathComponent)
            }
        }
        return tree.plan(from: from, to: to)
    }

    /// Plans straight from the lists' bytes, one change at a time, dropping each list's body
    /// once it is applied: memory holds the tree and the lists not yet applied, never a parsed list.
    static func plan(
        local: LocalTree, from: CacheVersion, to: CacheVersion, readers: inout [ChangeListReader],
        fingerprints: Bool = true
    ) throws(SyncError) -> SyncPlan {
        var tree = VirtualTree(local: local)
        return try plan(&tree, from: from, to: to, readers: &readers, fingerprints: fingerprints)
    }

    /// Plans on `tree` (eager, or lazy: ``VirtualTree/init(loader:)``), which is left as the
    /// lists made it, so that a lazy plan can be widened later (``VirtualTree/cover(_:)``).
    static func plan(
        _ tree: inout VirtualTree, from: CacheVersion, to: CacheVersion, readers: inout [ChangeListReader],
        fingerprints: Bool = true
    ) throws(SyncError) -> SyncPlan {
        for index in readers.indices {
            let name = readers[index].name
            try formatWork { () throws(StorageFormatError) in
                try readers[index].forEachChange { change in tree.apply(change, listName: name) }
            }
            readers[index].release()
        }
        return tree.plan(from: from, to: to, fingerprints: fingerprints)
    }
}
