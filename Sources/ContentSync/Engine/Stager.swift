import Archive
import FileKit
import Foundation
import Logging
import StorageFormat
import Synchronization
import Transport

/// The stager: builds the next version in the staging area from a ``SyncPlan``, beside the
/// current content, and checks the staged tree against the published tree digest, repairing it
/// from the content manifest where it differs. Nothing it does is visible in the content
/// folder; the ``VersionSwitch`` makes the staged tree current.
struct Stager: Sendable {
    let configuration: SyncConfiguration
    let store: StateStore
    let staging: StagingArea
    let storage: StorageClient
    let downloader: VerifiedDownloader
    var fingerprints: FingerprintCache { downloader.fingerprints }
    var logger: Logger { configuration.logger }

    /// What staging a plan fetched.
    struct Staged: Sendable {
        /// Bytes received over the network.
        var bytes: Int64
        /// Files downloaded by this run.
        var downloaded: Int
        /// Files an interrupted run had already downloaded.
        var alreadyDownloaded: Int
        /// The paths a twin's catch-up touched; nil when the tree was built whole.
        var twinPaths: Int?
        /// Whether `next/` outside the changed paths is known to be the current version's tree:
        /// every folder of the twin was found as recorded (or made dirty where not), or, built
        /// whole in a fresh `next/`, every folder of the content its links came from still had
        /// the `ctime` the plan verified once the links were made (no entry replaced meanwhile)
        /// and every linked file's identity is one the ``FingerprintCache`` knows (none edited in
        /// place).
        var baseVerified = false
        /// What a small catch-up wrote (its downloads, every folder it changed, and the staging
        /// folder the twin moved in), to flush one by one before the switch; nil: flush the
        /// whole filesystem.
        var written: [String]?
        /// The `ctime`s of the twin's folders that the catch-up verified and then left alone:
        /// after the switch they are the live folders' times (``VersionSwitch`` reads only the
        /// others). Empty when the twin was not verified or the tree was built whole.
        var untouchedFolderTimes: [SafeRelativePath: Int64] = [:]
    }

    /// A catch-up touching more paths than this flushes the whole filesystem once (`syncfs`)
    /// rather than each file and folder.
    static let maxFlushedOneByOne = 512

    /// Builds the plan's tree in `next/`, resuming an interrupted run of the same plan.
    ///
    /// With a usable twin (the previous version, kept after the last switch, see ``TwinState``)
    /// the twin becomes `next/` and only its dirty paths are caught up; otherwise the tree is
    /// built whole: folders, hard links to the current content for the files it keeps, and
    /// downloads for the rest. `changed` is where the plan's version differs from the current
    /// content (nil: keep no twin after the switch). A plan that covers only part of the tree (a
    /// lazy plan, ``ReplayPlanner/Planned/widen``) reaches through `widen` what each way of
    /// building needs: the twin's patch for the dirty paths, or the plan of everything.
    /// `twin` is ``checkTwin(base:)`` of the plan's starting version, done beside the planning.
    /// `contentTimes`: the content folders' `ctime`s the plan verified (empty when it listed the
    /// folder), checked again once a whole build has made its links.
    func stage(
        _ plan: SyncPlan, identity: String, changed: [SafeRelativePath]?, twin: TwinCheck?, widen: PlanWidening? = nil,
        contentTimes: [SafeRelativePath: Int64] = [:], layout: StorageLayout, archive: PublishedArchive? = nil,
        progress: @escaping @Sendable (SyncProgress) -> Void
    ) async throws(SyncError) -> Staged {
        // Probed once: the staging folder exists for as long as the update holds its lock
        // (``UpdateLock``), and every way of building writes on its filesystem.
        let root = staging.root
        let unnamedFiles = try await BlockingWork.run { DownloadDestination.namingWorks(in: root) }
        if let changed, let twin, twin.twin.baseVersion == plan.from.text {
            if twin.rootChanged {
                logger.debug("the twin's top folder changed since it was recorded; building the tree whole")
            } else if let staged = try await catchUp(
                twin, identity: identity, plan: plan, changed: changed, widen: widen, layout: layout,
                archive: archive, unnamedFiles: unnamedFiles, progress: progress)
            {
                return staged
            }
        }
        let pending = try await store.pendingPlan()
        let resuming = pending?.identity == identity && pending?.phase == .staging
        // A fresh build fetches the new files' ranges of the archive while next/ is prepared
        // (the plan widened and recorded, the folders made); each range waits at the gate before
        // it writes, and the gate opens only once next/ is ready for the plan those files are in.
        let gate = StartGate()
        let lazy = plan
        async let early =
            resuming
            ? nil : earlyRanges(lazy, archive: archive, unnamedFiles: unnamedFiles, gate: gate, progress: progress)
        let plan: SyncPlan
        do {
            plan = try await prepareNext(lazy, identity: identity, changed: changed, widen: widen, resuming: resuming)
            // A widened plan downloads the lazy plan's files, with the same fingerprints; were it
            // ever otherwise, the early ranges would place files the plan does not have.
            let wanted = Set(plan.downloads)
            gate.open(
                lazy.downloads.allSatisfy {
                    wanted.contains($0) && plan.expectedFingerprints[$0] == lazy.expectedFingerprints[$0]
                })
        } catch {
            gate.open(false)
            _ = try? await early
            throw error
        }
        // The links, and for a fresh next/ their check, are made while the files come (a file
        // hashed on arrival keeps its fingerprint when the stored ones load:
        // ``FingerprintCache/load(_:)``).
        let checksBase = !resuming && !contentTimes.isEmpty
        async let linked = linkAll(plan.reused, verifying: checksBase ? contentTimes : nil)
        let fetched: DownloadTally
        let todo: [SafeRelativePath]
        do {
            (fetched, todo) = try await downloadRest(
                plan.downloads, resuming: resuming, plan: plan, layout: layout, archive: archive,
                unnamedFiles: unnamedFiles, prefetched: try await early, spares: nil, progress: progress)
        } catch {
            _ = try? await linked
            throw SyncError.wrap(error)
        }
        var staged = Staged(
            bytes: fetched.bytes, downloaded: todo.count, alreadyDownloaded: plan.downloads.count - todo.count)
        // A fresh next/ holds exactly the plan's folders, its verified downloads and links to the
        // content's files. Those are the recorded ones if no entry of the content was replaced
        // from the plan's check to the last link (every folder's time is the same again) and
        // every linked file is one the fingerprints know (its inode, size and modification
        // time: a file edited in place is not, as in the whole check, which then runs).
        do { staged.baseVerified = try await linked } catch { throw SyncError.wrap(error) }
        return staged
    }

