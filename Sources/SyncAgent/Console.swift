import FileKit
import Foundation
import SyncDaemon
import Synchronization

/// Writes to the standard streams with `write(2)`, for a process that ignores SIGPIPE.
///
/// `sync-agent` runs piped into `head`, a log shipper or a terminal that goes away. It ignores
/// SIGPIPE so that a reader that left does not kill an update halfway; a write to a closed pipe
/// then fails with EPIPE, which Foundation's `FileHandle.write(_:)` turns into a crash. Output
/// nobody reads is dropped; the update and its exit code are what count.
package enum Console {
    /// Whether stdout was no writable stream at start (closed by the parent): what a command
    /// writes there is dropped, and its exit code is the command's.
    static let standardOutputDiscarded = Atomic(false)
    /// The same for stderr.
    static let standardErrorDiscarded = Atomic(false)

    /// Ignores SIGPIPE for the whole process: a closed pipe becomes EPIPE on the write.
    static func ignoreBrokenPipes() {
        signal(SIGPIPE, SIG_IGN)
    }

    /// Opens `/dev/null` on any of descriptors 0, 1 and 2 that a parent left closed. Otherwise
    /// the next file opened (the state database, say) would get that number, and log lines meant
    /// for stderr would be written into it.
    static func ensureStandardStreamsOpen() {
        // A stream the parent closed may already hold a descriptor the runtime opened since
        // `exec` (libdispatch's eventfd took 1 for `status >&-`, which then failed with exit 5,
        // "cannot write to stdout: Invalid argument"). Such a descriptor has close-on-exec set,
        // which one inherited as a stream never has: what would go there is dropped, as it is
        // for a reader that left, and never written into the runtime's descriptor.
        func openedSinceExec(_ descriptor: Int32) -> Bool {
            let flags = fcntl(descriptor, F_GETFD)
            return flags >= 0 && flags & FD_CLOEXEC != 0
        }
        if openedSinceExec(STDOUT_FILENO) { standardOutputDiscarded.store(true, ordering: .relaxed) }
        if openedSinceExec(STDERR_FILENO) { standardErrorDiscarded.store(true, ordering: .relaxed) }
        for descriptor in [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO]
        where fcntl(descriptor, F_GETFD) < 0 && errno == EBADF {
            let opened = open("/dev/null", descriptor == STDIN_FILENO ? O_RDONLY : O_WRONLY)
            if opened >= 0 && opened != descriptor {
                dup2(opened, descriptor)
                close(opened)
            }
        }
    }

    package static func standardError(_ text: String) {
        write(text, to: STDERR_FILENO)
    }

    /// One `warning: …` line on stderr, its text kept on the line: what an origin or a stored
    /// record wrote is quoted with its control characters escaped (``LogText``).
    package static func warning(_ text: String) {
        standardError("warning: \(LogText.escaped(text))\n")
    }

    /// A line on stdout, as `print` would write it, through ``write(_:to:)``: the one way the
    /// CLI prints, so a closed pipe ends nothing but the output.
    static func print(_ text: String) {
        write(text + "\n", to: STDOUT_FILENO)
    }

    package static func standardOutput(_ text: String) {
        write(text, to: STDOUT_FILENO)
    }

    /// Writes `data` to stdout (a value's bytes, not copied), as ``write(_:to:)`` does.
    package static func standardOutput(_ data: Data) {
        // EPIPE and anything else: nobody to tell.
        data.withUnsafeBytes { standardOutput($0) }
    }

    /// Writes `bytes` to stdout, as the `Data` one does.
    package static func standardOutput(_ bytes: UnsafeRawBufferPointer) {
        guard !standardOutputDiscarded.load(ordering: .relaxed) else { return }
        _ = DescriptorIO.writeAll(STDOUT_FILENO, bytes)
    }

    /// Writes the output a command was asked for (an item's bytes, an image, a listing, a
    /// status): unlike ``standardOutput(_:)-(Data)``, a failed write (a full disk, an I/O error)
    /// fails the command with exit 5, as `-o FILE` does, so a script never takes a cut output
    /// for a whole one. A reader that left (`| head -c 10`, EPIPE) took what it wanted: the
    /// rest is dropped and the command ends as it would have.
    package static func output(_ bytes: UnsafeRawBufferPointer) throws {
        guard !standardOutputDiscarded.load(ordering: .relaxed) else { return }
        if let failure = DescriptorIO.writeAll(STDOUT_FILENO, bytes), failure != EPIPE {
            throw CLIFailure(code: 5, message: "cannot write to stdout: \(String(cString: strerror(failure)))")
        }
    }

    /// ``output(_:)-(UnsafeRawBufferPointer)`` of `data`.
    package static func output(_ data: Data) throws {
        try data.withUnsafeBytes { try output($0) }
    }

    /// ``output(_:)-(UnsafeRawBufferPointer)`` of `text`.
    package static func output(_ text: String) throws {
        var text = text
        try text.withUTF8 { try output(UnsafeRawBufferPointer($0)) }
    }

    /// Writes all of `text` to `descriptor` (`DescriptorIO.writeAll`: retried after signals and
    /// short writes); a closed pipe or any other failure drops it (there is nobody left to tell).
    static func write(_ text: String, to descriptor: Int32) {
        if descriptor == STDOUT_FILENO, standardOutputDiscarded.load(ordering: .relaxed) { return }
        if descriptor == STDERR_FILENO, standardErrorDiscarded.load(ordering: .relaxed) { return }
        var text = text
        _ = text.withUTF8 { DescriptorIO.writeAll(descriptor, UnsafeRawBufferPointer($0)) }
    }
}

