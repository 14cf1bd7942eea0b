import Archive
import FileKit
import StorageFormat
import Foundation
import Synchronization
import Transport

extension SyncEngine {
    /// The start of the message when a staged tree cannot be made to match the tree digest.
    static let unrepairableTree = "the staged version does not match the published tree digest and could not be repaired"

    /// Replays the change lists from `local` to the storage's actual version as one net plan.
    /// Falls back to a restore when the published lists do not form a chain.
    func replay(from local: CacheVersion, status: CacheStatus, layout: StorageLayout,
                progress: @escaping @Sendable (SyncProgress) -> Void) async throws(SyncError) -> SyncReport {
        progress(SyncProgress(phase: .planning, currentItem: StorageLayout.updateListPath))
        // The local tree is read while the lists are fetched and parsed: neither needs the other.
        let directory = configuration.contentDirectory
        async let scanned = BlockingWork.files { () throws(FileSystemError) in try LocalTree.scan(directory) }
        let listData = try await fetchStorageFile(status.updateListURL, expected: status.integrity?.updateList)
        let updateList = try formatWork { () throws(StorageFormatError) in try UpdateList.parse(listData, from: status.updateListURL, layout: layout) }
        let candidates = UpdateChain.candidates(updateList, local: local, actual: status.actualVersion)
        if !configuration.trustedSigningKeys.isEmpty {
            // Mix-and-match: every file fetched must be tied to the signed status by its hash.
            if status.integrity?.updateList == nil {
                throw SyncError(code: .integrity, message: "the signed status does not cover the update list's hash; refusing it")
            }
            for entry in candidates where status.integrity?.changeLists[entry.url] == nil {
                throw SyncError(code: .integrity,
                                message: "\(entry.url.lastPathComponent) is not covered by the signed status's integrity data; refusing it")
            }
        }
        // Lists the client has moved past are never fetched again: forget their stored copies.
        let wanted = Set(candidates.map(\.url))
        try await store.deleteCachedResources(Array(Set(updateList.entries.map(\.url)).subtracting(wanted)))
        guard let chain = try await fetchChain(candidates, from: local, to: status.actualVersion, layout: layout,
                                               integrity: status.integrity).map(PendingLists.init) else {
            _ = try? await scanned   // finished before the restore replaces the folder it reads
            logger.warning("no chain of change lists leads to the actual version; restoring from the archive", metadata: [
                "sync.from": "\(local)", "sync.to": "\(status.actualVersion)",
            ])
            var report = try await restore(from: local, status: status, reason: "no change-list chain from \(local)", progress: progress)
            report.warnings.insert("no chain of change lists leads from \(local) to \(status.actualVersion); restored from the archive", at: 0)
            return report
        }
        let applied = chain.count
        let plan: SyncPlan
        do {
            // Scoped, so the scanned tree is not kept while the plan is executed. Planning a
            // long list is seconds of CPU: it runs off the cooperative pool.
            let tree: LocalTree
            do { tree = try await scanned } catch { throw SyncError.wrap(error) }
            let from = local, to = status.actualVersion, fingerprints = status.integrity != nil
            plan = try await BlockingWork.run { () throws(SyncError) in
                var readers = chain.take()
                return try NetPlanner.plan(local: tree, from: from, to: to, readers: &readers, fingerprints: fingerprints)
            }
        }
        for warning in plan.warnings { logger.warning("\(warning)") }
        do {
            var report = try await execute(plan, layout: layout, integrity: status.integrity, progress: progress)
            report.changeListsApplied = applied
            return report
        } catch where error.code == .integrity && error.message.hasPrefix(Self.unrepairableTree) {
            logger.warning("the replayed tree cannot be repaired; restoring from the archive")
            var report = try await restore(from: local, status: status, reason: "replayed tree did not match the tree digest", progress: progress)
            report.warnings.insert("the replayed tree did not match the published tree digest and could not be repaired file by file; restored from the archive", at: 0)
            return report
        }
    }