    /// Widens the plan to the whole tree (a widened plan keeps the identity of the plan it
    /// widens, ``SyncPlan/widenedFrom``), records it as pending, and makes `next/` hold its
    /// folders: afresh, or kept when `resuming` the same plan. Returns the plan.
    private func prepareNext(
        _ plan: SyncPlan, identity: String, changed: [SafeRelativePath]?, widen: PlanWidening?, resuming: Bool
    ) async throws(SyncError) -> SyncPlan {
        let plan = try await widen?.plan(covering: [.root]) ?? plan
        let staging = self.staging
        // The twin (if any) is forgotten before its folder goes, and the new dirty set recorded.
        try await store.beginPlan(
            PendingPlanRecord(
                identity: identity, kind: "replay", fromVersion: plan.from.text,
                toVersion: plan.to.text, phase: .staging, createdAt: Date()), twinChanges: changed)
        try await BlockingWork.files { () throws(FileSystemError) in
            if resuming {
                try staging.prepare()
                try FileSystem.makeFolder(staging.next)
            } else {
                try staging.resetNext(includingDownloads: true)
            }
            do throws(FileSystemError) {
                for folder in plan.folders { try FileSystem.makeFolder(folder.absolute(in: staging.next)) }
            } catch {
                guard resuming else { throw error }
                // Something that is not a folder where the kept next/ needs one (a symlink, say):
                // the resumed tree is not trusted, and is built afresh (the downloads in
                // partial/ stay).
                try staging.resetNext(includingDownloads: false)
                for folder in plan.folders { try FileSystem.makeFolder(folder.absolute(in: staging.next)) }
            }
        }
        return plan
    }

    /// Hard-links `links` into `next/`, a link that exists already kept (a resumed run's).
    /// `verifying`: the content folders' `ctime`s the plan verified; then, once the links are
    /// made, whether they are the recorded files: every folder has that time again (no entry of
    /// the content was replaced from the plan's check to the last link) and every linked file's
    /// identity is one the stored fingerprints know (its inode, size and modification time: a
    /// file edited in place is not). The fingerprints are read while the links are made, and
    /// the links checked in two halves at once. Returns false when not verifying.
    private func linkAll(
        _ links: [SyncPlan.Reuse], verifying contentTimes: [SafeRelativePath: Int64]?
    ) async throws(SyncError) -> Bool {
        let (staging, directory, store, fingerprints) = (
            self.staging, configuration.contentDirectory, self.store, self.fingerprints
        )
        async let preloaded: Void = contentTimes == nil ? () : fingerprints.loadStored(from: store)
        do {
            try await BlockingWork.files { () throws(FileSystemError) in
                // From the content folder held open, never through a link (as a repair does).
                let live = try HeldFolder.content(directory)
                do throws(FileSystemError) {
                    try FileSystem.linkOrCopy(
                        links.lazy.map { ($0.source.absolute(in: live.path), $0.target.absolute(in: staging.next)) })
                } catch {
                    throw live.shown(error)
                }
            }
        } catch {
            try? await preloaded
            throw SyncError.wrap(error)
        }
        do { try await preloaded } catch { throw SyncError.wrap(error) }
        guard let contentTimes else { return false }
        let next = staging.next
        func known(_ part: ArraySlice<SyncPlan.Reuse>) async throws(SyncError) -> Bool {
            try await BlockingWork.run {
                var folders = FolderHandles()
                for link in part {
                    guard let identity = folders.identity(of: link.target.absolute(in: next)),
                        fingerprints.contains(identity)
                    else { return false }
                }
                return true
            }
        }
        let half = links.count / 2
        async let first = known(links[..<half])
        let second = try await known(links[half...])
        let foldersKept = try await BlockingWork.run { Self.changedFolders(contentTimes, in: directory).isEmpty }
        let firstKnown: Bool
        do { firstKnown = try await first } catch { throw SyncError.wrap(error) }
        return firstKnown && second && foldersKept
    }

