import Archive
import FileKit
import Foundation
import Logging
import StorageFormat
import Synchronization
import Transport

/// Runs one update: fetch the status, plan, stage the next version beside the current one,
/// switch atomically.
///
/// The engine orchestrates roles that hand each other explicit values: the ``StorageClient``
/// fetches and checks the storage's documents, the ``ReplayPlanner`` turns the change lists
/// into a ``SyncPlan``, the ``Stager`` (replay) or the ``Restorer`` (archive) builds the next
/// version in the staging area with the ``VerifiedDownloader``, the stager checks it against
/// the tree digest, and the ``VersionSwitch`` makes it current.
///
/// The engine holds no long-lived state of its own: everything that must survive a crash is in
/// the ``StateStore`` or the staging area, so a new engine (or a new process) picks up exactly
/// where an interrupted one stopped.
struct SyncEngine: Sendable {
    let configuration: SyncConfiguration
    let store: StateStore
    let staging: StagingArea
    let storage: StorageClient
    let planner: ReplayPlanner
    let stager: Stager
    let restorer: Restorer
    let switcher: VersionSwitch
    /// The running update's download limit (``ContentBudget``), shared with every downloader user.
    let budget: ContentBudgetSlot
    /// What this engine's update downloaded once its staging finished, for the history of an
    /// attempt that fails after that (a vetoed switch, a failed switch): its bytes crossed the
    /// network all the same, and the next attempt reuses the staged files without counting them.
    let staged = StagedDownloads()
    var logger: Logger { configuration.logger }

    init(configuration: SyncConfiguration, store: StateStore, transport: any Transport) {
        let staging = StagingArea(contentDirectory: configuration.contentDirectory)
        // Fingerprints of files already hashed, so the tree check reads only new or changed files.
        let downloader = VerifiedDownloader(transport: transport, fingerprints: FingerprintCache())
        let storage = StorageClient(configuration: configuration, store: store, transport: transport)
        let stager = Stager(
            configuration: configuration, store: store, staging: staging, storage: storage, downloader: downloader)
        self.configuration = configuration
        self.store = store
        self.staging = staging
        self.storage = storage
        self.planner = ReplayPlanner(
            contentDirectory: configuration.contentDirectory, storage: storage, store: store,
            fingerprints: downloader.fingerprints, fullCheckInterval: configuration.fullCheckInterval,
            logger: configuration.logger)
        self.stager = stager
        self.budget = downloader.budget
        self.restorer = Restorer(configuration: configuration, store: store, staging: staging, downloader: downloader)
        self.switcher = VersionSwitch(
            contentDirectory: configuration.contentDirectory, store: store, staging: staging,
            fingerprints: downloader.fingerprints, logger: configuration.logger,
            beforeSwitch: configuration.beforeSwitch)
    }

    /// The verifier behind `verify`, sharing this engine's roles.
    var verifier: MirrorVerifier {
        MirrorVerifier(
            configuration: configuration, store: store, staging: staging, storage: storage, stager: stager,
            switcher: switcher)
    }

