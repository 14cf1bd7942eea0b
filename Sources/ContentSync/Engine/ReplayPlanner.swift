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
    }

    /// The plan from `local` to the status's actual version; nil when the published lists do
    /// not form a chain (the caller restores from the archive instead).
    func plan(from local: CacheVersion, status: CacheStatus, layout: StorageLayout) async throws(SyncError) -> Planned?
    {
        // The local tree is read while the lists are fetched and parsed: neither needs the other.
        let directory = contentDirectory
        let fingerprints = self.fingerprints
        try await fingerprints.loadStored(from: store)
        async let scanned = BlockingWork.files { () throws(FileSystemError) -> (LocalTree, Int) in
            var drifted = 0
            let tree = try LocalTree.scan(directory) { _, identity in
                if !fingerprints.contains(identity) { drifted += 1 }
            }
            return (tree, drifted)
        }
        guard let chain = try await storage.fetchChain(from: local, status: status, layout: layout) else {
            _ = try? await scanned // finished before the restore replaces the folder it reads
            return nil
        }
        // Planning a long list is seconds of CPU: it runs off the cooperative pool.
        let (tree, drifted): (LocalTree, Int)
        do { (tree, drifted) = try await scanned } catch { throw SyncError.wrap(error) }
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
            localFolders: Array(tree.folders), drifted: drifted)
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