    /// The archive ranges of a fresh build's (or catch-up's) new files, fetched while `next/` is
    /// prepared: each range downloads into memory, then waits at `gate` before it writes
    /// (``StartGate``), and writes nothing if the gate says no. Nil when the plan's files do not
    /// come from the archive (too few, no archive, or no `unnamedFiles` in the staging area).
    private func earlyRanges(
        _ plan: SyncPlan, archive: PublishedArchive?, unnamedFiles: Bool, gate: StartGate,
        progress: @escaping @Sendable (SyncProgress) -> Void
    ) async throws(SyncError) -> ArchiveRangeFetcher.Outcome? {
        guard let archive, unnamedFiles, plan.downloads.count >= ArchiveRangeFetcher.minimumFiles else { return nil }
        try await configuration.connectionPolicy.requireTransfers()
        var fetcher = rangeFetcher(archive)
        fetcher.gate = gate
        return try await fetcher.fetch(
            plan.downloads, expected: plan.expectedFingerprints,
            progress: Self.rangeProgress(
                total: plan.downloads.count, bytes: Self.expectedBytes(plan.downloads, plan), progress))
    }

    private func rangeFetcher(_ archive: PublishedArchive) -> ArchiveRangeFetcher {
        ArchiveRangeFetcher(
            transport: downloader.transport, archive: archive, staging: staging, fingerprints: fingerprints,
            connections: max(1, configuration.maxConcurrentDownloads), queued: Self.downloadsQueued(configuration),
            logger: logger)
    }

    /// The bytes `paths` download in all, when the change lists give every one's size (the
    /// integrity extension), for the progress's time left; nil otherwise. Saturating: sizes come
    /// from the storage.
    static func expectedBytes(_ paths: [SafeRelativePath], _ plan: SyncPlan) -> Int64? {
        var total: Int64 = 0
        for path in paths {
            guard let size = plan.expectedFingerprints[path]?.size, size >= 0 else { return nil }
            total = FileSystem.adding(size, to: total)
        }
        return total
    }

    /// Progress of files placed from archive ranges, `total` new files (`bytesTotal` bytes) in all.
    private static func rangeProgress(
        total: Int, bytes bytesTotal: Int64?, _ progress: @escaping @Sendable (SyncProgress) -> Void
    ) -> @Sendable (SafeRelativePath, Int64) -> Void {
        let counted = Mutex((bytes: Int64(0), files: 0))
        return { path, bytes in
            let (bytesDone, filesDone) = counted.withLock { counted in
                counted.bytes += bytes
                counted.files += 1
                return (counted.bytes, counted.files)
            }
            progress(
                SyncProgress(
                    phase: .downloadingFiles, bytesDone: bytesDone, bytesTotal: bytesTotal, filesDone: filesDone,
                    filesTotal: total, currentItem: path.string))
        }
    }

    /// The twin on record as the stager found it, before a catch-up (``checkTwin(base:)``).
    struct TwinCheck: Sendable {
        var twin: TwinState
        /// Where the twin folder is: `retired/`, or `next/` (a catch-up's own work).
        var location: String
        /// The `ctime`s recorded for the twin's folders (read only for a twin in `retired/`).
        var recorded: [SafeRelativePath: Int64] = [:]
        /// The recorded folders that are no longer folders with the recorded `ctime`: dirty too.
        var touched: [SafeRelativePath] = []
        /// Whether every recorded folder was compared (so `next/` outside the dirty paths is
        /// known to be the twin's version).
        var verified = false
        /// The twin's own top folder changed: the tree is built whole.
        var rootChanged: Bool { touched.contains(.root) }
    }