    /// Brings the content folder to the storage's actual version, or throws with the folder
    /// left exactly at its last good version.
    /// `stopReason` is why the update's task may be cancelled (the connection policy turned
    /// false, say), so the history records that rather than a bare cancellation.
    func update(stopReason: StopReason? = nil, progress: @escaping @Sendable (SyncProgress) -> Void)
        async throws(SyncError) -> SyncReport
    {
        let started = Date()
        let clock = PhaseClock(logger: logger)
        defer { clock.end() }
        var fromVersion: String?
        var toVersion: String?
        var kind: UpdateHistoryEntry.Kind = .check
        let lock: UpdateLock
        do {
            lock = try UpdateLock(
                statePath: store.path, stateFolder: store.folder, contentDirectory: configuration.contentDirectory,
                staging: staging)
        } catch {
            // What stops every update from starting (a file planted where the staging folder
            // goes, one of another user) is recorded, so that `status --check` fails too: it
            // once said "succeeded" while every sync failed. Another update running is not a
            // failure of this folder, and a database that is another folder's records nothing.
            let record = try? await store.syncState()
            let owner = record?.contentDirectory
            if error.code != .busy, error.setting != .stateDatabasePath,
                owner == nil || owner == configuration.contentDirectory
            {
                try? await store.recordAttempt(
                    UpdateHistoryEntry(
                        startedAt: started, finishedAt: Date(), fromVersion: nil, toVersion: nil, kind: .check,
                        outcome: .failed, errorCode: error.code, message: error.message),
                    contentDirectory: configuration.contentDirectory)
            }
            throw error
        }
        defer { withExtendedLifetime(lock) {} }
        do {
            clock.begin(.recover)
            let recovered = try await switcher.recoverInterrupted()
            clock.begin(.localCheck)
            let context = try await checkLocalContent()
            fromVersion = context.local?.text
            // Not even the status is fetched while the policy forbids transfers.
            try await configuration.connectionPolicy.requireTransfers()
            progress(SyncProgress(phase: .checking, currentItem: StorageLayout.statusPath))
            clock.begin(.status)
            var layout = try formatWork { () throws(StorageFormatError) in
                try StorageLayout(baseURL: configuration.baseURL)
            }
            let status = try await storage.fetchStatus(layout: &layout)
            toVersion = status.actualVersion.text
            // Every content download of this update stays within the content size it declares.
            budget.set(ContentBudget(status: status))
            defer { budget.set(nil) }
            // From here on every progress event names the version being installed.
            let target = status.actualVersion
            let reported = progress
            let progress: @Sendable (SyncProgress) -> Void = { event in
                var event = event
                event.toVersion = target
                reported(event)
            }
            var report: SyncReport
            if let local = context.local, local == status.actualVersion {
                // Leftovers of an abandoned plan, or of a run killed while it deleted the old
                // version after its switch, go now.
                clock.begin(.upToDate)
                // The twin, if any, stays for the next replay.
                if try await store.pendingPlan() != nil { try await store.clearPlan() }
                let twin = try await store.twinIdentity()
                if staging.hasLeftovers(keeping: twin) {
                    try await BlockingWork.files { [staging] () throws(FileSystemError) in
                        try staging.clearLeftovers(keeping: twin)
                    }
                }
                let (repaired, warning) = try await periodicFullCheck(local: local, status: status, layout: layout)
                try await store.recordAttempt(
                    UpdateHistoryEntry(
                        startedAt: started, finishedAt: Date(), fromVersion: local.text, toVersion: local.text,
                        kind: .check,
                        outcome: .upToDate), contentDirectory: configuration.contentDirectory)
                var upToDate = SyncReport(outcome: .upToDate, fromVersion: local, toVersion: local)
                upToDate.warnings = ([recovered, warning].compactMap { $0 } + context.warnings).map {
                    Redaction.text(staging.shown($0))
                }
                upToDate.repairedFiles = repaired
                clock.end()
                upToDate.phases = clock.timings
                return upToDate
            } else if let local = context.local, local > status.actualVersion {
                var refusal = SyncError(
                    code: .invalidStatus,
                    message:
                        "\(Redaction.url(layout.statusURL)) publishes version \(status.actualVersion), below the local \(local); "
                        + "refusing to roll back. If the storage really went back, reset the state and sync again")
                refusal.remedy = .reset
                throw refusal
            } else if let local = context.local, local >= status.minimalVersion {
                kind = .replay
                report = try await replay(
                    from: local, status: status, layout: layout, clock: clock, progress: progress)
            } else {
                kind = .restore
                report = try await restore(
                    from: context.local, status: status,
                    reason: context.local == nil
                        ? "no local version" : "local version below minimalCacheVersion \(status.minimalVersion)",
                    clock: clock, progress: progress)
            }
            report.warnings.insert(contentsOf: [recovered].compactMap { $0 } + context.warnings, at: 0)
            // An app shows them: a change list's mistake may quote a URL, rebased onto the configured base's user info.
            report.warnings = report.warnings.map { Redaction.text(staging.shown($0)) }
            kind = report.outcome == .restored ? .restore : .replay
            // The update's own writes go into the database file now (within the switch phase),
            // so the next process's first write, a no-change poll's, does not copy them.
            await store.checkpoint()
            clock.end()
            report.phases = clock.timings
            logger.debug(
                "update finished",
                metadata: [
                    "sync.outcome": "\(report.outcome.rawValue)", "sync.to": "\(report.toVersion)",
                    "sync.bytes": "\(report.bytesDownloaded)", "sync.files": "\(report.filesDownloaded)",
                ])
            return report
        } catch {
            // Named as the operator knows the staging folder, not by the held descriptor.
            var failure = staging.shown(SyncError.wrap(error))
            if failure.code == .cancelled, let reason = stopReason?.reason { failure = reason }
            let cancelled = failure.code == .cancelled || failure.code == .connectionNotAllowed
            // A database that is another folder's records nothing of this one.
            if failure.setting == .stateDatabasePath { throw failure }
            // Recorded even though the task may be cancelled: the state, last error and failure count follow.
            let downloaded = staged.current
            let attempt = UpdateHistoryEntry(
                startedAt: started, finishedAt: Date(), fromVersion: fromVersion, toVersion: toVersion, kind: kind,
                outcome: cancelled ? .cancelled : .failed, errorCode: failure.code, message: failure.message,
                bytesDownloaded: downloaded.bytes, filesDownloaded: downloaded.files)
            do {
                try await store.recordAttempt(attempt, contentDirectory: configuration.contentDirectory)
            } catch {
                // A full disk is often the database's too: the downloads kept to resume (which
                // filled it) go, so that the failure is recorded and `status --check` tells it.
                // It once said "succeeded", and exited 0, after a replay ran out of space.
                if failure.code == .insufficientSpace {
                    try? await BlockingWork.files { [staging] () throws(FileSystemError) in
                        try staging.dropResumableDownloads()
                    }
                    try? await store.recordAttempt(attempt, contentDirectory: configuration.contentDirectory)
                }
            }
            throw failure
        }
    }

