import FileKit
import Foundation
import Logging
import StorageFormat

/// The version switch: makes the staged tree the content folder in one step and records the
/// new version in the same transaction, and finishes a switch a crash interrupted.
struct VersionSwitch: Sendable {
    let contentDirectory: String
    let store: StateStore
    let staging: StagingArea
    /// The fingerprints the staged tree check used, persisted with the new version.
    let fingerprints: FingerprintCache
    let logger: Logger

    /// Asked before every switch; throwing vetoes it (``SyncConfiguration/beforeSwitch``).
    let beforeSwitch: (@Sendable (PendingSwitch) async throws -> Void)?

    /// A switch of the staged tree to `version`, for ``switchTo(_:history:progress:)``; the caller
    /// adds the counts it knows.
    func pending(_ kind: PendingSwitch.Kind, from: CacheVersion?, to version: CacheVersion) -> PendingSwitch {
        PendingSwitch(
            kind: kind, fromVersion: from, toVersion: version, contentDirectory: contentDirectory,
            stagedDirectory: staging.shown(staging.next))
    }

    /// Asks ``beforeSwitch``, then makes the staged tree current and records the new version in
    /// one transaction.
    ///
    /// With `twinChanges` (where the new version differs from the current one), the previous
    /// version stays in `retired/` as the twin the next replay catches up, recorded in the same
    /// transaction; without, it is deleted.
    ///
    /// A veto comes before anything is marked or swapped, so the folder and its recorded version
    /// stay as they were. The staged tree and the pending plan are kept, as after an
    /// interruption: the next update of the same version resumes them (without downloading again),
    /// checks the tree again and asks again; an update to another version starts afresh.
    ///
    /// `twinFolders` are the previous version's folders, whose `ctime`s are recorded with the twin;
    /// `index` is what the tree check learnt of the new version's tree. After a check that read
    /// only the changed files (an `index` delta, unless `treeReadWhole`: a whole check that found
    /// the recorded tree plus the changes) the stored fingerprints of the others stay.
    /// `liveFolders` are the new version's folders: their `ctime`s, read right after the swap,
    /// let the next replay plan from the index (recorded only with an index that has entries).
    /// `knownTwinTimes` and `knownLiveTimes`: folders' `ctime`s verified during this update and
    /// left alone since, recorded without a `stat` (``Stager/folderTimes(_:in:known:)``).
    /// `fullCheck`: this update listed and checked the whole tree (``SyncConfiguration/fullCheckInterval``).
    /// `flushing`: what staging wrote, flushed one by one instead of the whole filesystem
    /// (``StagingArea/swapIn(flushing:)``).
    /// `seededTwin`: a restore's twin in `seed/` (``TwinSeed``), by its folders' `ctime`s; it
    /// becomes `retired/` after the swap, the twin of the new version with nothing dirty. It is
    /// recorded only in the final transaction: a switch a crash interrupts keeps no twin.
    func switchTo(
        _ pending: PendingSwitch, history: UpdateHistoryEntry, twinChanges: [SafeRelativePath]? = nil,
        twinFolders: [SafeRelativePath] = [], index: IndexUpdate = .drop, liveFolders: [SafeRelativePath]? = nil,
        knownTwinTimes: [SafeRelativePath: Int64] = [:], knownLiveTimes: [SafeRelativePath: Int64] = [:],
        fullCheck: Bool = false, treeReadWhole: Bool = false, flushing: [String]? = nil,
        seededTwin: [SafeRelativePath: Int64]? = nil,
        progress: @Sendable (SyncProgress) -> Void
    ) async throws(SyncError) {
        let version = pending.toVersion
        progress(SyncProgress(phase: .switching, currentItem: version.text))
        if let beforeSwitch {
            do {
                try await beforeSwitch(pending)
            } catch {
                throw Self.veto(error, pending: pending)
            }
        }
        guard let identity = FileSystem.identity(of: staging.next) else {
            throw SyncError(
                code: .fileSystem,
                message: "the staged version at \(staging.next) vanished before the switch; run the update again")
        }
        try await store.markSwitching(device: identity.device, inode: identity.inode, keepsTwin: twinChanges != nil)
        try await BlockingWork.files { [staging] () throws(FileSystemError) in try staging.swapIn(flushing: flushing) }
        var (twinChanges, twinFolders, knownTwinTimes) = (twinChanges, twinFolders, knownTwinTimes)
        var twin = twinChanges == nil ? nil : FileSystem.identity(of: staging.retired)
        if let seededTwin, twinChanges == nil {
            // Best effort: a seed that cannot take `retired/` is cleared with the leftovers.
            let adopted = try? await BlockingWork.files { [staging] () throws(FileSystemError) in
                try staging.adoptSeed()
            }
            if let adopted = adopted ?? nil {
                twin = adopted
                (twinChanges, twinFolders, knownTwinTimes) = ([], Array(seededTwin.keys), seededTwin)
            }
        }
        let folderTimes =
            twin == nil
            ? nil
            : try await BlockingWork.run { [staging, twinFolders, knownTwinTimes] in
                Stager.folderTimes(twinFolders, in: staging.retired, known: knownTwinTimes)
            }
        let incremental: Bool
        if case .delta = index { incremental = !treeReadWhole } else { incremental = false }
        let liveTimes: [SafeRelativePath: Int64]?
        if let liveFolders, index.hasEntries {
            liveTimes = try await BlockingWork.run { [contentDirectory] in
                Stager.folderTimes(liveFolders, in: contentDirectory, known: knownLiveTimes)
            }
        } else {
            liveTimes = nil
        }
        // The leftovers (the previous version too, when it is not kept) go while the state is
        // written: the swap is done, and a crash before the state lands is finished by
        // recoverInterrupted from the inode alone.
        async let cleared: Void? = try? BlockingWork.files { [staging, twin] () throws(FileSystemError) in
            try staging.clearLeftovers(keeping: twin)
        }
        let checked = fingerprints.used.map { FileFingerprintRecord($0.key, $0.value) }
        do {
            try await store.finishPlan(
                contentDirectory: contentDirectory, newVersion: version.text, history: history,
                fingerprints: checked, replacingFingerprints: !incremental, twin: twin, twinChanges: twinChanges,
                twinFolders: folderTimes, index: index, liveFolders: liveTimes, fullCheckAt: fullCheck ? Date() : nil)
        } catch {
            _ = await cleared
            throw error
        }
        _ = await cleared
    }