    /// Builds the plan's tree in the staging area and switches to it.
    func execute(_ plan: SyncPlan, layout: StorageLayout, integrity: StorageIntegrity?,
                 progress: @escaping @Sendable (SyncProgress) -> Void) async throws(SyncError) -> SyncReport {
        let started = Date()
        let identity = plan.identity
        let pending = try await store.pendingPlan()
        let resuming = pending?.identity == identity && pending?.phase == .staging
        let staging = self.staging
        let directory = configuration.contentDirectory
        try await BlockingWork.files { () throws(FileSystemError) in
            if resuming {
                try staging.prepare()
                try FileSystem.makeFolder(staging.next)
            } else {
                try staging.resetNext(includingDownloads: true)
            }
            for folder in plan.folders {
                try FileSystem.makeFolder(folder.absolute(in: staging.next))
            }
        }
        let unnamedFiles = try await BlockingWork.run { DownloadDestination.namingWorks(in: staging.root) }
        // The unchanged files are linked while the downloads run: neither waits for the other
        // (their paths are disjoint, and a link that exists already is kept on a resumed run).
        async let linked: Void = BlockingWork.files { () throws(FileSystemError) in
            for reuse in plan.reused {
                try FileSystem.linkOrCopy(reuse.source.absolute(in: directory), reuse.target.absolute(in: staging.next))
            }
        }
        let fetched: DownloadTally
        let todo: [SafeRelativePath]
        do {
            try await store.beginPlan(PendingPlanRecord(identity: identity, kind: "replay", fromVersion: plan.from.text,
                                                        toVersion: plan.to.text, phase: .staging, createdAt: Date()))
            todo = try await BlockingWork.run { () -> [SafeRelativePath] in
                plan.downloads.filter { !FileSystem.exists($0.absolute(in: staging.next)) }
            }
            fetched = try await downloadFiles(todo, plan: plan, layout: layout, unnamedFiles: unnamedFiles, progress: progress)
        } catch {
            try? await linked
            throw SyncError.wrap(error)
        }
        do { try await linked } catch { throw SyncError.wrap(error) }
        guard let repaired = try await verifyStagedTree(integrity, layout: layout) else {
            throw SyncError(code: .integrity, message: Self.unrepairableTree + " after replaying to \(plan.to)")
        }
        var report = SyncReport(outcome: .replayed, fromVersion: plan.from, toVersion: plan.to, bytesDownloaded: fetched.bytes,
                                filesDownloaded: todo.count, filesReused: plan.reused.count,
                                filesAlreadyDownloaded: plan.downloads.count - todo.count, warnings: plan.warnings)
        report.repairedFiles = repaired
        if repaired > 0 { report.warnings.append("repaired \(repaired) path(s) that did not match the published tree digest") }
        try await switchVersion(to: plan.to, history: UpdateHistoryRecord(
            startedAt: started, finishedAt: Date(), fromVersion: plan.from.text, toVersion: plan.to.text, kind: .replay,
            outcome: .succeeded, error: nil, bytesDownloaded: fetched.bytes, filesDownloaded: Int64(todo.count)),
            progress: progress)
        return report
    }

    private struct DownloadTally: Sendable {
        var bytes: Int64 = 0
        var files = 0
        var unrecorded: [CompletedDownloadRecord] = []
    }