    /// The full check a no-change update owes (protocol.md §4.5): when none ran within
    /// ``SyncConfiguration/fullCheckInterval`` (or it is zero), the content folder is listed and
    /// every file's identity checked against the fingerprints recorded at the switch (a file
    /// they do not know is read), and the tree compared with the published tree digest. A
    /// difference is repaired as `verify --repair` does, through the staging area and a switch.
    /// Returns how many paths were repaired and a warning that lists them; nothing without
    /// integrity data, which a check needs.
    private func periodicFullCheck(local: CacheVersion, status: CacheStatus, layout: StorageLayout)
        async throws(SyncError) -> (repaired: Int, warning: String?)
    {
        guard status.integrity?.treeDigest != nil, status.integrity?.contentManifest != nil else { return (0, nil) }
        let interval = configuration.fullCheckInterval
        if interval > .zero, let last = try await store.lastFullCheck() {
            let age = Date().timeIntervalSince(last)
            if age >= 0, age < interval.seconds { return (0, nil) }
        }
        let fingerprints = planner.fingerprints
        try await fingerprints.loadStored(from: store)
        let report = try await verifier.check(
            local: local, status: status, layout: layout, repair: true, cache: fingerprints)
        try await store.recordFullCheck(at: Date())
        guard report.repaired > 0 || !report.differences.isEmpty else { return (0, nil) }
        logger.debug(
            "the periodic full check repaired local drift",
            metadata: ["sync.repaired": "\(report.repaired)", "sync.version": "\(local)"])
        let shown = report.differences.prefix(20).joined(separator: "; ")
        let more = report.differences.count > 20 ? "; and \(report.differences.count - 20) more" : ""
        return (
            report.repaired,
            "the full check found \(report.differences.count) difference(s) between \(configuration.contentDirectory) and \(local) "
                + "and repaired them: \(shown)\(more)"
        )
    }

    // MARK: - Local content

    struct LocalContext {
        var local: CacheVersion?
        /// What the caller should know about the folder (it vanished, say), for the report.
        var warnings: [String] = []
    }

