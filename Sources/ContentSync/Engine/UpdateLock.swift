import Foundation

/// Keeps two updates of the same folder (a `watch` daemon and a manual `sync`, say) from
/// building in one staging area at once: an exclusive `flock` on the state database file,
/// held for the whole update. `flock` locks are independent of SQLite's own `fcntl` locks.
final class UpdateLock {
    private let fd: Int32

    /// Takes the lock or fails at once, naming the holder's state file.
    init(statePath: String, contentDirectory: String) throws(SyncError) {
        fd = open(statePath, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw SyncError.fileSystem("cannot open the state database", path: statePath, errno: errno)
        }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            close(fd)
            if code == EWOULDBLOCK {
                throw SyncError(code: .configuration,
                                message: "another update of \(contentDirectory) is running (it holds \(statePath)); wait for it to finish or stop it")
            }
            throw SyncError.fileSystem("cannot lock the state database", path: statePath, errno: code)
        }
    }

    deinit {
        flock(fd, LOCK_UN)
        close(fd)
    }
}
