internal import CLinux
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The state the extraction workers share: a queue of files to take from, the running byte total
/// and the first error. Each worker opens its own ``ZipReader`` because `zip_t` is not thread-safe:
/// one on the window of the central directory that holds its next file (files are taken in
/// archive order, so a worker moves through the windows once).
final class ExtractionRun: Sendable {
    /// Bytes asked of libzip per read and passed to one write(2).
    static let chunkSize = 256 * 1024

    let files: [ExtractionPlan.File]
    let opener: ArchiveOpener
    var archivePath: String { opener.path }
    let destination: String
    let destinationFD: Int32
    let maxTotalBytes: Int64
    let isCancelled: @Sendable () -> Bool
    let progress: (@Sendable (Int64) -> Void)?
    let fileWriting: FileWriting

    private let nextFile = Atomic<Int>(0)
    private let inflatedBytes = Atomic<Int64>(0)
    private let stopped = Atomic<Bool>(false)
    private let firstError = Mutex<ArchiveError?>(nil)

    init(
        files: [ExtractionPlan.File], opener: ArchiveOpener, destination: String, destinationFD: Int32,
        maxTotalBytes: Int64, alreadyWritten: Int64 = 0, isCancelled: @escaping @Sendable () -> Bool,
        progress: (@Sendable (Int64) -> Void)?, fileWriting: FileWriting
    ) {
        self.files = files
        self.opener = opener
        self.destination = destination
        self.destinationFD = destinationFD
        self.maxTotalBytes = maxTotalBytes
        self.isCancelled = isCancelled
        self.progress = progress
        self.fileWriting = fileWriting
        inflatedBytes.store(alreadyWritten, ordering: .relaxed)
    }

    /// The first error any worker hit, if one did.
    var error: ArchiveError? { firstError.withLock { $0 } }
    /// Inflated bytes written so far.
    var bytesWritten: Int64 { inflatedBytes.load(ordering: .relaxed) }

    /// Records `error` if it is the first, and tells every worker to stop.
    func fail(_ error: ArchiveError) {
        firstError.withLock { first in
            if first == nil { first = error }
        }
        stopped.store(true, ordering: .relaxed)
    }

    /// Takes files from the shared queue until it is empty or a worker failed. Taking one file at
    /// a time balances the load however sizes are spread, at the cost of one atomic per file.
    /// `startingWith`: a handle the caller already holds, and its window.
    func work(startingWith first: (window: Int, reader: ZipReader)? = nil) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.chunkSize, alignment: 64)
        defer { buffer.deallocate() }
        var reader = first
        while !stopped.load(ordering: .relaxed) {
            let next = nextFile.wrappingAdd(1, ordering: .relaxed).oldValue
            guard next < files.count else { return }
            do {
                let window = opener.window(of: files[next].index)
                if reader?.window != window {
                    reader = nil // one handle at a time
                    reader = (window, try opener.reader(window))
                }
                try extract(files[next], from: reader!.reader, buffer: buffer)
            } catch {
                fail(error)
                return
            }
        }
    }

    private func extract(
        _ file: ExtractionPlan.File, from reader: ZipReader,
        buffer: UnsafeMutableRawBufferPointer
    ) throws(ArchiveError) {
        try checkContinue()
        let fd = openat(destinationFD, file.path.string, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw ArchiveError.io("creating '\(file.path)' in \(destination)", errno: clinux_errno())
        }
        var isOpen = true
        defer { if isOpen { close(fd) } }

        let stream = try reader.open(index: file.index, name: file.archiveName)
        var produced: Int64 = 0
        while true {
            let count = try stream.read(into: buffer)
            if count == 0 { break }
            produced += Int64(count)
            // Count before writing: the limit holds for bytes really inflated, whatever the headers say.
            let total = inflatedBytes.wrappingAdd(Int64(count), ordering: .relaxed).newValue
            if total > maxTotalBytes {
                throw ArchiveError(
                    code: .sizeLimitExceeded,
                    message:
                        "\(archivePath) inflates past the limit of \(maxTotalBytes) bytes while writing '\(file.path)'; refusing the archive (a zip bomb, or raise maxTotalBytes if it is genuine)"
                )
            }
            if produced > file.declaredSize {
                throw ArchiveError(
                    code: .corrupt,
                    message:
                        "\(archivePath): entry '\(file.archiveName)' inflates past its declared \(file.declaredSize) bytes; the header lies, refusing the archive"
                )
            }
            if let code = fileWriting.writeAll(fd, UnsafeRawBufferPointer(rebasing: buffer[0..<count])) {
                throw ArchiveError.io("writing '\(file.path)' into \(destination)", errno: code)
            }
            progress?(total)
            try checkContinue()
        }
        if produced != file.declaredSize {
            throw ArchiveError(
                code: .corrupt,
                message:
                    "\(archivePath): entry '\(file.archiveName)' inflates to \(produced) bytes but declares \(file.declaredSize); download the archive again"
            )
        }
        isOpen = false
        if close(fd) != 0 {
            throw ArchiveError.io("writing '\(file.path)' into \(destination)", errno: clinux_errno())
        }
    }

    /// Throws when the caller cancelled, or quietly stops this worker when another one failed
    /// (the error it throws then is never recorded, since the first error already is).
    private func checkContinue() throws(ArchiveError) {
        if stopped.load(ordering: .relaxed) {
            throw ArchiveError(code: .cancelled, message: "stopped after another worker failed")
        }
        if isCancelled() {
            throw ArchiveError(
                code: .cancelled,
                message:
                    "extracting \(archivePath) into \(destination) was cancelled; extract again into a fresh folder")
        }
    }
}