    /// Reads the local version and checks that the content folder matches it.
    private func checkLocalContent() async throws(SyncError) -> LocalContext {
        var warnings: [String] = []
        let directory = configuration.contentDirectory
        let state = try await store.syncState()
        if let state, state.contentDirectory != directory {
            var refusal = SyncError(
                code: .configuration,
                message:
                    "state database \(store.path) belongs to \(state.contentDirectory), not \(directory); give each content folder its own state file"
            )
            // Not this folder's database: the refusal is recorded in none (it would mark the
            // other folder's healthy mirror as failing).
            refusal.setting = .stateDatabasePath
            throw refusal
        }
        var local = state?.localVersion.flatMap { try? CacheVersion($0) }
        // The row names this folder and its staging area holds work (an update ran here), so its
        // content is this state's, whatever version it held: a version that does not parse (a
        // damaged row) is restored over, as after a reset that did not finish. It was refused as
        // someone else's files, with advice to force it. Without a staging area the row alone
        // does not make the folder this agent's (a hostile row could name any folder).
        let damagedVersion =
            local == nil && state?.localVersion != nil && StagingArea(contentDirectory: directory).holdsWork()
        if damagedVersion {
            warnings.append(
                "the state database \(store.path) records a version for \(directory) that is not one (a damaged row); restored the folder from the archive"
            )
        }
        // Checked by the lock already; again here, under the lock.
        try UpdateLock.refuseLink(directory)
        var info = stat()
        let exists = lstat(directory, &info) == 0
        if exists && info.st_mode & S_IFMT != S_IFDIR {
            throw SyncError(
                code: .configuration, message: "\(directory) exists and is not a folder; pass a folder path")
        }
        let parent = (directory as NSString).deletingLastPathComponent
        var parentInfo = stat()
        guard lstat(parent, &parentInfo) == 0, parentInfo.st_mode & S_IFMT == S_IFDIR else {
            throw SyncError(
                code: .configuration,
                message: "the parent folder \(parent) of \(directory) does not exist; create it first")
        }
        if local != nil && !exists {
            logger.debug("content folder is missing; restoring it", metadata: ["sync.dir": "\(directory)"])
            warnings.append(
                "\(directory) was missing although version \(local!) was synced there; restored it from the archive")
            local = nil
        }
        // A reset that did not finish leaves files this state synced: not someone else's.
        let resetUnfinished = state?.state == StateStore.resettingState
        if local == nil && exists && !configuration.allowReplacingUnknownContent && !resetUnfinished && !damagedVersion
        {
            let empty = (try? FileManager.default.contentsOfDirectory(atPath: directory).isEmpty) ?? false
            if !empty {
                var refusal = SyncError(
                    code: .configuration,
                    message: "\(directory) is not empty and no state records a synced version there; "
                        + "pass an empty or new folder, or allow replacing its contents")
                refusal.setting = .allowReplacingUnknownContent
                throw refusal
            }
        }
        return LocalContext(local: local, warnings: warnings)
    }

    // MARK: - Replay and restore

    /// The archive a replay may take its new files from, with a floor on the entries its
    /// directory lists (one record a file and folder of the version): the plan's, or for a plan
    /// that covers part of the tree, the recorded index's less every path the plan changes.
    private func publishedArchive(status: CacheStatus, planned: ReplayPlanner.Planned) async throws(SyncError)
        -> PublishedArchive?
    {
        let plan = planned.plan
        guard var archive = PublishedArchive(status: status, reaching: plan.to) else { return nil }
        archive.minimumEntries = plan.folders.count + plan.reused.count + plan.downloads.count
        if let changed = planned.changed, let index = try await store.treeIndex(), index.version == plan.from.text,
            let shape = TreeShape(text: index.shape)
        {
            archive.minimumEntries = max(archive.minimumEntries, shape.files + shape.folders - changed.count)
        }
        return archive
    }