    /// The recorded twin, if it is still a folder at `retired/` or `next/` with the recorded
    /// identity and is caught up against `base`, with its folders compared to the `ctime`s
    /// recorded when it became the twin: a folder where anything was added, removed or renamed
    /// since is dirty too (its subtree is rebuilt). Only a twin still in `retired/` can be
    /// compared: one in `next/` is a catch-up's own work.
    ///
    /// It reads only (the database and `stat`s): the engine runs it beside the planning, which
    /// needs neither the twin nor the staging area.
    func checkTwin(base: CacheVersion) async throws(SyncError) -> TwinCheck? {
        guard let twin = try await store.twin(), twin.baseVersion == base.text,
            let location = staging.location(ofTwin: twin.identity)
        else { return nil }
        var check = TwinCheck(twin: twin, location: location)
        guard location == staging.retired else { return check }
        let recorded = try await store.twinFolders()
        guard !recorded.isEmpty else { return check }
        let retired = staging.retired
        check.recorded = recorded
        check.touched = try await BlockingWork.run { Self.changedFolders(recorded, in: retired) }
        check.verified = true
        return check
    }

    /// Catches the twin up to the plan's version in `next/`: its dirty set (grown by `changed`
    /// and the folders `check` found changed, first, in the database) is removed and placed
    /// again from the plan, and nothing else is touched. A crash part-way leaves a twin whose
    /// dirty set still covers everything it did, so the next run (of this plan or another)
    /// catches it up again.
    private func catchUp(
        _ check: TwinCheck, identity: String, plan: SyncPlan, changed: [SafeRelativePath],
        widen: PlanWidening?, layout: StorageLayout, archive: PublishedArchive?, unnamedFiles: Bool,
        progress: @escaping @Sendable (SyncProgress) -> Void
    ) async throws(SyncError) -> Staged? {
        let (twin, location, touched, verified) = (check.twin, check.location, check.touched, check.verified)
        let pending = try await store.pendingPlan()
        let resuming = pending?.identity == identity && pending?.phase == .staging
        let staging = self.staging
        // As in a whole build, a fresh catch-up fetches the new files' ranges while the twin is
        // moved to next/ and its dirty paths removed; each range waits at the gate before it
        // writes, and the gate opens once those paths are free.
        let gate = StartGate()
        async let early =
            resuming
            ? nil : earlyRanges(plan, archive: archive, unnamedFiles: unnamedFiles, gate: gate, progress: progress)
        let patch: TwinPatch
        let spares: SpareFiles
        do {
            try await store.beginPlan(
                PendingPlanRecord(
                    identity: identity, kind: "replay", fromVersion: plan.from.text,
                    toVersion: plan.to.text, phase: .staging, createdAt: Date()), twinChanges: changed + touched,
                keepingTwin: true)
            let dirty = twin.changes + changed + touched
            // The plan itself is not widened: every download is one of its changes, so it has them all.
            patch = try await widen?.twinPatch(dirty: dirty) ?? plan.twinPatch(dirty: dirty)
            // A run of this plan that was stopped after its removals: every file at a download's
            // path in next/ is then a finished download (only a finished one is given its name), so
            // the removals are not done again and those downloads are kept.
            let removed = resuming && pending?.twinCaughtUp == true && location == staging.next
            // The files the removals take out are kept to be written over by the downloads, as
            // many as there are downloads: no inode or block is freed and allocated again.
            spares = SpareFiles(in: staging.partial, limit: removed ? 0 : patch.downloads.count)
            // Every folder the patch works through must be a real folder (not a symlink planted
            // where the twin's own checks cannot see, as in a twin a crash left in next/):
            // otherwise the tree is built whole, from a fresh next/.
            guard try await BlockingWork.run({ [patch] in Self.foldersAreReal(on: patch, in: location) }) else {
                logger.debug(
                    "a folder the twin's catch-up works through is not a real folder; building the tree whole")
                gate.open(false)
                _ = try? await early
                try await store.dropTwin()
                return nil
            }
            try await BlockingWork.files { [patch, spares] () throws(FileSystemError) in
                try staging.prepare()
                if location == staging.retired {
                    try FileSystem.removeTree(staging.next)
                    try FileSystem.rename(
                        staging.retired, to: staging.next, operation: "cannot move the twin tree to")
                }
                if !removed {
                    for path in patch.removals { try spares.remove(path.absolute(in: staging.next)) }
                }
                for folder in patch.folders { try FileSystem.makeFolder(folder.absolute(in: staging.next)) }
            }
            try await store.markTwinCaughtUp()
            // Every file the ranges were asked for is one the patch downloads: its path is free.
            let downloads = Set(patch.downloads)
            gate.open(plan.downloads.allSatisfy(downloads.contains))
        } catch {
            gate.open(false)
            _ = try? await early
            throw error
        }
        logger.debug(
            "catching up the twin tree",
            metadata: [
                "sync.dirty": "\(twin.changes.count + changed.count)", "sync.touched": "\(touched.count)",
                "sync.removed": "\(patch.removals.count)",
                "sync.linked": "\(patch.links.count)", "sync.downloads": "\(patch.downloads.count)",
            ])
        // A patch places each path once: its links and downloads are disjoint, and the links are
        // made while the files come.
        async let linked = linkAll(patch.links, verifying: nil)
        let fetched: DownloadTally
        let todo: [SafeRelativePath]
        do {
            // A resumed run keeps the downloads it finished (the removals were not done again).
            (fetched, todo) = try await downloadRest(
                patch.downloads, resuming: resuming, plan: plan, layout: layout, archive: archive,
                unnamedFiles: unnamedFiles, prefetched: try await early, spares: spares, progress: progress)
        } catch {
            _ = try? await linked
            throw SyncError.wrap(error)
        }
        do { _ = try await linked } catch { throw SyncError.wrap(error) }
        return Staged(
            bytes: fetched.bytes, downloaded: todo.count, alreadyDownloaded: plan.downloads.count - todo.count,
            twinPaths: patch.count, baseVerified: verified, written: Self.written(by: patch, staging: staging),
            untouchedFolderTimes: verified ? Self.untouched(check.recorded, by: patch) : [:])
    }

