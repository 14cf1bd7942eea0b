import FileKit
import Foundation
import Logging
import StorageFormat
import Synchronization
import Transport

/// The replay planner: reads the local tree while the storage client fetches the change-list
/// chain, and composes the chain into one net ``SyncPlan`` (``NetPlanner``) off the
/// cooperative pool.
///
/// Between full checks, with every folder as the last switch recorded it, the local tree is the
/// tree index, read lazily: only the folders the changes reach into are listed (``IndexBase``),
/// and the plan covers those (``Planned/widen``).
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
        /// The plan. From the tree index it covers only the folders the changes reach into, each
        /// with all its entries; a folder it names without its entries is kept as it is.
        var plan: SyncPlan
        /// ``SyncPlan/identity`` of ``plan``, worked out once: every record of the run names the
        /// plan by it.
        var identity: String
        var listsApplied: Int
        /// Where the plan's version differs from the current content (the twin's new dirty
        /// paths, ``SyncPlan/changedPaths(from:)``); nil when the content holds intruders.
        var changed: [SafeRelativePath]?
        /// The current content's shape as scanned (or, from the index, as recorded): the tree
        /// index is trusted only when it matches.
        var localShape: TreeShape
        /// The current content's folders: after the switch they are the twin's, whose ctimes are
        /// recorded.
        var localFolders: [SafeRelativePath]
        /// Their `ctime`s as verified while planning from the index (empty after a listing): the
        /// switch renames only the root, so they are the twin's.
        var localTimes: [SafeRelativePath: Int64] = [:]
        /// Files of the current content whose identity (device, inode, size, mtime) is not the one
        /// recorded at the switch: replaced or edited in place since. Any, and the staged tree is
        /// checked whole, and no twin is kept of this content.
        var drifted: Int
        /// Whether the current content was read from the tree index (every folder as the switch
        /// recorded it), not listed; false means this update made a full check.
        var fromIndex = false
        /// The shape of the version the plan builds.
        var newShape: TreeShape
        /// Every folder of the version the plan builds.
        var newFolders: [SafeRelativePath]
        /// How many files of the new version are kept from the current content.
        var filesReused: Int
        /// What the plan becomes when more of the tree is needed (a twin's dirty set, or a whole
        /// build); nil when ``plan`` covers everything already.
        var widen: PlanWidening?
        /// The folders planning from the index listed, whole, for the tree check
        /// (``StateStore/indexDelta(_:changed:listed:)``); nil after a listing of the folder.
        var listings: IndexListings?
    }

    /// What planning from the tree index starts from.
    struct IndexBase: Sendable {
        /// The current version's shape, as recorded.
        var shape: TreeShape
        /// The current version's folders, as recorded (the root not included).
        var folders: [SafeRelativePath]
        /// Every folder's `ctime` (the root's too), as recorded and found again.
        var times: [SafeRelativePath: Int64]
    }

    /// The plan from `local` to the status's actual version; nil when the published lists do
    /// not form a chain (the caller restores from the archive instead).
    func plan(from local: CacheVersion, status: CacheStatus, layout: StorageLayout) async throws(SyncError) -> Planned?
    {
        guard let shape = try await recordedShape(at: local) else {
            return try await planFromListing(from: local, status: status, layout: layout)
        }
        // The change lists are fetched while the index's premises are checked (its folders read,
        // and a `stat` each): neither needs the other.
        let storage = self.storage
        async let fetched = storage.fetchChain(from: local, status: status, layout: layout)
        let base = try await indexBase(shape: shape)
        let chain: StorageClient.Chain?
        do { chain = try await fetched } catch { throw SyncError.wrap(error) }
        guard let chain else { return nil }
        guard let base else {
            return try await planFromListing(from: local, status: status, layout: layout, chain: chain)
        }
        if let planned = try await planFromIndex(base, from: local, chain: chain, status: status) {
            return planned
        }
        // A damaged index row: the folder is listed after all, and the lists (planning used
        // them up; kept by their ETags) read again.
        logger.debug("the tree index cannot be read as a tree; listing the content folder")
        return try await planFromListing(from: local, status: status, layout: layout)
    }

    /// Plans from the content folder as listed, every file's identity checked: the full check.
    /// Without `chain`, the change lists are fetched while the folder is listed.
    private func planFromListing(
        from local: CacheVersion, status: CacheStatus, layout: StorageLayout, chain known: StorageClient.Chain? = nil
    )
        async throws(SyncError) -> Planned?
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
        // A failure leaves the scan to be cancelled and awaited as the function exits.
        let fetched: StorageClient.Chain?
        if let known {
            fetched = known
        } else {
            fetched = try await storage.fetchChain(from: local, status: status, layout: layout)
        }
        guard let chain = fetched else {
            _ = try? await scanned // finished before the restore replaces the folder it reads
            return nil
        }
        // Planning a long list is seconds of CPU: it runs off the cooperative pool.
        var (listed, drifted): (LocalTree, Int)
        do { (listed, drifted) = try await scanned } catch { throw SyncError.wrap(error) }
        drifted += try await leaveOutFoldersRecordedAsFiles(&listed, at: local)
        let tree = listed
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
        logWarnings(plan)
        return Planned(
            plan: plan, identity: plan.identity, listsApplied: chain.count, changed: changed, localShape: shape,
            localFolders: Array(tree.folders), drifted: drifted, fromIndex: false, newShape: plan.shape,
            newFolders: plan.folders, filesReused: plan.reused.count)
    }

    /// Leaves out of `tree` every folder the listing found where the recorded version (the tree
    /// index of `local`) has a file, with everything it holds, and returns how many entries that
    /// left out. A file replaced locally by a folder is drift, as intruders are: a change that
    /// names the file (a redownload) would otherwise refresh what the folder holds, files no
    /// storage publishes, and fail on every run. Left out, the path reads as absent, so the file
    /// is fetched, and the next version does not carry the folder. No index, or one of another
    /// version: nothing is left out.
    private func leaveOutFoldersRecordedAsFiles(_ tree: inout LocalTree, at local: CacheVersion)
        async throws(SyncError) -> Int
    {
        guard !tree.folders.isEmpty, let index = try await store.treeIndex(), index.version == local.text else {
            return 0
        }
        let store = self.store
        let folders = Array(tree.folders)
        let kinds = try await BlockingWork.run { store.indexedKinds(of: folders) } ?? [:]
        // The outermost of them, in path order: what lies within one sorts right after it.
        let strays = kinds.filter { !$0.value }.map(\.key).sorted(by: <).reduce(into: [SafeRelativePath]()) {
            outermost, path in
            if let last = outermost.last, path.isWithin(last) { return }
            outermost.append(path)
        }
        guard !strays.isEmpty else { return 0 }
        logger.debug("folders where the recorded version has files", metadata: ["sync.folders": "\(strays.count)"])
        let before = tree.folders.count + tree.files.count
        let isStray = { (path: SafeRelativePath) -> Bool in
            // The last stray not after `path` is the only one it can lie within.
            var (low, high) = (0, strays.count)
            while low < high {
                let middle = (low + high) / 2
                if path < strays[middle] { high = middle } else { low = middle + 1 }
            }
            return low > 0 && path.isWithin(strays[low - 1])
        }
        tree.folders = tree.folders.filter { !isStray($0) }
        tree.files = tree.files.filter { !isStray($0) }
        return before - tree.folders.count - tree.files.count
    }

    /// Plans on a lazy tree over the tree index; nil when an index row turns out damaged.
    private func planFromIndex(
        _ base: IndexBase, from local: CacheVersion, chain: StorageClient.Chain, status: CacheStatus
    )
        async throws(SyncError) -> Planned?
    {
        let store = self.store
        let lists = chain.lists
        let to = status.actualVersion
        let withFingerprints = status.integrity != nil
        let listings = IndexListings()
        let result = try await BlockingWork.run {
            () throws(SyncError) -> (Planned, LazyPlanSource)? in
            var tree = VirtualTree(loader: { folder in store.indexedEntries(of: folder, keeping: listings) })
            var readers = lists.take()
            let plan = try NetPlanner.plan(
                &tree, from: local, to: to, readers: &readers, fingerprints: withFingerprints)
            guard !tree.failed else { return nil }
            // The new version: the recorded one with the listed part replaced by the plan's.
            let listed = tree.listed
            let newShape = base.shape.replacing(
                TreeShape(folders: listed.folders, files: listed.files), with: plan.shape)
            let newFolders = Set(base.folders).subtracting(listed.folders).union(plan.folders).sorted()
            let identity = plan.identity
            let planned = Planned(
                plan: plan, identity: identity, listsApplied: 0, changed: plan.changedPaths(from: listed),
                localShape: base.shape,
                localFolders: base.folders, localTimes: base.times, drifted: 0, fromIndex: true, newShape: newShape,
                newFolders: newFolders, filesReused: newShape.files - plan.downloads.count)
            let source = LazyPlanSource(
                tree: tree, from: local, to: to, fingerprints: withFingerprints, identity: identity,
                kinds: { paths in store.indexedKinds(of: paths) })
            return (planned, source)
        }
        guard let (first, source) = result else { return nil }
        var planned = first
        planned.listsApplied = chain.count
        logWarnings(planned.plan)
        planned.widen = PlanWidening(source: source, store: store)
        planned.listings = listings
        return planned
    }

    private func logWarnings(_ plan: SyncPlan) {
        for warning in plan.warnings {
            logger.debug("tolerated change-list mistake", metadata: ["sync.warning": "\(Redaction.text(warning))"])
        }
    }

    /// Planning from the tree index needs every premise to hold: a full check ran within
    /// ``fullCheckInterval`` and the index describes `local` (this function: the recorded shape,
    /// from the database alone), and every folder the index records (the root too) still has
    /// the `ctime` read right after the switch (``indexBase(shape:)``).
    private func recordedShape(at local: CacheVersion) async throws(SyncError) -> TreeShape? {
        guard fullCheckInterval > .zero, let last = try await store.lastFullCheck() else { return nil }
        // Compared as seconds: a stored time far from now (a damaged row) makes an age that no
        // `Duration` holds.
        let age = Date().timeIntervalSince(last)
        guard age >= 0, age < fullCheckInterval.seconds else { return nil }
        guard let index = try await store.treeIndex(), index.version == local.text else { return nil }
        return TreeShape(text: index.shape)
    }

    /// Where planning from the tree index starts, when the folders are as the last switch
    /// recorded them. A folder's `ctime` moves whenever an entry in it is added, removed or
    /// renamed, and nothing can set it back, so equal times mean the same names everywhere: no
    /// listing is needed. A file edited in place keeps its folder's time: that is what the
    /// periodic full check is for.
    private func indexBase(shape: TreeShape) async throws(SyncError) -> IndexBase? {
        let times = try await store.liveFolders()
        guard times[.root] != nil, let folders = try await store.indexedFolders(), times.count == folders.count + 1,
            folders.allSatisfy({ times[$0] != nil })
        else { return nil }
        let directory = contentDirectory
        let changed = try await BlockingWork.run { Stager.changedFolders(times, in: directory) }
        guard changed.isEmpty else {
            logger.debug(
                "folders changed since the switch; listing the content folder",
                metadata: ["sync.folders": "\(changed.count)"])
            return nil
        }
        return IndexBase(shape: shape, folders: Array(folders), times: times)
    }
}

