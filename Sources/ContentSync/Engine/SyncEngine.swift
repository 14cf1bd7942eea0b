import Archive
import FileKit
import StorageFormat
import Foundation
import Logging
import Transport

/// Runs one update: fetch the status, plan, stage the next version beside the current one,
/// switch atomically.
///
/// The engine holds no long-lived state of its own: everything that must survive a crash is in
/// the ``StateStore`` or the staging area, so a new engine (or a new process) picks up exactly
/// where an interrupted one stopped.
final class SyncEngine: Sendable {
    let configuration: SyncConfiguration
    let store: StateStore
    let transport: any Transport
    let staging: StagingArea
    /// Fingerprints of files already hashed, so the tree check reads only new or changed files.
    let fingerprints = FingerprintCache()
    var logger: Logger { configuration.logger }

    init(configuration: SyncConfiguration, store: StateStore, transport: any Transport) {
        self.configuration = configuration
        self.store = store
        self.transport = transport
        self.staging = StagingArea(contentDirectory: configuration.contentDirectory)
    }

    /// Brings the content folder to the storage's actual version, or throws with the folder
    /// left exactly at its last good version.
    func update(progress: @escaping @Sendable (SyncProgress) -> Void) async throws(SyncError) -> SyncReport {
        let started = Date()
        var fromVersion: String?
        var toVersion: String?
        var kind: UpdateHistoryEntry.Kind = .check
        let lock = try UpdateLock(statePath: store.path, contentDirectory: configuration.contentDirectory, stagingRoot: staging.root)
        defer { withExtendedLifetime(lock) {} }
        do {
            try await recoverInterruptedSwitch()
            let context = try await checkLocalContent()
            fromVersion = context.local?.text
            progress(SyncProgress(phase: .checking, currentItem: StorageLayout.statusPath))
            var layout = try formatWork { () throws(StorageFormatError) in try StorageLayout(baseURL: configuration.baseURL) }
            let status = try await fetchStatus(layout: &layout)
            toVersion = status.actualVersion.text
            let report: SyncReport
            if let local = context.local, local == status.actualVersion {
                // Leftovers of an abandoned plan, or of a run killed while it deleted the old
                // version after its switch, go now.
                if try await store.pendingPlan() != nil { try await store.clearPlan() }
                if staging.hasContents {
                    try await BlockingWork.files { [staging] () throws(FileSystemError) in try staging.clear() }
                }
                try await store.recordAttempt(UpdateHistoryRecord(
                    startedAt: started, finishedAt: Date(), fromVersion: local.text, toVersion: local.text, kind: .check,
                    outcome: .upToDate, error: nil, bytesDownloaded: 0, filesDownloaded: 0), contentDirectory: configuration.contentDirectory)
                return SyncReport(outcome: .upToDate, fromVersion: local, toVersion: local)
            } else if let local = context.local, local > status.actualVersion {
                throw SyncError(code: .invalidStatus,
                                message: "\(layout.statusURL.absoluteString) publishes version \(status.actualVersion), below the local \(local); "
                                    + "refusing to roll back. If the storage really went back, reset the state and sync again")
            } else if let local = context.local, local >= status.minimalVersion {
                kind = .replay
                report = try await replay(from: local, status: status, layout: layout, progress: progress)
            } else {
                kind = .restore
                report = try await restore(from: context.local, status: status, reason: context.local == nil
                    ? "no local version" : "local version below minimalCacheVersion \(status.minimalVersion)", progress: progress)
            }
            kind = report.outcome == .restored ? .restore : .replay
            logger.debug("update finished", metadata: [
                "sync.outcome": "\(report.outcome.rawValue)", "sync.to": "\(report.toVersion)",
                "sync.bytes": "\(report.bytesDownloaded)", "sync.files": "\(report.filesDownloaded)",
            ])
            return report
        } catch {
            let failure = SyncError.wrap(error)
            let cancelled = failure.code == .cancelled || failure.code == .connectionNotAllowed
            // Recorded even though the task may be cancelled: the state, last error and failure count follow.
            try? await store.recordAttempt(UpdateHistoryRecord(
                startedAt: started, finishedAt: Date(), fromVersion: fromVersion, toVersion: toVersion, kind: kind,
                outcome: cancelled ? .cancelled : .failed, error: failure.message, errorCode: failure.code.description,
                bytesDownloaded: 0, filesDownloaded: 0), contentDirectory: configuration.contentDirectory)
            throw failure
        }
    }

    // MARK: - Local content

    struct LocalContext {
        var local: CacheVersion?
    }

    /// Reads the local version and checks that the content folder matches it.
    private func checkLocalContent() async throws(SyncError) -> LocalContext {
        let directory = configuration.contentDirectory
        let state = try await store.syncState()
        if let state, state.contentDirectory != directory {
            throw SyncError(code: .configuration,
                            message: "state database \(store.path) belongs to \(state.contentDirectory), not \(directory); give each content folder its own state file")
        }
        var local = state?.localVersion.flatMap { try? CacheVersion($0) }
        var info = stat()
        let exists = lstat(directory, &info) == 0
        if exists && info.st_mode & S_IFMT != S_IFDIR {
            throw SyncError(code: .configuration, message: "\(directory) exists and is not a folder; pass a folder path")
        }
        let parent = (directory as NSString).deletingLastPathComponent
        var parentInfo = stat()
        guard lstat(parent, &parentInfo) == 0, parentInfo.st_mode & S_IFMT == S_IFDIR else {
            throw SyncError(code: .configuration, message: "the parent folder \(parent) of \(directory) does not exist; create it first")
        }
        if local != nil && !exists {
            logger.warning("content folder is missing; restoring it", metadata: ["sync.dir": "\(directory)"])
            local = nil
        }
        if local == nil && exists && !configuration.allowReplacingUnknownContent {
            let empty = (try? FileManager.default.contentsOfDirectory(atPath: directory).isEmpty) ?? false
            if !empty {
                throw SyncError(code: .configuration,
                                message: "\(directory) is not empty and no state records a synced version there; "
                                    + "pass an empty or new folder, or allow replacing its contents (sync-agent sync --force)")
            }
        }
        return LocalContext(local: local)
    }