    /// The folders of `recorded` (verified as recorded) that `patch` leaves with their `ctime`:
    /// not the root (renamed), not a folder the patch adds to or removes from, creates, or
    /// removes with an ancestor. Leaving out one too many only costs a `stat` at the switch.
    static func untouched(_ recorded: [SafeRelativePath: Int64], by patch: TwinPatch) -> [SafeRelativePath: Int64] {
        let paths = patch.paths
        let changed = Set(paths.map(\.parent) + paths)
        // Whether a folder or one of its ancestors (the root aside) changed, each folder judged
        // once from its parent's verdict: listing every folder's ancestors was cubic in depth
        // (13 s of an 1,800-level replay).
        var touched: [SafeRelativePath: Bool] = [.root: false]
        func isTouched(_ folder: SafeRelativePath) -> Bool {
            var unjudged: [SafeRelativePath] = []
            var current = folder
            var verdict: Bool
            while true {
                if let known = touched[current] {
                    verdict = known
                    break
                }
                if changed.contains(current) {
                    verdict = true
                    touched[current] = true
                    break
                }
                unjudged.append(current)
                current = current.parent
            }
            for path in unjudged { touched[path] = verdict }
            return verdict
        }
        return recorded.filter { folder, _ in !folder.isRoot && !isTouched(folder) }
    }

    /// The files and folders `patch` wrote in `next/`, plus the staging folder (the twin was
    /// renamed in it) and `partial/` (spares were renamed out of it); nil when the patch is too
    /// big to flush one by one.
    static func written(by patch: TwinPatch, staging: StagingArea) -> [String]? {
        guard patch.count <= maxFlushedOneByOne else { return nil }
        // Each touched path's folder, and the folders the patch creates.
        let folders = Set(patch.paths.map(\.parent) + patch.folders + [.root])
        return patch.downloads.map { $0.absolute(in: staging.next) }
            + folders.sorted().map { $0.absolute(in: staging.next) }
            + [staging.root, staging.partial]
    }

    /// Whether every existing ancestor of every path the patch touches is a folder (by `lstat`,
    /// so not a symlink to one) under `twin`.
    static func foldersAreReal(on patch: TwinPatch, in twin: String) -> Bool {
        var checked: Set<SafeRelativePath> = []
        for path in patch.paths {
            for ancestor in path.ancestors where checked.insert(ancestor).inserted {
                guard let info = FileSystem.status(of: ancestor.absolute(in: twin)) else { continue }
                if info.st_mode & S_IFMT != S_IFDIR { return false }
            }
        }
        return true
    }

    /// The recorded folders (content paths under `twin`, the root as ``SafeRelativePath/root``)
    /// that are no longer folders with the recorded `ctime`.
    static func changedFolders(_ recorded: [SafeRelativePath: Int64], in twin: String) -> [SafeRelativePath] {
        recorded.compactMap { path, ctime in folderTime(path.absolute(in: twin)) == ctime ? nil : path }.sorted()
    }

    /// The `ctime` of each of `folders` (content paths under `twin`) and of `twin` itself, as
    /// recorded for the next catch-up; a path that is not a folder is left out. `known`: times
    /// verified since and not changed by this update, taken instead of a `stat` (never the
    /// root's: the swap renames it).
    static func folderTimes(
        _ folders: [SafeRelativePath], in twin: String, known: [SafeRelativePath: Int64] = [:]
    ) -> [SafeRelativePath: Int64] {
        var times: [SafeRelativePath: Int64] = [:]
        for folder in folders + [.root] {
            times[folder] = folder.isRoot ? folderTime(twin) : known[folder] ?? folderTime(folder.absolute(in: twin))
        }
        return times
    }

    /// The `ctime` of the folder at `path`; nil when it is not a folder (a symlink to one neither).
    private static func folderTime(_ path: String) -> Int64? {
        guard let info = FileSystem.status(of: path), info.st_mode & S_IFMT == S_IFDIR else { return nil }
        return FileSystem.changeTime(info)
    }