/// A lazy plan's ways to more of the tree, for the stager: the plan widened, or a twin's patch.
/// A failure to read the tree index drops the recorded folder times on its way up, so the next
/// update lists the folder instead of reading the damaged index again.
struct PlanWidening: Sendable {
    let source: LazyPlanSource
    let store: StateStore

    /// The plan covering `paths` too (``LazyPlanSource/widened(covering:)``).
    func plan(covering paths: [SafeRelativePath]) async throws(SyncError) -> SyncPlan {
        try await run { () throws(SyncError) in try source.widened(covering: paths) }
    }

    /// The twin's patch for `dirty` (``LazyPlanSource/twinPatch(dirty:)``).
    func twinPatch(dirty: [SafeRelativePath]) async throws(SyncError) -> TwinPatch {
        try await run { () throws(SyncError) in try source.twinPatch(dirty: dirty) }
    }

    private func run<T: Sendable>(_ work: @escaping @Sendable () throws(SyncError) -> T) async throws(SyncError) -> T {
        do throws(SyncError) {
            return try await BlockingWork.run(work)
        } catch {
            try? await store.dropLiveFolders()
            throw error
        }
    }
}

/// A lazy tree after planning, kept so that its plan can be widened (``VirtualTree/cover(_:)``)
/// when the stager needs more of it.
final class LazyPlanSource: Sendable {
    private let tree: Mutex<VirtualTree>
    private let from: CacheVersion
    private let to: CacheVersion
    private let fingerprints: Bool
    /// The identity of the plan made first, which every widened plan keeps.
    private let identity: String
    /// What the current content holds at paths no change reached (``VirtualTree/KindLookup``).
    private let kinds: @Sendable ([SafeRelativePath]) -> [SafeRelativePath: Bool]?