    /// Fetches `paths` into `next/`, a bounded number at a time. Each file lands in `partial/`
    /// and is renamed into place only when complete, so a file present in `next/` is a finished
    /// download; completions are also recorded in batches for the history.
    private func downloadFiles(_ paths: [SafeRelativePath], plan: SyncPlan, layout: StorageLayout, unnamedFiles: Bool,
                               progress: @escaping @Sendable (SyncProgress) -> Void) async throws(SyncError) -> DownloadTally {
        guard !paths.isEmpty else { return DownloadTally() }
        try await checkConnectionPolicy()
        let identity = plan.identity
        let total = paths.count
        var tally = DownloadTally()
        do {
            try await withThrowingTaskGroup(of: (SafeRelativePath, Int64).self) { group in
                var iterator = paths.makeIterator()
                func launch(_ group: inout ThrowingTaskGroup<(SafeRelativePath, Int64), any Error>) {
                    guard let path = iterator.next() else { return }
                    group.addTask {
                        (path, try await self.downloadFile(path, layout: layout, expected: plan.expectedFingerprints, unnamedFiles: unnamedFiles))
                    }
                }
                for _ in 0..<max(1, configuration.maxConcurrentDownloads) { launch(&group) }
                do {
                    while let (path, bytes) = try await group.next() {
                        tally.bytes += bytes
                        tally.files += 1
                        tally.unrecorded.append(CompletedDownloadRecord(planIdentity: identity, path: path.string, bytes: bytes))
                        if tally.unrecorded.count >= 64 {
                            try await store.recordCompletedDownloads(tally.unrecorded)
                            tally.unrecorded.removeAll()
                        }
                        progress(SyncProgress(phase: .downloadingFiles, bytesDone: tally.bytes, filesDone: tally.files,
                                              filesTotal: total, currentItem: path.string))
                        launch(&group)
                    }
                } catch {
                    group.cancelAll()
                    throw error
                }
            }
        } catch {
            try? await store.recordCompletedDownloads(tally.unrecorded)
            throw SyncError.wrap(error)
        }
        try await store.recordCompletedDownloads(tally.unrecorded)
        return tally
    }

    /// Downloads one file and puts it in `next/`. Returns the bytes received over the network.
    ///
    /// A file whose declared size is at most 1 MiB is written as an unnamed file in its own
    /// folder and linked there once verified. Anything else (larger, or of unknown size) goes
    /// to its partial name, where a restart resumes it, and is renamed into place.
    private func downloadFile(_ path: SafeRelativePath, layout: StorageLayout,
                              expected: [SafeRelativePath: FileFingerprint], unnamedFiles: Bool) async throws -> Int64 {
        try await checkConnectionPolicy()
        let target = path.absolute(in: staging.next)
        let url = layout.contentURL(for: path)
        if unnamedFiles, let size = expected[path]?.size, size <= Self.unnamedDownloadLimit,
           let unnamed = DownloadDestination.openUnnamed(in: path.parent.absolute(in: staging.next), for: target) {
            defer { unnamed.close() }
            let response = try await downloadVerified(url, into: unnamed, expected: expected[path], what: "'\(path)' for the update")
            try unnamed.link()
            return response.bytesReceived
        }
        let partial = staging.partialFile(for: path)
        let response = try await downloadVerified(url, to: partial, expected: expected[path], what: "'\(path)' for the update")
        try fileWork { () throws(FileSystemError) in try FileSystem.rename(partial, to: target, operation: "cannot move the downloaded '\(path)' into") }
        // Only bodies over 1 MiB leave an entity-tag sidecar (see resumableOptions).
        if response.fileSize > 1 << 20 { unlink(partial + ".etag") }
        return response.bytesReceived
    }

    /// The largest declared size downloaded as an unnamed file; the same 1 MiB above which a
    /// body is kept resumable across runs.
    static let unnamedDownloadLimit: Int64 = 1 << 20

    /// Download options that let a large download resume after a restart: the entity tag of a
    /// body over `resumableFrom` bytes is kept beside its partial file, and sent back as `If-Range`.
    ///
    /// A content-encoded body (gzip from S3, say) keeps no tag, and loses any older one: the file
    /// holds decoded bytes, and a range of the encoded representation cannot follow them.
    func resumableOptions(partialPath: String, maxBytes: Int64? = nil, resumableFrom: Int64 = 1 << 20,
                          progress: ProgressHandler? = nil) -> DownloadOptions {
        let sidecar = partialPath + ".etag"
        let etag = (try? String(contentsOfFile: sidecar, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        var options = DownloadOptions(resumeETag: etag?.isEmpty == false ? etag : nil, maxBytes: maxBytes, progress: progress)
        options.onResponseStart = { _, headers in
            let encoded = headers["content-encoding"].map { value in
                value.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces).lowercased() != "identity" }
            } ?? false
            guard !encoded else {
                unlink(sidecar)
                return
            }
            guard let etag = headers["etag"], let length = headers["content-length"].flatMap(Int64.init),
                  length > resumableFrom else { return }
            try? etag.write(toFile: sidecar, atomically: false, encoding: .utf8)
        }
        return options
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