    /// How many downloads are handed to the transport at a time. With the manager's own
    /// transport, whose per-host cap is ``SyncConfiguration/maxConcurrentDownloads`` connections,
    /// twice as many: the transport holds the others queued, so a finished download's connection
    /// starts the next at once, on its own I/O thread, instead of after a round trip through this
    /// task group (2,000 small files on loopback: 7-10 % less time). A transport the app gave is
    /// shared, and its cap may be wider, so it gets exactly that many.
    static func downloadsQueued(_ configuration: SyncConfiguration) -> Int {
        let running = max(1, configuration.maxConcurrentDownloads)
        return configuration.transport == nil ? 2 * running : running
    }

    private struct DownloadTally: Sendable {
        var bytes: Int64 = 0
        var files = 0
    }

    /// Fetches `downloads` into `next/` but those the early ranges placed (`prefetched`) and, when
    /// `resuming`, those a stopped run finished (present in `next/`). Returns what was fetched
    /// and the downloads that were still to do.
    private func downloadRest(
        _ downloads: [SafeRelativePath], resuming: Bool, plan: SyncPlan, layout: StorageLayout,
        archive: PublishedArchive?, unnamedFiles: Bool, prefetched: ArchiveRangeFetcher.Outcome?, spares: SpareFiles?,
        progress: @escaping @Sendable (SyncProgress) -> Void
    ) async throws(SyncError) -> (DownloadTally, todo: [SafeRelativePath]) {
        let next = staging.next
        let todo =
            resuming
            ? try await BlockingWork.run { downloads.filter { !FileSystem.exists($0.absolute(in: next)) } } : downloads
        let fetched = try await downloadFiles(
            todo, plan: plan, layout: layout, archive: archive, unnamedFiles: unnamedFiles, prefetched: prefetched,
            spares: spares, progress: progress)
        return (fetched, todo)
    }

    /// Fetches `paths` into `next/`, a bounded number at a time. Each file is given its name in
    /// `next/` only when complete and verified, so a file present there is a finished download
    /// (a resumed run looks for them there, not in the database).
    private func downloadFiles(
        _ paths: [SafeRelativePath], plan: SyncPlan, layout: StorageLayout,
        archive: PublishedArchive?, unnamedFiles: Bool, prefetched: ArchiveRangeFetcher.Outcome? = nil,
        spares: SpareFiles?, progress: @escaping @Sendable (SyncProgress) -> Void
    ) async throws(SyncError) -> DownloadTally {
        guard !paths.isEmpty else { return DownloadTally() }
        try await configuration.connectionPolicy.requireTransfers()
        let total = paths.count
        let bytesTotal = Self.expectedBytes(paths, plan)
        var tally = DownloadTally()
        func record(_ path: SafeRelativePath, _ bytes: Int64) {
            tally.bytes += bytes
            tally.files += 1
        }
        var paths = paths
        // Many new files come as a few ranges of the published archive when the storage allows
        // it (fetched already when `prefetched`); whatever that does not deliver is downloaded
        // file by file below.
        var ranges = prefetched
        if ranges == nil, let archive, unnamedFiles, paths.count >= ArchiveRangeFetcher.minimumFiles {
            ranges = try await rangeFetcher(archive).fetch(
                paths, expected: plan.expectedFingerprints,
                progress: Self.rangeProgress(total: total, bytes: bytesTotal, progress))
        }
        if let outcome = ranges {
            var spans: Int64 = 0
            for (path, bytes) in outcome.fetched {
                record(path, bytes)
                spans += bytes
            }
            tally.bytes += outcome.bytes - spans
            if !outcome.fetched.isEmpty {
                let taken = Set(outcome.fetched.map(\.path))
                paths.removeAll { taken.contains($0) }
            }
            guard !paths.isEmpty else { return tally }
        }
        do {
            try await withThrowingTaskGroup(of: (SafeRelativePath, Int64).self) { group in
                var iterator = paths.makeIterator()
                func launch(_ group: inout ThrowingTaskGroup<(SafeRelativePath, Int64), any Error>) {
                    guard let path = iterator.next() else { return }
                    group.addTask {
                        (
                            path,
                            try await self.downloadFile(
                                path, layout: layout, expected: plan.expectedFingerprints, unnamedFiles: unnamedFiles,
                                spares: spares)
                        )
                    }
                }
                for _ in 0..<Self.downloadsQueued(configuration) { launch(&group) }
                do {
                    while let (path, bytes) = try await group.next() {
                        record(path, bytes)
                        progress(
                            SyncProgress(
                                phase: .downloadingFiles, bytesDone: tally.bytes, bytesTotal: bytesTotal,
                                filesDone: tally.files, filesTotal: total, currentItem: path.string))
                        launch(&group)
                    }
                } catch {
                    // The first failure ends the update, but no new download starts, and those
                    // already handed to the transport run to their end and stay in next/: the
                    // next run does not fetch them again. (Cancelling the update cancels them,
                    // as the group's tasks inherit it.)
                    while let result = await group.nextResult() {
                        guard case .success(let (path, bytes)) = result else { continue }
                        record(path, bytes)
                    }
                    throw error
                }
            }
        } catch {
            throw SyncError.wrap(error)
        }
        return tally
    }

