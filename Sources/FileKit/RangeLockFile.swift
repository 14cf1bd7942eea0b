import CLinux
import Glibc

/// A file used only for its byte-range locks: Linux open-file-description locks
/// (`F_OFD_SETLK`), one byte per slot, shared or exclusive.
///
/// Unlike `flock`, one file carries any number of independent locks (a slot per key, say), and
/// unlike classic POSIX locks they belong to this open file, not to the process: two
/// ``RangeLockFile`` objects on one path exclude each other even inside one process, closing
/// any other descriptor of the file releases nothing, and a process that dies releases its
/// locks at once. Two holders of the *same* object share its locks: callers coordinate their
/// own threads first and use the file to meet other processes.
///
/// Calls never block: ``tryLock(slot:exclusive:)`` answers at once, and callers that must wait
/// poll, so waiting stays cancellable.
public final class RangeLockFile: Sendable {
    /// The lock file.
    public let path: String
    private let descriptor: Int32

    /// Opens (creating, mode 0644) the lock file at `path`.
    public init(path: String) throws(FileSystemError) {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard descriptor >= 0 else {
            throw FileSystemError("cannot open the lock file", path: path, syscall: "open", errno: errno)
        }
        self.path = path
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    /// Takes the lock on `slot` (a byte offset, 0 or more), shared or exclusive. Returns false
    /// when another holder's lock conflicts; throws for any other failure.
    public func tryLock(slot: Int64, exclusive: Bool) throws(FileSystemError) -> Bool {
        if clinux_ofd_lock(descriptor, slot, 1, exclusive ? 2 : 1, 0) == 0 { return true }
        let code = clinux_errno()
        if code == EAGAIN || code == EACCES { return false }
        throw FileSystemError("cannot lock slot \(slot) of", path: path, syscall: "fcntl(F_OFD_SETLK)", errno: code)
    }

    /// Takes the lock on `slot`, blocking the calling thread until it is granted. Only for
    /// threads that may block (not Swift's cooperative pool) and locks held briefly.
    public func lock(slot: Int64, exclusive: Bool) throws(FileSystemError) {
        if clinux_ofd_lock(descriptor, slot, 1, exclusive ? 2 : 1, 1) == 0 { return }
        throw FileSystemError("cannot lock slot \(slot) of", path: path, syscall: "fcntl(F_OFD_SETLKW)", errno: clinux_errno())
    }

    /// Releases this file's lock on `slot` (nothing happens when it holds none).
    public func unlock(slot: Int64) {
        _ = clinux_ofd_lock(descriptor, slot, 1, 0, 0)
    }
}
