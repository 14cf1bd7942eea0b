import FileKit
import Foundation
import StorageFormat

/// Keeps two publishes of one storage apart: an exclusive, non-blocking `flock` on the storage
/// folder's own descriptor, held for the whole publish (dry runs included).
///
/// Locking the folder itself needs no lock file, and every path to the storage (a symlink, a
/// bind mount, `..` detours) reaches the same inode, so they all meet at one lock. `flock`
/// belongs to the open file description: a second `open` in the same process conflicts too, and
/// the lock goes with the descriptor when the process dies (`kill -9` included).
final class PublishLock {
    private let fd: Int32

    /// Takes the lock on `storage` (which must exist) or fails at once, naming the holder.
    init(storage: String) throws(PublishError) {
        // Nothing may throw once `fd` is set: a class whose init throws after that runs its
        // deinit, which would close the descriptor a second time (by then maybe another's).
        fd = try Self.lockedDescriptor(storage)
    }

    /// Opens `storage` and takes the lock; on failure closes what it opened.
    private static func lockedDescriptor(_ storage: String) throws(PublishError) -> Int32 {
        let fd = open(storage, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else {
            throw PublishError.fileSystem(
                "cannot open the storage folder to lock it:", path: storage, syscall: "open", errno: errno)
        }
        guard flock(fd, LOCK_EX | LOCK_NB) != 0 else { return fd }
        let code = errno
        let holder = holder(of: fd)
        close(fd)
        if code == EWOULDBLOCK {
            let who = holder.map { "process \($0)" } ?? "another process"
            throw PublishError(
                code: .busy,
                message: "another publish of \(storage) is running (\(who)); wait for it to finish, or stop it")
        }
        if code == EBADF || code == ENOLCK || code == EOPNOTSUPP {
            // NFS emulates flock with POSIX locks, which a folder opened read-only cannot take.
            throw PublishError(
                code: .fileSystem,
                message:
                    "cannot lock the storage folder \(storage): \(String(cString: strerror(code))); its filesystem cannot flock a folder (NFS?): publish from a local filesystem"
            )
        }
        throw PublishError.fileSystem("cannot lock the storage folder", path: storage, syscall: "flock", errno: code)
    }

    /// The locked folder's descriptor, for `syncfs` and `fsync`.
    var descriptor: Int32 { fd }

    deinit {
        flock(fd, LOCK_UN)
        close(fd)
    }

    /// The PID holding an exclusive `flock` on the file `fd` names (``LockTable``), or nil when
    /// it cannot be told.
    static func holder(of fd: Int32) -> Int32? {
        LockTable.exclusiveHolder(ofDescriptor: fd)
    }
}
