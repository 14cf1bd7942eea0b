import FileKit
import Foundation
import StorageFormat

/// Keeps two updates of one content folder from running at once: a `watch` daemon and a manual
/// `sync`, or two runs that name different state files for the same `--dir`. Two exclusive
/// `flock`s, held for the whole update (or `verify`, or `reset`):
/// - on `<state database>.lock`: the database's own updates stay in one process;
/// - on the content folder's staging area, `<parent>/.<name>.content-sync/`: whatever state file
///   a run uses, it builds in that one folder, so that folder is what must be exclusive.
///
/// The staging folder is created to be locked, and removed when the lock is released if the
/// update left nothing in it. Because the folder is the lock, the holder only ever empties it
/// (``StagingArea/clear()``); a run that finds the folder replaced after it locked it (the
/// previous holder removed it on release) locks the new one instead.
///
/// The state lock is a separate file on purpose: closing *any* descriptor of the database file
/// would drop SQLite's own POSIX locks on it (a process's `fcntl` locks die with its first
/// `close`), which corrupts a WAL database that another process is using. The `.lock` file sits
/// beside the database, like its `-wal` and `-shm` files, and is never deleted (deleting a lock
/// file races with the next process that opens it).
///
/// While the lock is held, `staging` works through the locked folder's descriptor
/// (``StagingArea/hold(_:)``), never through its name.
final class UpdateLock {
    private let stateLock: Int32
    private let folder: HeldFolder
    private let staging: StagingArea

    /// Takes both locks or fails at once, naming what holds them. With `stateFolder` (the
    /// state database's folder, held by its ``StateStore``), the lock file is opened in that
    /// folder, never through its path, which could lead to another folder by now.
    init(statePath: String, stateFolder: HeldFolder? = nil, contentDirectory: String, staging: StagingArea)
        throws(SyncError)
    {
        let stagingRoot = staging.location
        // A folder named through a link is refused before anything is made: the staging
        // folder (the lock) would be made beside the link, for a folder that is not this one.
        try Self.refuseLink(contentDirectory)
        let lockPath = statePath + ".lock"
        // Never through a symlink (planted, it would create the file elsewhere), never a FIFO
        // or device (O_NONBLOCK keeps one from blocking the open; the check below refuses it).
        let flags = O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK
        stateLock =
            stateFolder.map { openat($0.descriptor, (lockPath as NSString).lastPathComponent, flags, 0o644) }
            ?? open(lockPath, flags, 0o644)
        guard stateLock >= 0 else {
            let code = errno
            if code == ELOOP {
                throw SyncError(
                    code: .configuration,
                    message:
                        "the update lock \(lockPath) is a symlink, so an update could create a file elsewhere through it; remove it (it is made again)"
                )
            }
            throw SyncError.fileSystem("cannot open the update lock", path: lockPath, syscall: "open", errno: code)
        }
        var info = stat()
        guard fstat(stateLock, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            close(stateLock)
            throw SyncError(
                code: .configuration,
                message: "the update lock \(lockPath) is not a regular file; remove it (it is made again)")
        }
        do {
            try Self.lockExclusively(stateLock, path: lockPath, contentDirectory: contentDirectory)
        } catch {
            close(stateLock)
            throw error
        }
        do throws(SyncError) {
            let locked = try Self.lockFolder(stagingRoot, contentDirectory: contentDirectory)
            do {
                folder = try HeldFolder(adopting: locked, shownAs: stagingRoot)
            } catch {
                throw SyncError.fileSystem(
                    "cannot read the staging folder", path: stagingRoot, syscall: "fstat", errno: error.errno ?? EIO)
            }
        } catch {
            flock(stateLock, LOCK_UN)
            close(stateLock)
            throw error
        }
        self.staging = staging
        staging.hold(folder)
    }