    /// Replays the change lists from `local` to the storage's actual version as one net plan.
    /// Falls back to a restore when the published lists do not form a chain, or when the
    /// replayed tree cannot be repaired to match the tree digest.
    private func replay(
        from local: CacheVersion, status: CacheStatus, layout: StorageLayout, clock: PhaseClock,
        progress: @escaping @Sendable (SyncProgress) -> Void
    ) async throws(SyncError) -> SyncReport {
        let started = Date()
        progress(SyncProgress(phase: .planning, currentItem: StorageLayout.updateListPath))
        clock.begin(.plan)
        // The twin's folders are compared with their recorded times while the plan is made: the
        // planning reads the content folder's index, never the staging area.
        let stager = self.stager
        async let twinChecked = stager.checkTwin(base: local)
        // A failure leaves the check to be cancelled and awaited as the function exits.
        guard let planned = try await planner.plan(from: local, status: status, layout: layout) else {
            _ = try? await twinChecked // done before the restore replaces the staging area
            logger.debug(
                "no chain of change lists leads to the actual version; restoring from the archive",
                metadata: [
                    "sync.from": "\(local)", "sync.to": "\(status.actualVersion)",
                ])
            var report = try await restore(
                from: local, status: status, reason: "no change-list chain from \(local)", clock: clock,
                progress: progress)
            report.warnings.insert(
                "no chain of change lists leads from \(local) to \(status.actualVersion); restored from the archive",
                at: 0)
            return report
        }
        let plan = planned.plan
        // The tree check from the index needs the plan and the recorded index, not the staged
        // tree: it is worked out while the stage downloads and links, and used after it only if
        // the stage found the twin as recorded.
        async let early = indexCheck(planned, integrity: status.integrity)
        clock.begin(.stage)
        let twin: Stager.TwinCheck?
        do { twin = try await twinChecked } catch { throw SyncError.wrap(error) }
        let staged = try await stager.stage(
            plan, identity: planned.identity, changed: planned.changed, twin: twin, widen: planned.widen,
            contentTimes: planned.localTimes, layout: layout,
            archive: try await publishedArchive(status: status, planned: planned), progress: progress)
        let repaired: Int
        clock.begin(.treeCheck)
        let asRecorded: Bool
        let delta: TreeIndexDelta?
        do { (asRecorded, delta) = try await early } catch { throw SyncError.wrap(error) }
        var index = IndexUpdate.drop
        let check: Stager.TreeCheck
        let incremental = asRecorded && staged.baseVerified && delta != nil
        if incremental, let delta {
            check = .matches(repaired: 0, tree: nil)
            index = .delta(delta, shape: planned.newShape)
        } else {
            check = try await stager.checkTree(status.integrity, layout: layout)
        }
        switch check {
        case .matches(let count, let tree):
            repaired = count
            if count == 0, let delta {
                // The staged tree gives the published digest, and so do the recorded index and
                // the plan's changes: they are one tree, so the index takes the changes alone
                // (a replay without a twin, which reads its whole staged tree, writes O(changes)
                // rows, not the tree's).
                index = .delta(delta, shape: planned.newShape)
            } else if let tree {
                index = .whole(tree)
            } else if status.integrity?.treeDigest == nil {
                index = .shape(planned.newShape)
            }
        case .unrepairable(let reason):
            // A decision, not a failure: the tree check says why in a value, and the archive is
            // the way to the version (no error is thrown, so none is recognized by its text).
            logger.debug("the replayed tree cannot be repaired; restoring from the archive")
            var report = try await restore(
                from: local, status: status, reason: "replayed tree did not match the tree digest", clock: clock,
                progress: progress)
            report.warnings.insert(
                "the replayed tree did not match the published tree digest and could not be repaired file by file "
                    + "(after replaying to \(plan.to): \(reason)); restored from the archive", at: 0)
            return report
        }
        var report = SyncReport(
            outcome: .replayed, fromVersion: plan.from, toVersion: plan.to, bytesDownloaded: staged.bytes,
            filesDownloaded: staged.downloaded, filesReused: planned.filesReused,
            filesAlreadyDownloaded: staged.alreadyDownloaded, warnings: plan.warnings)
        report.repairedFiles = repaired
        report.changeListsApplied = planned.listsApplied
        report.checkedIncrementally = incremental
        report.plannedFromIndex = planned.fromIndex
        if repaired > 0 {
            report.warnings.append("repaired \(repaired) path(s) that did not match the published tree digest")
        }
        var pending = switcher.pending(.replay, from: plan.from, to: plan.to)
        pending.bytesDownloaded = staged.bytes
        pending.filesDownloaded = staged.downloaded
        self.staged.record(bytes: staged.bytes, files: staged.downloaded)
        pending.filesReused = planned.filesReused
        pending.changeListsApplied = planned.listsApplied
        clock.begin(.switch)
        // The previous version becomes the twin with the plan's changed paths as its dirty set,
        // which holds only if the staged tree is the plan exactly: nothing repaired, and for a
        // caught-up twin, the content folder as recorded (a change by hand would be in the twin's
        // clean paths but not in the folder the plan was made from).
        let exact = repaired == 0 && (staged.twinPaths == nil || asRecorded)
        try await switcher.switchTo(
            pending,
            history: UpdateHistoryEntry(
                startedAt: started, finishedAt: Date(), fromVersion: plan.from.text, toVersion: plan.to.text,
                kind: .replay,
                outcome: .succeeded, bytesDownloaded: staged.bytes, filesDownloaded: staged.downloaded),
            twinChanges: exact ? planned.changed : nil, twinFolders: planned.localFolders, index: index,
            liveFolders: planned.newFolders,
            // Folders verified during this update and not touched since: no stat at the switch.
            // The caught-up tree's only when nothing was repaired in it (an incremental check).
            knownTwinTimes: planned.localTimes, knownLiveTimes: incremental ? staged.untouchedFolderTimes : [:],
            fullCheck: !planned.fromIndex, treeReadWhole: !incremental,
            // What a small catch-up wrote is all that needs flushing, unless the check repaired
            // files (a whole check, or repairs, wrote elsewhere too).
            flushing: incremental ? staged.written : nil, progress: progress)
        return report
    }

