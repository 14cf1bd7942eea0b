import CLinux
import Glibc
import Synchronization

/// A file used only for its byte-range locks: Linux open-file-description locks
/// (`F_OFD_SETLK`), one byte per slot, shared or exclusive.
///
/// Unlike `flock`, one file carries any number of independent locks (a slot per key, say), and
/// unlike classic POSIX locks they belong to this open file, not to the process: two
/// ``RangeLockFile`` objects on one path exclude each other even inside one process, closing
/// any other descriptor of the file releases nothing, and a process that dies releases its
/// locks at once.
///
/// The kernel sees one owner per object, so the object itself keeps its threads apart: each
/// successful ``tryLock(slot:exclusive:)`` or ``lock(slot:exclusive:)`` is one *hold*, released
/// by one ``unlock(slot:)``. Shared holds of a slot add up (the file's lock goes when the last
/// one is released); an exclusive hold excludes every other hold, of this process or another.
/// (Without the count, a thread's unlock would drop the lock another thread still relied on.)
public final class RangeLockFile: Sendable {
    /// The lock file.
    public let path: String
    private let descriptor: Int32

    /// This object's holds per slot: a count of shared ones, exclusive, or a thread blocked in
    /// the kernel for the first hold (the others wait for it).
    private enum Hold {
        case shared(Int)
        case exclusive, acquiring
    }
    private let holds = Mutex<[Int64: Hold]>([:])

    /// Opens (creating, mode 0644) the lock file at `path`.
    public init(path: String) throws(FileSystemError) {
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard descriptor >= 0 else {
            throw FileSystemError("cannot open the lock file", path: path, syscall: "open", errno: errno)
        }
        self.path = path
        self.descriptor = descriptor
    }

    /// Opens (creating with `mode`) the lock file `name` in the open folder `folder`, never
    /// through a symlink; `path` is what errors show.
    public init(in folder: Int32, name: String, mode: mode_t, path: String) throws(FileSystemError) {
        let descriptor = openat(folder, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, mode)
        guard descriptor >= 0 else {
            throw FileSystemError("cannot open the lock file", path: path, syscall: "openat", errno: errno)
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
            close(descriptor)
            throw FileSystemError(
                code: .io, operation: "the lock file is not a regular file:", path: path,
                remedy: "remove it; it is made again")
        }
        self.path = path
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }

    /// Takes a hold on `slot` (a byte offset, 0 or more), shared or exclusive. Returns false
    /// at once when a hold of this object or another process's lock conflicts; throws for any
    /// other failure.
    public func tryLock(slot: Int64, exclusive: Bool) throws(FileSystemError) -> Bool {
        try holds.withLock { holds throws(FileSystemError) -> Bool in
            switch (holds[slot], exclusive) {
            case (.exclusive?, _), (.shared?, true), (.acquiring?, _):
                return false
            case (.shared(let count)?, false):
                holds[slot] = .shared(count + 1)
                return true
            case (nil, _):
                if clinux_ofd_lock(descriptor, slot, 1, exclusive ? 2 : 1, 0) == 0 {
                    holds[slot] = exclusive ? .exclusive : .shared(1)
                    return true
                }
                let code = clinux_errno()
                if code == EAGAIN || code == EACCES { return false }
                throw FileSystemError(
                    "cannot lock slot \(slot) of", path: path, syscall: "fcntl(F_OFD_SETLK)", errno: code)
            }
        }
    }

    /// Takes a hold on `slot`, blocking the calling thread until it is granted: in the kernel
    /// (`F_OFD_SETLKW`, which queues waiters) while another process holds a conflicting lock,
    /// or polling briefly while another thread of this object does. Only for threads that may
    /// block (not Swift's cooperative pool) and locks held briefly.
    public func lock(slot: Int64, exclusive: Bool) throws(FileSystemError) {
        enum Step { case done, wait, block }
        var pause: UInt32 = 100
        while true {
            let step = holds.withLock { holds -> Step in
                switch (holds[slot], exclusive) {
                case (nil, _):
                    holds[slot] = .acquiring
                    return .block
                case (.shared(let count)?, false):
                    holds[slot] = .shared(count + 1)
                    return .done
                default:
                    return .wait
                }
            }
            switch step {
            case .done:
                return
            case .wait:
                usleep(pause)
                pause = min(pause * 2, 2_000)
            case .block:
                // Blocks outside the mutex: other slots and releases go on meanwhile.
                let granted = clinux_ofd_lock(descriptor, slot, 1, exclusive ? 2 : 1, 1) == 0
                let code = clinux_errno()
                holds.withLock { $0[slot] = granted ? (exclusive ? .exclusive : .shared(1)) : nil }
                if granted { return }
                if code == EINTR { continue }
                throw FileSystemError(
                    "cannot lock slot \(slot) of", path: path, syscall: "fcntl(F_OFD_SETLKW)", errno: code)
            }
        }
    }

    /// Releases one hold of `slot` (nothing happens when there is none); the file's lock goes
    /// with the last one.
    public func unlock(slot: Int64) {
        holds.withLock { holds in
            switch holds[slot] {
            case .shared(let count)? where count > 1:
                holds[slot] = .shared(count - 1)
            case .shared?, .exclusive?:
                holds[slot] = nil
                _ = clinux_ofd_lock(descriptor, slot, 1, 0, 0)
            case .acquiring?, nil:
                break
            }
        }
    }
}