    // MARK: - Switching versions

    /// Makes the staged tree current and records the new version in one transaction.
    func switchVersion(to version: CacheVersion, history: UpdateHistoryRecord,
                       progress: @Sendable (SyncProgress) -> Void) async throws(SyncError) {
        progress(SyncProgress(phase: .switching, currentItem: version.text))
        guard let identity = FileSystem.identity(of: staging.next) else {
            throw SyncError(code: .fileSystem, message: "the staged version at \(staging.next) vanished before the switch; run the update again")
        }
        try await store.markSwitching(device: identity.device, inode: identity.inode)
        try await BlockingWork.files { [staging] () throws(FileSystemError) in try staging.swapIn() }
        // The previous version goes while the state is written: the swap is done, and a crash
        // before the state lands is finished by recoverInterruptedSwitch from the inode alone.
        async let cleared: Void? = try? BlockingWork.files { [staging] () throws(FileSystemError) in try staging.clear() }
        let checked = fingerprints.used.map { FileFingerprintRecord($0.key, $0.value) }
        do {
            try await store.finishPlan(contentDirectory: configuration.contentDirectory, newVersion: version.text, history: history,
                                       fingerprints: checked)
        } catch {
            _ = await cleared
            throw error
        }
        _ = await cleared
    }

    /// Finishes a switch a crash interrupted. The content folder's inode tells whether the swap
    /// itself happened: if it is the staged tree's, only the bookkeeping is missing.
    func recoverInterruptedSwitch() async throws(SyncError) {
        guard let pending = try await store.pendingPlan(), pending.phase == .switching,
              let device = pending.stagedDevice, let inode = pending.stagedInode else { return }
        let history = UpdateHistoryRecord(startedAt: pending.createdAt, finishedAt: Date(), fromVersion: pending.fromVersion,
                                          toVersion: pending.toVersion, kind: UpdateHistoryEntry.Kind(rawValue: pending.kind) ?? .replay, outcome: .succeeded,
                                          error: "switch completed after a restart", bytesDownloaded: 0, filesDownloaded: 0)
        if let current = FileSystem.identity(of: configuration.contentDirectory), current == (device, inode) {
            logger.info("finishing a version switch interrupted by a restart", metadata: ["sync.to": "\(pending.toVersion)"])
        } else if let staged = FileSystem.identity(of: staging.next), staged == (device, inode) {
            logger.info("redoing a version switch interrupted by a restart", metadata: ["sync.to": "\(pending.toVersion)"])
            try await BlockingWork.files { [staging] () throws(FileSystemError) in try staging.swapIn() }
        } else {
            try await store.clearPlan()
            return
        }
        try await store.finishPlan(contentDirectory: configuration.contentDirectory, newVersion: pending.toVersion, history: history)
        try? await BlockingWork.files { [staging] () throws(FileSystemError) in try staging.clear() }
    }

    /// Fails with ``SyncError/Code/connectionNotAllowed`` when the policy forbids transfers.
    func checkConnectionPolicy() async throws(SyncError) {
        if !(await configuration.connectionPolicy.allowsTransfers()) {
            throw SyncError(code: .connectionNotAllowed,
                            message: "the connection policy does not allow transfers now; resume when it does, or override it")
        }
    }
}

extension SyncError {
    /// Any error as a ``SyncError``: transport failures keep their message and cause.
    static func wrap(_ error: any Error, context: String? = nil) -> SyncError {
        if let error = error as? SyncError { return error }
        if let error = error as? StorageFormatError { return SyncError(error) }
        if let error = error as? FileSystemError { return SyncError(error) }
        let prefix = context.map { "\($0): " } ?? ""
        if let error = error as? TransportError {
            switch error.code {
            case .cancelled:
                return SyncError(code: .cancelled, message: "the update was cancelled; run it again to continue where it stopped", underlying: error)
            case .fileSystem:
                return SyncError(code: error.errno == ENOSPC ? .insufficientSpace : .fileSystem, message: prefix + error.message, underlying: error)
            case .tooLarge:
                // A file over its declared size, or a document over the in-memory cap: the
                // storage's contents are at fault, not the network.
                return SyncError(code: .integrity, message: prefix + error.message, underlying: error)
            case .invalidResponse:
                // The hosting (or a proxy in front of it) answered something other than what was
                // asked; the storage's documents may be fine. The transport's message says what.
                return SyncError(code: .network, message: prefix + error.message, underlying: error)
            default:
                return SyncError(code: .network, message: prefix + error.message, underlying: error)
            }
        }
        if let error = error as? ArchiveError {
            if error.code == .cancelled {
                return SyncError(code: .cancelled, message: "the update was cancelled; run it again to continue where it stopped", underlying: error)
            }
            let code: SyncError.Code = error.errno == ENOSPC ? .insufficientSpace : (error.code == .unsafeEntryName ? .unsafePath : .archive)
            return SyncError(code: code, message: prefix + error.message, underlying: error)
        }
        if error is CancellationError {
            return SyncError(code: .cancelled, message: "the update was cancelled; run it again to continue where it stopped", underlying: error)
        }
        return SyncError(code: .fileSystem, message: prefix + "\(error)", underlying: error)
    }
}