    /// Downloads one file and puts it in `next/`. Returns the bytes received over the network.
    ///
    /// A file whose declared size is at most 1 MiB is written over a spare file (``SpareFiles``)
    /// if there is one, else as an unnamed file in its own folder, and given its name once
    /// verified. Anything else (larger, or of unknown size) goes to its partial name, where a
    /// restart resumes it, and is renamed into place.
    private func downloadFile(
        _ path: SafeRelativePath, layout: StorageLayout,
        expected: [SafeRelativePath: FileFingerprint], unnamedFiles: Bool, spares: SpareFiles?
    ) async throws -> Int64 {
        try await configuration.connectionPolicy.requireTransfers()
        let target = path.absolute(in: staging.next)
        let url = layout.contentURL(for: path)
        let small = expected[path].map { $0.size <= VerifiedDownloader.unnamedDownloadLimit } ?? false
        if small, let spare = spares?.take(), let recycled = DownloadDestination.openRecycled(spare, for: target) {
            defer { recycled.close() }
            let response = try await downloader.download(
                url, into: recycled, expected: expected[path], what: "'\(path)' for the update")
            try recycled.link()
            return response.bytesReceived
        }
        if unnamedFiles, small,
            let unnamed = DownloadDestination.openUnnamed(in: path.parent.absolute(in: staging.next), for: target)
        {
            defer { unnamed.close() }
            let response = try await downloader.download(
                url, into: unnamed, expected: expected[path], what: "'\(path)' for the update")
            try unnamed.link()
            return response.bytesReceived
        }
        let partial = staging.partialFile(for: path)
        let response = try await downloader.download(
            url, to: partial, expected: expected[path], what: "'\(path)' for the update")
        try fileWork { () throws(FileSystemError) in
            try FileSystem.rename(partial, to: target, operation: "cannot move the downloaded '\(path)' into")
        }
        // Only bodies over 1 MiB leave an entity-tag sidecar (see resumableOptions).
        if response.fileSize > 1 << 20 { unlink(partial + ".etag") }
        return response.bytesReceived
    }

    /// Compares the staged tree with the published tree digest and repairs what differs from the
    /// content manifest. Returns the number of repaired paths, or nil when the tree cannot be
    /// made to match (no manifest, or the storage's files contradict it).
    ///
    /// Files whose identity the ``FingerprintCache`` knows are not read again. With
    /// `loadingStored` false, only what the cache holds already is trusted, not the state
    /// database's rows: a repair after `verify`, whose scan read every byte of the tree it
    /// linked. `manifest`: the content manifest when the caller fetched it already.
    func checkTree(
        _ integrity: StorageIntegrity?, layout: StorageLayout,
        loadingStored: Bool = true, manifest known: ContentTree? = nil
    ) async throws(SyncError) -> TreeCheck {
        guard let integrity, let expectedDigest = integrity.treeDigest else { return .matches(repaired: 0, tree: nil) }
        let staging = self.staging
        if loadingStored { try await fingerprints.loadStored(from: store) }
        let cache = fingerprints
        fingerprints.startTracking()
        // Scans and digests on the pool: a digest is seconds of CPU at a million files.
        let scanned = try await BlockingWork.files { () throws(FileSystemError) in
            let (tree, intruders) = try ContentTree.scanLocal(staging.next, cache: cache, unreadableIsDrift: true)
            return (tree, intruders, intruders.isEmpty && TreeDigest.digest(of: tree) == expectedDigest)
        }
        var (tree, intruders) = (scanned.0, scanned.1)
        if scanned.2 {
            return .matches(repaired: 0, tree: tree)
        }
        let manifest: ContentTree
        do {
            let fetched = known == nil ? try await storage.fetchManifest(integrity) : nil
            guard let published = known ?? fetched else {
                return .unrepairable("the storage publishes no content manifest to repair from")
            }
            manifest = published
        } catch {
            return .unrepairable("its content manifest cannot be read (\(error.message))")
        }
        let (manifestMatches, plan) = try await BlockingWork.run { [tree, intruders] () throws(SyncError) in
            (
                TreeDigest.digest(of: manifest) == expectedDigest,
                RepairPlan(staged: tree, intruders: intruders, manifest: manifest)
            )
        }
        guard manifestMatches else {
            return .unrepairable("its content manifest contradicts the published tree digest")
        }
        // First everything the version does not have, whatever its kind (a file where a folder
        // belongs goes here, and so does a folder where a file belongs), then the missing
        // folders, then the files: no step can find something of the wrong kind in its way, and
        // none undoes another.
        try await BlockingWork.files { () throws(FileSystemError) in
            for intruder in plan.intruders { try intruder.remove(under: staging.next) }
            for path in plan.removals { try FileSystem.removeTree(path.absolute(in: staging.next)) }
            for folder in plan.folders { try FileSystem.makeFolder(folder.absolute(in: staging.next)) }
        }
        for (path, fingerprint) in plan.downloads {
            let partial = staging.partialFile(for: path)
            let target = path.absolute(in: staging.next)
            try await BlockingWork.files { () throws(FileSystemError) in try FileSystem.removeTree(target) }
            do {
                _ = try await downloader.download(
                    layout.contentURL(for: path), to: partial, expected: fingerprint, what: "'\(path)'")
            } catch  where error.code == .integrity || (error.underlying as? TransportError)?.statusCode == 404 {
                return .unrepairable("the storage has no copy of '\(path)' matching its manifest (\(error.message))")
            }
            try await BlockingWork.files { () throws(FileSystemError) in
                try FileSystem.rename(partial, to: target, operation: "cannot move the repaired '\(path)' into")
            }
        }
        fingerprints.startTracking()
        let rescanned = try await BlockingWork.files { () throws(FileSystemError) in
            let (tree, intruders) = try ContentTree.scanLocal(staging.next, cache: cache, unreadableIsDrift: true)
            return (tree, intruders.isEmpty && TreeDigest.digest(of: tree) == expectedDigest)
        }
        tree = rescanned.0
        guard rescanned.1 else {
            return .unrepairable(
                "the tree still differs from the published digest after repairing it from the manifest")
        }
        logger.debug(
            "repaired the staged version to match the published tree digest",
            metadata: ["sync.repaired": "\(plan.count)"])
        return .matches(repaired: plan.count, tree: tree)
    }

