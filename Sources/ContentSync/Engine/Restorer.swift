import Archive
import FileKit
import Foundation
import Logging
import StorageFormat
import Transport

/// The restorer: builds the next version in the staging area from the storage's archive, for a
/// client with no version or one below the minimal version, or when no change-list chain leads
/// to the actual version.
struct Restorer: Sendable {
    let configuration: SyncConfiguration
    let store: StateStore
    let staging: StagingArea
    let downloader: VerifiedDownloader
    var logger: Logger { configuration.logger }

    /// What a restore fetched and extracted.
    struct Restored: Sendable {
        /// Bytes of the archive received over the network.
        var bytes: Int64
        /// Files extracted.
        var files: Int
    }

    /// Restores the whole content into `next/` from the storage's archive: check space, stream
    /// the archive to the staging area (resuming a partial one) and extract it beside the
    /// current content.
    func restore(
        from local: CacheVersion?, status: CacheStatus, reason: String,
        progress: @escaping @Sendable (SyncProgress) -> Void
    ) async throws(SyncError) -> Restored {
        logger.debug(
            "restoring from the archive", metadata: ["sync.reason": "\(reason)", "sync.to": "\(status.actualVersion)"])
        // Stored in the state database: the archive's URL without its password or token.
        let identity = "restore:\(status.actualVersion.text):\(Redaction.url(status.archiveURL))"
        let pending = try await store.pendingPlan()
        let resuming = pending?.identity == identity && pending?.phase == .staging
        let staging = self.staging
        // A restore keeps no twin: it is forgotten before its folder goes.
        try await store.dropTwin()
        try await BlockingWork.files { () throws(FileSystemError) in
            if resuming { try staging.prepare() } else { try staging.resetNext(includingDownloads: true) }
        }
        try await store.beginPlan(
            PendingPlanRecord(
                identity: identity, kind: "restore", fromVersion: local?.text,
                toVersion: status.actualVersion.text, phase: .staging, createdAt: Date()))
        try checkFreeSpace(for: status)
        try await configuration.connectionPolicy.requireTransfers()

        // Archives declare their size in rounded MB; allow a quarter more before calling it a lie.
        let archiveLimit = status.zippedBytes + status.zippedBytes / 4 + (1 << 20)
        let total = status.zippedBytes
        let response = try await downloader.download(
            status.archiveURL, to: staging.archive, expected: status.integrity?.archive,
            what: "the archive \(status.archiveURL.lastPathComponent)",
            maxBytes: archiveLimit, alwaysResumable: true, budgeted: false
        ) { transfer in
            progress(
                SyncProgress(
                    phase: .downloadingArchive, bytesDone: transfer.received,
                    bytesTotal: transfer.expected ?? total, filesDone: 0, filesTotal: 1,
                    currentItem: status.archiveURL.lastPathComponent))
        }

        progress(
            SyncProgress(
                phase: .extracting, bytesDone: 0, bytesTotal: status.unzippedBytes, currentItem: staging.archive))
        try await BlockingWork.files { () throws(FileSystemError) in
            try FileSystem.removeTree(staging.next)
            try FileSystem.makeFolder(staging.next)
        }
        // The declared size, plus slack for its rounding, bounds what extraction may write.
        var extraction = ZipExtractionOptions(
            maxTotalBytes: status.unzippedBytes + status.unzippedBytes / 20 + (1 << 20))
        extraction.workers = 2
        let extracted: ZipExtractionReport
        do {
            let throttle = ProgressThrottle()
            extracted = try await ZipExtractor.extract(
                archiveAt: staging.archive, into: staging.next, options: extraction
            ) { written in
                guard throttle.shouldReport() else { return }
                progress(SyncProgress(phase: .extracting, bytesDone: written, bytesTotal: status.unzippedBytes))
            }
        } catch {
            // A half-extracted tree is of no use (the next run extracts again) and may fill the
            // disk the state database needs to record this failure: free it now.
            _ = try? await BlockingWork.files { [staging] () throws(FileSystemError) in
                try FileSystem.removeTree(staging.next)
            }
            throw SyncError.wrap(error, context: "\(status.archiveURL.lastPathComponent)")
        }
        // The archive stays until the switch (which empties the staging area): a run killed
        // between here and the switch resumes without downloading it again.
        return Restored(bytes: response.bytesReceived, files: extracted.files)
    }

    /// Refuses a restore the filesystem cannot hold: the archive and its content side by side,
    /// less whatever part of the archive is already on disk.
    private func checkFreeSpace(for status: CacheStatus) throws(SyncError) {
        guard let space = FilesystemSpace(holding: staging.root) else { return }
        let available = Int64(clamping: space.available)
        var partial = stat()
        let alreadyHave = stat(staging.archive, &partial) == 0 ? Int64(partial.st_size) : 0
        let needed = max(0, status.zippedBytes - alreadyHave) + status.unzippedBytes
        if available < needed {
            let megabytes = { (bytes: Int64) in String(format: "%.1f MB", Double(bytes) / 1_048_576) }
            throw SyncError(
                code: .insufficientSpace,
                message:
                    "restoring version \(status.actualVersion) needs \(megabytes(needed)) (archive \(megabytes(status.zippedBytes)) "
                    + "+ content \(megabytes(status.unzippedBytes))) but \(staging.root) has \(megabytes(available)) free; "
                    + "free space or choose a folder on a larger filesystem")
        }
    }
}