    /// Whether the tree index records the current version with the shape the planner scanned.
    private func indexMatches(_ planned: ReplayPlanner.Planned) async throws(SyncError) -> Bool {
        guard let recorded = try await store.treeIndex() else { return false }
        return recorded.version == planned.plan.from.text && recorded.shape == planned.localShape.text
    }

    /// Whether the stored fingerprints are mostly the current version's: an incremental check
    /// adds rows and removes none, so once gone files' rows outnumber the tree's files, a whole
    /// check rewrites them.
    private func fingerprintsAreLean(_ planned: ReplayPlanner.Planned) async throws(SyncError) -> Bool {
        try await store.fingerprintCount() <= 2 * planned.localShape.files + 1_000
    }

    /// Whether the content folder is as the last switch recorded it, and the tree check of a
    /// caught-up twin from the tree index alone: the recorded tree of the current version plus
    /// the plan's changes, hashed again only along the changed paths, must give the published
    /// tree digest.
    ///
    /// As recorded: the same shape, and (where a tree digest makes fingerprints be recorded)
    /// every file's identity known. Without a digest no fingerprints are recorded, so a file
    /// replaced by hand is not seen: the shape alone counts.
    ///
    /// The delta is nil (check the whole staged tree instead) unless every premise the plan and
    /// the database can tell holds: the content folder is as recorded, and the stored
    /// fingerprints are mostly the tree's. The caller adds the stage's: what `next/` was built
    /// from was found as recorded (``Stager/Staged/baseVerified``): the twin's folders, or the
    /// content's that a whole build linked from.
    private func indexCheck(
        _ planned: ReplayPlanner.Planned, integrity: StorageIntegrity?
    ) async throws(SyncError) -> (asRecorded: Bool, delta: TreeIndexDelta?) {
        var asRecorded = planned.drifted == 0 || integrity?.treeDigest == nil
        if asRecorded { asRecorded = try await indexMatches(planned) }
        guard asRecorded, let changed = planned.changed, let expected = integrity?.treeDigest,
            try await fingerprintsAreLean(planned)
        else {
            logger.debug(
                "the tree index cannot check this replay; checking the whole tree",
                metadata: [
                    "sync.drifted": "\(planned.drifted)", "sync.asRecorded": "\(asRecorded)",
                    "sync.changedKnown": "\(planned.changed != nil)",
                ])
            return (asRecorded, nil)
        }
        guard let delta = try await store.indexDelta(planned.plan, changed: changed, listed: planned.listings),
            delta.rootDigest == expected
        else {
            logger.debug("the tree index and the plan do not give the published tree digest; checking the whole tree")
            return (asRecorded, nil)
        }
        return (asRecorded, delta)
    }

