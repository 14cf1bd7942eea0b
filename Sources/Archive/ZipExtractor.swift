internal import CLinux
import Dispatch
import FileKit
import Foundation
import Synchronization
import ThreadKit

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

    /// Extracts `path` into `destination` on a thread of its own, never blocking Swift's
    /// cooperative thread pool (2 threads on 2 cores). Where no thread can be made (a task
    /// limit), it extracts on the calling thread instead. Cancelling the calling task stops the
    /// extraction with `.cancelled`.
    public static func extract(
        archiveAt path: String, into destination: String, options: ZipExtractionOptions,
        progress: (@Sendable (_ bytesWritten: Int64) -> Void)? = nil
    ) async throws(ArchiveError) -> ZipExtractionReport {
        let flag = CancellationFlag()
        let result: Result<ZipExtractionReport, ArchiveError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                // A dispatch queue would sleep a second at a time until a thread could be made.
                DetachedThread.startOrRunHere(name: "cs.extract") {
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
        // at a time, however many entries the archive has; the plan holds about 8 bytes of each.
        let opener = try ArchiveOpener(path: path, windowSize: options.centralDirectoryWindow)
        defer { opener.close() }
        if let total = opener.entryCount, total > UInt64(options.maxEntries) {
            throw ArchiveError.tooManyEntries(path, count: Int(clamping: total), options: options)
        }
        var plan = StreamedPlan(options: options, archive: path)
        var inconsistency: ArchiveError?
        var read = 0
        for window in 0..<opener.windowCount {
            let (reader, found) = try opener.checkedReader(window)
            inconsistency = inconsistency ?? found
            read += reader.entryCount
            if read > options.maxEntries { throw ArchiveError.tooManyEntries(path, count: read, options: options) }
            for entry in try reader.entries() { try plan.add(entry) }
        }
        let folders = try plan.finish { wanted throws(ArchiveError) in
            var involved: [RawZipEntry] = []
            for window in 0..<opener.windowCount {
                involved += try opener.reader(window).entries().filter(wanted)
            }
            return involved
        }
        if let inconsistency { throw inconsistency }

        if isCancelled() { throw cancelledError(path, destination) }
        for folder in folders where mkdirat(destinationFD, folder.string, 0o755) != 0 {
            throw ArchiveError.io("creating folder '\(folder)' in \(destination)", errno: clinux_errno())
        }

        // Window by window: its files, inflated by the workers, each with its own handle.
        var written: Int64 = 0
        for window in 0..<opener.windowCount {
            if isCancelled() { throw cancelledError(path, destination) }
            let reader = try opener.reader(window)
            let files = try plan.files(of: try reader.entries())
            guard !files.isEmpty else { continue }
            let run = ExtractionRun(
                files: files, opener: opener, destination: destination,
                destinationFD: destinationFD, maxTotalBytes: options.maxTotalBytes, alreadyWritten: written,
                isCancelled: isCancelled, progress: progress, fileWriting: fileWriting)
            let workers = max(1, min(options.workers, files.count))
            let group = DispatchGroup()
            // A worker that cannot be made (a task limit) leaves its files to the others.
            for _ in 1..<workers {
                group.enter()
                do {
                    try DetachedThread.start(name: "cs.unzip") {
                        defer { group.leave() }
                        run.work()
                    }
                } catch {
                    group.leave()
                }
            }
            run.work(startingWith: (window, reader))
            group.wait()
            if let error = run.error { throw error }
            written = run.bytesWritten
        }
        return ZipExtractionReport(
            files: plan.fileCount, folders: folders.count, bytesWritten: written, skippedEntries: plan.skippedEntries)
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