    deinit {
        staging.release()
        // Removed while still locked, so nobody can lock this folder after we let go of it:
        // the next run creates and locks a new one. A non-empty one (a failed update's staging)
        // stays for the next run to resume from. Only while its name still leads to the locked
        // folder: what a neighbour put there instead is left.
        _ = try? folder.removeName()
        flock(folder.descriptor, LOCK_UN)
        flock(stateLock, LOCK_UN)
        close(stateLock)
    }

    /// Refuses a content folder that is a symlink: every update replaces the folder itself, so it
    /// would replace the link, and the lock beside it would guard another folder than the one
    /// the link leads to.
    static func refuseLink(_ contentDirectory: String) throws(SyncError) {
        var info = stat()
        guard lstat(contentDirectory, &info) == 0, info.st_mode & S_IFMT == S_IFLNK else { return }
        throw SyncError(
            code: .configuration,
            message:
                "\(contentDirectory) is a symlink; pass the real folder's path (an update replaces the folder itself)")
    }

    /// An exclusive `flock` on `descriptor` (the file at `path`), or the error that says who holds it.
    private static func lockExclusively(_ descriptor: Int32, path: String, contentDirectory: String) throws(SyncError) {
        guard flock(descriptor, LOCK_EX | LOCK_NB) != 0 else { return }
        let code = errno
        if code == EWOULDBLOCK {
            throw SyncError(
                code: .busy,
                message:
                    "another update of \(contentDirectory) is running (it holds \(path)); wait for it to finish or stop it"
            )
        }
        throw SyncError.fileSystem("cannot lock", path: path, syscall: "flock", errno: code)
    }

    /// Creates (if needed), opens and locks the staging folder; returns its descriptor.
    private static func lockFolder(_ path: String, contentDirectory: String) throws(SyncError) -> Int32 {
        for _ in 0..<16 {
            if mkdir(path, 0o755) != 0 {
                let code = errno
                if code == ENOENT {
                    let parent = (contentDirectory as NSString).deletingLastPathComponent
                    throw SyncError(
                        code: .configuration,
                        message: "the parent folder \(parent) of \(contentDirectory) does not exist; create it first")
                }
                if code != EEXIST {
                    throw SyncError.fileSystem(
                        "cannot create the staging folder", path: path, syscall: "mkdir", errno: code)
                }
            }
            let folder = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard folder >= 0 else {
                let code = errno
                if code == ENOENT { continue } // removed by the previous holder just now
                if code == ENOTDIR || code == ELOOP {
                    throw SyncError(
                        code: .configuration,
                        message:
                            "\(path) is in the way of the staging folder of \(contentDirectory) and is not a folder; move it away"
                    )
                }
                throw SyncError.fileSystem("cannot open the staging folder", path: path, syscall: "open", errno: code)
            }
            do {
                try lockExclusively(folder, path: path, contentDirectory: contentDirectory)
            } catch {
                close(folder)
                throw error
            }
            // Locked: but is it still the folder at that path, or one its last holder removed?
            var held = stat()
            var current = stat()
            if fstat(folder, &held) == 0, lstat(path, &current) == 0, held.st_dev == current.st_dev,
                held.st_ino == current.st_ino
            {
                // Made by someone else (anyone who can write the mirror's parent folder), its
                // entries would be theirs to plant: refused. Ours but writable by others (an
                // older run under umask 002): made private.
                if held.st_uid != geteuid() {
                    flock(folder, LOCK_UN)
                    close(folder)
                    throw SyncError(
                        code: .configuration,
                        message:
                            "the staging folder \(path) of \(contentDirectory) belongs to another user (uid \(held.st_uid)); remove it (each update makes it again), or run sync-agent as that user"
                    )
                }
                if held.st_mode & (S_IWGRP | S_IWOTH) != 0 {
                    fchmod(folder, held.st_mode & 0o7755)
                }
                return folder
            }
            flock(folder, LOCK_UN)
            close(folder)
        }
        throw SyncError(
            code: .fileSystem,
            message:
                "cannot lock the staging folder \(path): it keeps being replaced; stop whatever else is updating \(contentDirectory)"
        )
    }
}