    /// Restores the whole content from the storage's archive, checks it and switches.
    private func restore(
        from local: CacheVersion?, status: CacheStatus, reason: String, clock: PhaseClock,
        progress: @escaping @Sendable (SyncProgress) -> Void
    ) async throws(SyncError) -> SyncReport {
        let started = Date()
        clock.begin(.archive)
        let restored = try await restorer.restore(from: local, status: status, reason: reason, progress: progress)
        let layout = try formatWork { () throws(StorageFormatError) in try StorageLayout(baseURL: configuration.baseURL)
        }
        var repaired = 0
        var index = IndexUpdate.drop
        var seededTwin: [SafeRelativePath: Int64]?
        clock.begin(.treeCheck)
        // Streamed first: a restore's tree is read once, holding no per-file state. The full
        // check follows only when the streamed one finds the tree differs: it says where, and
        // repairs. The same walk links the twin the next replay catches up (``TwinSeed``), so
        // that the first replay after a restore costs what changed, as every later one does.
        if let expected = status.integrity?.treeDigest,
            let streamed = try await stager.streamTreeCheck(expectedDigest: expected, seedingTwin: true)
        {
            index = .staged(streamed.shape)
            seededTwin = streamed.seededTwin
        } else {
            if status.integrity?.treeDigest != nil {
                logger.debug("the restored tree differs from the published tree digest; checking it path by path")
            }
            switch try await stager.checkTree(status.integrity, layout: layout) {
            case .matches(let count, let tree):
                repaired = count
                if let tree { index = .whole(tree) }
            case .unrepairable(let reason):
                throw SyncError(
                    code: .integrity,
                    message:
                        "the archive's content does not match the published tree digest and could not be repaired (\(reason)); "
                        + "the storage is inconsistent: republish it")
            }
        }
        var report = SyncReport(
            outcome: .restored, fromVersion: local, toVersion: status.actualVersion,
            bytesDownloaded: restored.bytes, filesDownloaded: restored.files)
        report.repairedFiles = repaired
        if repaired > 0 {
            report.warnings.append("repaired \(repaired) path(s) of a stale archive from the content manifest")
        }
        var pending = switcher.pending(.restore, from: local, to: status.actualVersion)
        pending.bytesDownloaded = restored.bytes
        pending.filesDownloaded = restored.files
        staged.record(bytes: restored.bytes, files: restored.files)
        clock.begin(.switch)
        try await switcher.switchTo(
            pending,
            history: UpdateHistoryEntry(
                startedAt: started, finishedAt: Date(), fromVersion: local?.text, toVersion: status.actualVersion.text,
                kind: .restore,
                outcome: .succeeded, bytesDownloaded: restored.bytes, filesDownloaded: restored.files),
            index: index, liveFolders: index.folders, fullCheck: true, seededTwin: seededTwin, progress: progress)
        return report
    }
}

/// Why an update's task was cancelled, set by whoever cancels it before doing so.
final class StopReason: Sendable {
    private let value = Mutex<SyncError?>(nil)

    /// The reason, once set.
    var reason: SyncError? { value.withLock { $0 } }

    /// Records `error` as the reason (the first one set wins).
    func set(_ error: SyncError) {
        value.withLock { if $0 == nil { $0 = error } }
    }
}

/// What an update downloaded by the time its staging finished (``SyncEngine/staged``).
final class StagedDownloads: Sendable {
    private let value = Mutex<(bytes: Int64, files: Int)>((0, 0))

    /// The bytes and files downloaded; zero before staging finished.
    var current: (bytes: Int64, files: Int) { value.withLock { $0 } }

    func record(bytes: Int64, files: Int) { value.withLock { $0 = (bytes, files) } }
}
