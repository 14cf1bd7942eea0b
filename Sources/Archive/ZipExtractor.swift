internal import CLinux
import Dispatch
import FileKit
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Extracts zip archives from an untrusted storage into a fresh folder.
///
/// This is a security boundary. Before writing anything, the extractor reads the whole central
/// directory and refuses the archive if any entry name could leave the destination, if an entry is
/// a symlink or device, if names collide, if an entry is encrypted, or if the declared sizes add up
/// past ``ZipExtractionOptions/maxTotalBytes``. While inflating it counts the bytes really produced,
/// since headers can lie. Files are created with `O_EXCL | O_NOFOLLOW`, so nothing already present is
/// overwritten or followed.
///
/// On error the destination may hold part of the archive; discard it.
public enum ZipExtractor {
    /// Extracts `path` into `destination`, blocking the calling thread.
    ///
    /// - Parameters:
    ///   - destination: an existing, empty folder (a fresh staging folder).
    ///   - isCancelled: polled between chunks; when it returns true the extraction stops with `.cancelled`.
    ///   - progress: called from worker threads with the total inflated bytes written so far. Pass it
    ///     with its label: a trailing closure would bind to `isCancelled`.
    public static func extract(
        archiveAt path: String, into destination: String, options: ZipExtractionOptions,
        isCancelled: @escaping @Sendable () -> Bool = { false },
        progress: (@Sendable (_ bytesWritten: Int64) -> Void)? = nil
    ) throws(ArchiveError) -> ZipExtractionReport {
        try extract(
            archiveAt: path, into: destination, options: options, isCancelled: isCancelled,
            progress: progress, fileWriting: .system)
    }

    /// Extracts `path` into `destination` on a dedicated dispatch queue, never blocking Swift's
    /// cooperative thread pool. Cancelling the calling task stops the extraction with `.cancelled`.
    public static func extract(
        archiveAt path: String, into destination: String, options: ZipExtractionOptions,
        progress: (@Sendable (_ bytesWritten: Int64) -> Void)? = nil
    ) async throws(ArchiveError) -> ZipExtractionReport {
        let flag = CancellationFlag()
        let result: Result<ZipExtractionReport, ArchiveError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                queue.async {
                    do throws(ArchiveError) {
                        let report = try extract(
                            archiveAt: path, into: destination, options: options,
                            isCancelled: { flag.isSet }, progress: progress)
                        continuation.resume(returning: .success(report))
                    } catch {
                        continuation.resume(returning: .failure(error))
                    }
                }
            }
        } onCancel: {
            flag.set()
        }
        return try result.get()
    }

    /// Blocking libzip work runs here, off the cooperative pool (2 threads on 2 cores).
    private static let queue = DispatchQueue(
        label: "content-sync.archive.extract", qos: .utility,
        attributes: .concurrent)

    /// The extraction, with the write system call injectable for tests.
    static func extract(
        archiveAt path: String, into destination: String, options: ZipExtractionOptions,
        isCancelled: @escaping @Sendable () -> Bool,
        progress: (@Sendable (Int64) -> Void)?,
        fileWriting: FileWriting
    ) throws(ArchiveError) -> ZipExtractionReport {
        if isCancelled() { throw cancelledError(path, destination) }
        let destinationFD = try openEmptyFolder(destination)
        defer { close(destinationFD) }

        // Read in windows of its central directory, libzip holds one window's records per handle
        // at a time, however many entries the archive has.
        let opener = try ArchiveOpener(path: path, windowSize: options.centralDirectoryWindow)
        defer { opener.close() }
        var entries: [RawZipEntry] = []
        var inconsistency: ArchiveError?
        for window in 0..<opener.windowCount {
            let (reader, found) = try opener.checkedReader(window)
            inconsistency = inconsistency ?? found
            let count = reader.entryCount
            if entries.count + count > options.maxEntries {
                throw ArchiveError.tooManyEntries(path, count: entries.count + count, options: options)
            }
            if window == 0 { entries.reserveCapacity(count * opener.windowCount) }
            for local in 0..<UInt64(count) {
                entries.append(try reader.entry(at: local))
            }
        }
        let plan = try ExtractionPlan(entries: entries, options: options, archive: path)
        entries = []
        if let inconsistency { throw inconsistency }

        if isCancelled() { throw cancelledError(path, destination) }
        for folder in plan.folders where mkdirat(destinationFD, folder.string, 0o755) != 0 {
            throw ArchiveError.io("creating folder '\(folder)' in \(destination)", errno: clinux_errno())
        }

        let run = ExtractionRun(
            files: plan.files, opener: opener, destination: destination,
            destinationFD: destinationFD, maxTotalBytes: options.maxTotalBytes,
            isCancelled: isCancelled, progress: progress, fileWriting: fileWriting)
        let workers = max(1, min(options.workers, plan.files.count))
        let group = DispatchGroup()
        for _ in 1..<workers {
            group.enter()
            let thread = Thread {
                defer { group.leave() }
                run.work()
            }
            thread.name = "content-sync.archive.worker"
            thread.start()
        }
        run.work()
        group.wait()

        if let error = run.error { throw error }
        return ZipExtractionReport(
            files: plan.files.count, folders: plan.folders.count,
            bytesWritten: run.bytesWritten, skippedEntries: plan.skippedEntries)
    }

    private static func cancelledError(_ path: String, _ destination: String) -> ArchiveError {
        ArchiveError(
            code: .cancelled,
            message: "extracting \(path) into \(destination) was cancelled; extract again into a fresh folder")
    }

    /// Opens `path` as a folder and checks that it is empty, so nothing of the caller's is overwritten.
    private static func openEmptyFolder(_ path: String) throws(ArchiveError) -> Int32 {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = clinux_errno()
            throw ArchiveError(
                code: .invalidDestination,
                message:
                    "destination \(path) cannot be opened as a folder: \(ArchiveError.systemMessage(code)); create an empty folder first",
                errno: code)
        }
        let listingFD = dup(fd)
        guard listingFD >= 0, let listing = fdopendir(listingFD) else {
            let code = clinux_errno()
            if listingFD >= 0 { close(listingFD) }
            close(fd)
            throw ArchiveError.io("listing destination \(path)", errno: code)
        }
        defer { closedir(listing) }
        while let entry = readdir(listing) {
            let name = String(decoding: DirectoryEntryName.bytes(entry), as: UTF8.self)
            if name != "." && name != ".." {
                close(fd)
                throw ArchiveError(
                    code: .invalidDestination,
                    message: "destination \(path) is not empty (it holds '\(name)'); extract into a fresh folder")
            }
        }
        return fd
    }
}

/// A flag the task-cancellation handler sets and the blocking extraction polls.
private final class CancellationFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .relaxed) }
    func set() { value.store(true, ordering: .relaxed) }
}
