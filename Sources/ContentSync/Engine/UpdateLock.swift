import Foundation

/// Keeps two updates of the same folder (a `watch` daemon and a manual `sync`, say) from
/// building in one staging area at once: an exclusive `flock` on `<state database>.lock`, held
/// for the whole update.
///
/// The lock is a separate file on purpose: closing *any* descriptor of the database file would
/// drop SQLite's own POSIX locks on it (a process's `fcntl` locks die with its first `close`),
/// which corrupts a WAL database that another process is using. The `.lock` file sits beside
/// the database, like its `-wal` and `-shm` files, and is never deleted (deleting a lock file
/// races with the next process that opens it).
final class UpdateLock {
    private let fd: Int32

    /// Takes the lock or fails at once, naming the holder's state file.
    init(statePath: String, contentDirectory: String) throws(SyncError) {
        let lockPath = statePath + ".lock"
        fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw SyncError.fileSystem("cannot open the update lock", path: lockPath, errno: errno)
        }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let code = errno
            close(fd)
            if code == EWOULDBLOCK {
                throw SyncError(code: .configuration,
                                message: "another update of \(contentDirectory) is running (it holds \(lockPath)); wait for it to finish or stop it")
            }
            throw SyncError.fileSystem("cannot take the update lock", path: lockPath, errno: code)
        }
    }

    deinit {
        flock(fd, LOCK_UN)
        close(fd)
    }
}
