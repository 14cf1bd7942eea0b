import FileKit
import Foundation
import Logging
import StorageFormat
import Synchronization
import Transport

/// The replay planner: reads the local tree while the storage client fetches the change-list
/// chain, and composes the chain into one net ``SyncPlan`` (``NetPlanner``) off the
/// cooperative pool.
struct ReplayPlanner: Sendable {
    let contentDirectory: String
    let storage: StorageClient
    let store: StateStore
    /// The fingerprints recorded for the current version's files: a file whose identity is not
    /// among them was replaced or edited by hand since the switch (``Planned/drifted``).
    let fingerprints: FingerprintCache
    /// How long a replay may plan from the tree index before one lists the whole folder again
    /// (``SyncConfiguration/fullCheckInterval``).
    let fullCheckInterval: Duration
    let logger: Logger

    /// A plan and the number of change lists it composes.
    struct Planned: Sendable {
        var plan: SyncPlan
        var listsApplied: Int
        /// Where the plan's version differs from the current content (the twin's new dirty
        /// paths, ``SyncPlan/changedPaths(from:)``); nil when the content holds intruders.
        var changed: [SafeRelativePath]?
        /// The current content's shape as scanned: the tree index is trusted only when it matches.
        var localShape: TreeShape
        /// The current content's folders: after the switch they are the twin's, whose ctimes are
        /// recorded.
        var localFolders: [SafeRelativePath]
        /// Files of the current content whose identity (device, inode, size, mtime) is not the one
        /// recorded at the switch: replaced or edited in place since. Any, and the staged tree is
        /// checked whole, and no twin is kept of this content.
        var drifted: Int
        /// Whether the current content was read from the tree index (every folder as the switch
        /// recorded it), not listed; false means this update made a full check.
        var fromIndex = false
    }

    /// The plan from `local` to the status's actual version; nil when the published lists do
    /// not form a chain (the caller restores from the archive instead).
    func plan(from local: CacheVersion, status: CacheStatus, layout: StorageLayout) async throws(SyncError) -> Planned?
    {
        // The local tree is read while the lists are fetched and parsed: neither needs the other.
        async let scanned = localTree(at: local)
        guard let chain = try await storage.fetchChain(from: local, status: status, layout: layout) else {
            _ = try? await scanned // finished before the restore replaces the folder it reads
            return nil
        }
        // Planning a long list is seconds of CPU: it runs off the cooperative pool.
        let (tree, drifted, fromIndex): (LocalTree, Int, Bool)
        do { (tree, drifted, fromIndex) = try await scanned } catch { throw SyncError.wrap(error) }
        let from = local
        let to = status.actualVersion
        let withFingerprints = status.integrity != nil
        let lists = chain.lists
        let (plan, changed, shape) = try await BlockingWork.run {
            () throws(SyncError) -> (SyncPlan, [SafeRelativePath]?, TreeShape) in
            var readers = lists.take()
            let plan = try NetPlanner.plan(
                local: tree, from: from, to: to, readers: &readers, fingerprints: withFingerprints)
            return (plan, plan.changedPaths(from: tree), TreeShape(folders: tree.folders, files: tree.files))
        }
        for warning in plan.warnings {
            logger.debug("tolerated change-list mistake", metadata: ["sync.warning": "\(Redaction.text(warning))"])
        }
        return Planned(
            plan: plan, listsApplied: chain.count, changed: changed, localShape: shape,
            localFolders: Array(tree.folders), drifted: drifted, fromIndex: fromIndex)
    }

    /// The current content: from the tree index while that is safe (``recordedTree(at:)``),
    /// else listed whole with every file's identity checked against the stored fingerprints
    /// (how many are unknown: `drifted`).
    private func localTree(at local: CacheVersion) async throws(SyncError) -> (LocalTree, drifted: Int, fromIndex: Bool)
    {
        if let recorded = try await recordedTree(at: local) { return (recorded, 0, true) }
        let directory = contentDirectory
        let fingerprints = self.fingerprints
        try await fingerprints.loadStored(from: store)
        do {
            return try await BlockingWork.files { () throws(FileSystemError) -> (LocalTree, Int, Bool) in
                var drifted = 0
                let tree = try LocalTree.scan(directory) { _, identity in
                    if !fingerprints.contains(identity) { drifted += 1 }
                }
                return (tree, drifted, false)
            }
        } catch {
            throw SyncError.wrap(error)
        }
    }

    /// The content of `local` as the tree index records it, when every premise holds: a full
    /// check ran within ``fullCheckInterval``, the index describes `local`, and every folder it
    /// records (the root too) still has the `ctime` read right after the switch. A folder's
    /// `ctime` moves whenever an entry in it is added, removed or renamed, and nothing can set it
    /// back, so equal times mean the same names everywhere: no listing is needed. A file edited
    /// in place keeps its folder's time: that is what the periodic full check is for.
    private func recordedTree(at local: CacheVersion) async throws(SyncError) -> LocalTree? {
        guard fullCheckInterval > .zero, let last = try await store.lastFullCheck() else { return nil }
        let age = Date().timeIntervalSince(last)
        guard age >= 0, Duration.seconds(age) < fullCheckInterval else { return nil }
        guard let index = try await store.treeIndex(), index.version == local.text else { return nil }
        let times = try await store.liveFolders()
        guard !times.isEmpty, let tree = try await store.indexedTree(), times.count == tree.folders.count + 1,
            tree.folders.allSatisfy({ times[$0] != nil }),
            TreeShape(folders: tree.folders, files: tree.files).text == index.shape
        else { return nil }
        let directory = contentDirectory
        let changed = try await BlockingWork.run { Stager.changedFolders(times, in: directory) }
        guard changed.isEmpty else {
            logger.debug(
                "folders changed since the switch; listing the content folder",
                metadata: ["sync.folders": "\(changed.count)"])
            return nil
        }
        return tree
    }
}

/// The chain's change lists on their way to the planning thread, which drops each body once it
/// is applied; holding them here rather than in a local keeps that body the only copy.
final class PendingLists: Sendable {
    private let lists: Mutex<[ChangeListReader]>
    let count: Int

    init(_ lists: [ChangeListReader]) {
        count = lists.count
        self.lists = Mutex(lists)
    }

    /// The lists, leaving none behind.
    func take() -> [ChangeListReader] {
        lists.withLock { lists in
            defer { lists = [] }
            return lists
        }
    }
}