    init(
        tree: VirtualTree, from: CacheVersion, to: CacheVersion, fingerprints: Bool, identity: String,
        kinds: @escaping @Sendable ([SafeRelativePath]) -> [SafeRelativePath: Bool]?
    ) {
        self.tree = Mutex(tree)
        self.from = from
        self.to = to
        self.fingerprints = fingerprints
        self.identity = identity
        self.kinds = kinds
    }

    /// The plan covering `paths` too: each path's folders, and a folder's whole subtree.
    func widened(covering paths: [SafeRelativePath]) throws(SyncError) -> SyncPlan {
        let (from, to, fingerprints, identity) = (self.from, self.to, self.fingerprints, self.identity)
        return try tree.withLock { tree throws(SyncError) -> SyncPlan in
            tree.cover(paths)
            guard !tree.failed else { throw Self.unreadable }
            var plan = tree.plan(from: from, to: to, fingerprints: fingerprints)
            plan.widenedFrom = identity
            return plan
        }
    }

    /// ``VirtualTree/twinPatch(dirty:kinds:)``: the steps that catch a twin up, from the tree
    /// itself rather than from the plan widened to `dirty` (which lists every entry of every
    /// folder `dirty` reaches); a path in a folder no change reached is looked up alone in the
    /// tree index.
    func twinPatch(dirty: [SafeRelativePath]) throws(SyncError) -> TwinPatch {
        let kinds = self.kinds
        return try tree.withLock { tree throws(SyncError) -> TwinPatch in
            let patch = tree.twinPatch(dirty: dirty, kinds: kinds)
            guard !tree.failed else { throw Self.unreadable }
            return patch
        }
    }

    private static let unreadable = SyncError(
        code: .stateStore,
        message:
            "the tree index in the state database cannot be read as a tree; run the update again (it lists the content folder instead)"
    )
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