    /// How many entries a streamed check hands to the state database at a time.
    static let stagedBatch = 4_096

    /// A restore's tree check, in one walk that holds only the folders being walked: every file of
    /// the staged tree is hashed (a restore wrote them all), each folder's digest computed
    /// bottom-up, and the entries go to the state database's staged index in batches, for the
    /// switch to adopt (``IndexUpdate/staged(_:)``). Returns the tree's shape when its digest is
    /// `expectedDigest`; nil when it is not, or the tree holds something content cannot: the
    /// caller then runs ``checkTree(_:layout:loadingStored:manifest:)``, which says what and repairs.
    ///
    /// With `seedingTwin`, every file the walk hashed is linked into `seed/` (``TwinSeed``, on a
    /// thread of its own, ``TwinSeedThread``):
    /// the twin the restore leaves, returned as its folders' `ctime`s when it is whole (nil
    /// when it is not; the tree check's answer does not depend on it).
    func streamTreeCheck(expectedDigest: String, seedingTwin: Bool = false) async throws(SyncError) -> StreamedCheck? {
        try await store.clearStagedIndex()
        fingerprints.startTracking()
        let (staging, store) = (self.staging, self.store)
        return try await BlockingWork.run { () throws(SyncError) -> StreamedCheck? in
            var batch: [TreeDigest.StreamedEntry] = []
            batch.reserveCapacity(Self.stagedBatch)
            // The seed links on a thread of its own, beside the walk; every way out waits for it.
            let seed = seedingTwin ? TwinSeed(from: staging.next, into: staging.seed).map(TwinSeedThread.init) : nil
            do {
                let streamed = try TreeDigest.stream(staging.next) { entry in
                    seed?.add(entry)
                    batch.append(entry)
                    if batch.count == Self.stagedBatch {
                        try store.stage(batch)
                        batch.removeAll(keepingCapacity: true)
                    }
                }
                let seeded = seed?.finish()
                guard let streamed, streamed.digest == expectedDigest else { return nil }
                if !batch.isEmpty { try store.stage(batch) }
                return StreamedCheck(shape: streamed.shape, seededTwin: seeded)
            } catch {
                _ = seed?.finish()
                throw SyncError.wrap(error)
            }
        }
    }

    /// What a streamed tree check found when the tree gives the published digest.
    struct StreamedCheck: Sendable {
        /// The tree's shape.
        var shape: TreeShape
        /// The twin linked in `seed/` beside the check, as its folders' `ctime`s (the root not
        /// included); nil when none was asked for or it is not whole.
        var seededTwin: [SafeRelativePath: Int64]?
    }

    /// What checking a staged tree found.
    enum TreeCheck: Sendable, Equatable {
        /// The tree matches the published digest, after repairing this many paths; `tree` is the
        /// tree as read (nil when the storage publishes no digest, and nothing was read).
        case matches(repaired: Int, tree: ContentTree?)
        /// The tree differs and cannot be repaired file by file; the reason says why.
        case unrepairable(String)
    }
}