    /// The update's failure when ``beforeSwitch`` threw `error`: a cancelled wait is a
    /// cancellation, anything else a veto naming the version and the reason.
    static func veto(_ error: any Error, pending: PendingSwitch) -> SyncError {
        if error is CancellationError || Task.isCancelled {
            return SyncError(
                code: .cancelled,
                message: "the update was cancelled while the switch to \(pending.toVersion) waited for approval; "
                    + "run it again to continue where it stopped", underlying: error)
        }
        let reason = (error as? SyncError)?.message ?? "\(error)"
        let kept =
            pending.fromVersion.map { "\(pending.contentDirectory) stays at \($0)" }
            ?? "\(pending.contentDirectory) is left as it was"
        return SyncError(
            code: .vetoed,
            message:
                "the switch to version \(pending.toVersion) was vetoed: \(reason); \(kept), and the next update asks again",
            underlying: error)
    }

    /// Finishes a switch a crash interrupted. The content folder's inode tells whether the swap
    /// itself happened: if it is the staged tree's, only the bookkeeping is missing.
    @discardableResult
    func recoverInterrupted() async throws(SyncError) -> String? {
        guard let pending = try await store.pendingPlan(), pending.phase == .switching,
            let device = pending.stagedDevice, let inode = pending.stagedInode
        else { return nil }
        let history = UpdateHistoryEntry(
            startedAt: pending.createdAt, finishedAt: Date(), fromVersion: pending.fromVersion,
            toVersion: pending.toVersion, kind: UpdateHistoryEntry.Kind(rawValue: pending.kind) ?? .replay,
            outcome: .succeeded, message: "switch completed after a restart")
        if let current = FileSystem.identity(of: contentDirectory), current == (device, inode) {
            logger.debug(
                "finishing a version switch interrupted by a restart", metadata: ["sync.to": "\(pending.toVersion)"])
            // Killed between the exchange and retiring the previous version: it is in `next/`.
            if pending.keepsTwin, !FileSystem.exists(staging.retired), FileSystem.exists(staging.next) {
                try fileWork { [staging] () throws(FileSystemError) in
                    try FileSystem.rename(
                        staging.next, to: staging.retired, operation: "cannot retire the previous version to")
                }
            }
        } else if let staged = FileSystem.identity(of: staging.next), staged == (device, inode) {
            logger.debug(
                "redoing a version switch interrupted by a restart", metadata: ["sync.to": "\(pending.toVersion)"])
            try await BlockingWork.files { [staging] () throws(FileSystemError) in try staging.swapIn() }
        } else {
            try await store.clearPlan()
            return nil
        }
        // The previous version stays as the twin if the plan said so; its dirty set already
        // covers the new version's changes (they were added before staging).
        let twin = pending.keepsTwin ? FileSystem.identity(of: staging.retired) : nil
        try await store.finishPlan(
            contentDirectory: contentDirectory, newVersion: pending.toVersion, history: history, twin: twin)
        try? await BlockingWork.files { [staging] () throws(FileSystemError) in
            try staging.clearLeftovers(keeping: twin)
        }
        return "finished the switch to \(pending.toVersion) that a restart interrupted"
    }
}