/// `-o FILE`, as `curl -o` and `cp` treat it: a regular file (or none yet) is replaced
/// atomically, so a reader never sees half of it; a symbolic link is followed and its target
/// replaced; a device, FIFO or socket that exists (`/dev/null`, `/dev/stdout`, a named pipe) is
/// written into, never replaced (an atomic rename would put a regular file in its place).
package enum OutputFile {
    /// Refuses `path` (`-o`'s) when it names a file inside `folder` (the cache folder), through
    /// links too: writing there would replace one of the cache's own files (its index, a value).
    package static func refuse(_ path: String, inside folder: String, option: String = "-o") throws {
        let target = FileSystem.canonicalPath(FileSystem.absolutePath(path))
        if FileSystem.path(target, isWithin: FileSystem.canonicalPath(FileSystem.absolutePath(folder))) {
            throw CLIFailure(
                code: 6,
                message:
                    "\(option) \(path) is inside the cache folder \(folder), where it would replace one of the cache's own files; name a file outside it"
            )
        }
    }

    /// Refuses `path` before any work when ``write(to:option:_:)`` could not write it: a folder,
    /// or a file whose folder is missing, not a folder, or not writable. Said first, a fetch
    /// is not made (and stored) only for its result to have nowhere to go.
    package static func checkWritable(_ path: String, option: String = "-o") throws {
        let absolute = FileSystem.absolutePath(path)
        var status = stat()
        if stat(absolute, &status) == 0 {
            if (status.st_mode & S_IFMT) == S_IFDIR {
                throw CLIFailure(code: 6, message: "\(option) \(absolute) is a folder; name a file")
            }
            if (status.st_mode & S_IFMT) != S_IFREG { return } // a device or FIFO: opened when written
        }
        let target =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: absolute)).map { link in
                link.hasPrefix("/") ? link : (absolute as NSString).deletingLastPathComponent + "/" + link
            } ?? absolute
        let folder = (target as NSString).deletingLastPathComponent
        var folderStatus = stat()
        guard stat(folder, &folderStatus) == 0, (folderStatus.st_mode & S_IFMT) == S_IFDIR else {
            // Exit 5, as the write itself fails (the file system is what answers).
            throw CLIFailure(
                code: 5,
                message: "\(option) \(path): its folder \(folder) does not exist; create it or name another file")
        }
        guard access(folder, W_OK) == 0 else {
            let code = errno
            throw CLIFailure(
                code: 5,
                message:
                    "\(option) \(path): cannot write in \(folder) (\(String(cString: strerror(code)))); name a file elsewhere"
            )
        }
    }

    package static func write(_ data: Data, to path: String, option: String = "-o") throws {
        try write(to: path, option: option) { write in try data.withUnsafeBytes { try write($0) } }
    }

    /// ``write(_:to:option:)`` for bytes that come in pieces (a value read from its file):
    /// `produce` passes each to the `write` it gets. When it throws, a regular file is left as
    /// it was and its error is thrown.
    package static func write(
        to path: String, option: String = "-o",
        _ produce: (_ write: (UnsafeRawBufferPointer) throws -> Void) throws -> Void
    ) throws {
        let absolute = FileSystem.absolutePath(path)
        var status = stat()
        if stat(absolute, &status) == 0, (status.st_mode & S_IFMT) != S_IFREG {
            guard (status.st_mode & S_IFMT) != S_IFDIR else {
                throw CLIFailure(code: 6, message: "\(option) \(absolute) is a folder; name a file")
            }
            let descriptor = open(absolute, O_WRONLY | O_CLOEXEC | O_NOCTTY)
            guard descriptor >= 0 else {
                throw CLIFailure(
                    code: 5, message: "\(option): cannot open \(absolute): \(String(cString: strerror(errno)))")
            }
            defer { close(descriptor) }
            try produce { bytes in
                if let failure = DescriptorIO.writeAll(descriptor, bytes) {
                    throw CLIFailure(
                        code: 5,
                        message: "\(option): cannot write to \(absolute): \(String(cString: strerror(failure)))")
                }
            }
            return
        }
        // A link is followed: its target is what gets replaced.
        let target =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: absolute)).map { link in
                link.hasPrefix("/") ? link : (absolute as NSString).deletingLastPathComponent + "/" + link
            } ?? absolute
        // The file it replaces keeps its mode and owner, as `curl -o` and `cp` (which write into
        // it) keep them: a private file never became world-readable.
        var replaced = stat()
        let existing = lstat(target, &replaced) == 0 && (replaced.st_mode & S_IFMT) == S_IFREG ? replaced : nil
        do {
            try AtomicFile.write(to: target, keeping: existing, produce)
        } catch let error as FileSystemError {
            throw CLIFailure(code: 5, message: "\(option): \(error)")
        }
    }
}
