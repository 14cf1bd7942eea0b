import CLinux
import FileKit
import Foundation
import StorageFormat
import Synchronization

/// The folder beside the content folder where the next version is built, and the atomic swap
/// that makes it current.
///
/// For content folder `/data/app`, the staging area is `/data/.app.content-sync/`: on the same
/// filesystem (so hard links and renames work) and never inside the content folder, which
/// holds content only. It contains:
/// - `next/`: the version being built;
/// - `partial/`: downloads in progress, named by a hash of their target path so a restarted
///   process finds them again (with `.etag` sidecars for large ones, to resume with `If-Range`);
/// - `archive.zip.part`: the archive of a full restore;
/// - `retired/`: the previous version after a swap: kept as the twin the next replay catches up
///   (``TwinState``), or deleted next when it cannot serve as one (after a restore, say).
///
/// While an update holds the folder (``UpdateLock``, which opened it without following a link
/// and checked it is this user's), every path below goes through the held descriptor,
/// `/proc/self/fd/N/…` (``HeldFolder``): a neighbour who may rename entries of the content
/// folder's parent and swaps the staging folder for a link mid-update has nothing written, read
/// or deleted through it. Copies of one value share the hold.
struct StagingArea: Sendable {
    let contentDirectory: String
    /// The staging folder's path, `<parent>/.<name>.content-sync`: what is locked, and what
    /// messages name.
    let location: String
    private let hold = StagingHold()

    init(contentDirectory: String) {
        let parent = (contentDirectory as NSString).deletingLastPathComponent
        let name = (contentDirectory as NSString).lastPathComponent
        self.contentDirectory = contentDirectory
        self.location = (parent as NSString).appendingPathComponent(".\(name).content-sync")
    }

    /// The path work goes through: the held folder's descriptor name while an update holds it,
    /// else ``location``.
    var root: String { hold.folder?.path ?? location }

    /// Work goes through `folder` (the lock's, opened at ``location``) until ``release()``.
    func hold(_ folder: HeldFolder) {
        hold.folder = folder
    }

    /// Work goes by ``location`` again (the lock is being let go).
    func release() {
        hold.folder = nil
    }

    /// `text` with the held folder's descriptor name written as ``location``.
    func shown(_ text: String) -> String {
        hold.folder?.shown(text) ?? text
    }

    /// `error` naming the staging folder by ``location``, its underlying file error too.
    func shown(_ error: SyncError) -> SyncError {
        guard let folder = hold.folder else { return error }
        var shown = error
        shown.message = folder.shown(error.message)
        shown.underlying = error.underlying.map { folder.shown($0) }
        return shown
    }

    var next: String { root + "/next" }
    var partial: String { root + "/partial" }
    var retired: String { root + "/retired" }
    /// The twin a restore links beside its tree check (``TwinSeed``), `retired/` after the swap.
    var seed: String { root + "/seed" }
    /// Where the previous version goes when a seed takes `retired/`: cleared with the leftovers.
    var discarded: String { root + "/discarded" }
    var archive: String { root + "/archive.zip.part" }

    /// Whether the staging root is a folder (not followed through a link): the content folder
    /// was synced here.
    func exists() -> Bool {
        FileSystem.status(of: location).map { $0.st_mode & S_IFMT == S_IFDIR } ?? false
    }

    /// Whether the staging root holds an update's work, made by this user: the twin an update
    /// kept, downloads in progress, a version being built. An update ran here. Unlike
    /// ``exists()``, this holds under the update lock, which makes the root empty and removes it
    /// again when it stays so. Entries of another user (a neighbour who may write the parent
    /// folder) do not count.
    func holdsWork() -> Bool {
        let user = geteuid()
        guard let info = FileSystem.status(of: location), info.st_mode & S_IFMT == S_IFDIR, info.st_uid == user else {
            return false
        }
        return [retired, partial, next, seed].contains { path in
            FileSystem.status(of: path).map { $0.st_mode & S_IFMT == S_IFDIR && $0.st_uid == user } ?? false
        }
    }

    /// The partial-download file for `path`, stable across restarts.
    func partialFile(for path: SafeRelativePath) -> String {
        var hash = FNV1a64()
        hash.combine(path.string)
        return partial + "/" + String(hash.value, radix: 16) + ".part"
    }

    /// Creates the staging root and its `partial/` folder. Anything else at `partial` (a link,
    /// a file, a FIFO: the staging area is the engine's) is removed first, never followed: it
    /// once failed every replay with "File exists" until a reset.
    func prepare() throws(FileSystemError) {
        if hold.folder == nil { try FileSystem.makeFolder(root) }
        if let info = FileSystem.status(of: partial), info.st_mode & S_IFMT != S_IFDIR {
            try FileSystem.removeTree(partial)
        }
        try FileSystem.makeFolder(partial)
    }

    /// Empties `next/` (and, with `downloads`, the partial downloads) for a new plan.
    func resetNext(includingDownloads downloads: Bool) throws(FileSystemError) {
        try FileSystem.removeTree(next)
        try FileSystem.removeTree(retired)
        if downloads {
            try FileSystem.removeTree(partial)
            try FileSystem.removeTree(archive)
        }
        try prepare()
        try FileSystem.makeFolder(next)
    }

    /// Deletes the downloads kept to resume (`partial/`, the archive's part): for a full disk,
    /// so that the state database can record the failure. The next attempt downloads them again.
    func dropResumableDownloads() throws(FileSystemError) {
        try FileSystem.removeTree(partial)
        try FileSystem.removeTree(archive)
    }

    /// Empties the staging area. The folder itself stays while an update holds it: its lock
    /// (``UpdateLock``) lives on it, and the lock removes it when released.
    func clear() throws(FileSystemError) {
        try TreeRemoval.removeContents(of: root)
    }

    /// Whether the staging area holds anything but the folder `twin` (leftovers of an
    /// interrupted or failed update).
    func hasLeftovers(keeping twin: (device: Int64, inode: Int64)?) -> Bool {
        guard let entries = try? FolderCursor(at: root)?.entries() else { return false }
        return entries.contains { !Self.isFolder($0.info, twin) }
    }

    /// Empties the staging area but for the folder `twin` (device and inode, at the top level),
    /// which stays for the next replay to catch up.
    func clearLeftovers(keeping twin: (device: Int64, inode: Int64)?) throws(FileSystemError) {
        guard let twin else { return try clear() }
        guard let entries = try FolderCursor(at: root)?.entries() else { return }
        for entry in entries where !Self.isFolder(entry.info, twin) {
            try FileSystem.removeTree(root + "/" + String(decoding: entry.name, as: UTF8.self))
        }
    }

    /// Where the twin `identity` (device and inode, see ``TwinState``) is: `retired/`, or `next/`
    /// where a catch-up was stopped part-way; nil when neither is that folder.
    func location(ofTwin identity: (device: Int64, inode: Int64)) -> String? {
        [retired, next].first { path in FileSystem.status(of: path).map { Self.isFolder($0, identity) } ?? false }
    }

    /// After a restore's swap, makes the seed `retired/`, the twin (the previous version, if any,
    /// moved to `discarded/` to be cleared with the leftovers); returns its identity, or nil
    /// when there is no seed folder to adopt.
    func adoptSeed() throws(FileSystemError) -> (device: Int64, inode: Int64)? {
        guard FileSystem.status(of: seed).map({ $0.st_mode & S_IFMT == S_IFDIR }) ?? false else { return nil }
        if FileSystem.status(of: retired) != nil {
            try FileSystem.removeTree(discarded)
            try FileSystem.rename(retired, to: discarded, operation: "cannot move the previous version to")
        }
        try FileSystem.rename(seed, to: retired, operation: "cannot move the restore's twin to")
        return FileSystem.identity(of: retired)
    }

    /// Whether `info` is a folder's (not a symlink's) with the device and inode `identity`.
    static func isFolder(_ info: stat, _ identity: (device: Int64, inode: Int64)?) -> Bool {
        guard let identity, info.st_mode & S_IFMT == S_IFDIR else { return false }
        return Int64(bitPattern: UInt64(info.st_dev)) == identity.device
            && Int64(bitPattern: UInt64(info.st_ino)) == identity.inode
    }

    /// Makes `next/` the content folder in one step, flushing the filesystem first.
    ///
    /// Durability comes here, once per version: `syncfs` of the staging filesystem, then the
    /// swap, then an fsync of the content folder's parent. With an existing content folder the
    /// swap is `renameat2(RENAME_EXCHANGE)`: readers see the old tree or the new one, never a mix.
    /// Where the filesystem lacks it, two renames leave a window of microseconds with no folder.
    ///
    /// The disk's answer is checked at each flush. If `syncfs` fails nothing has moved; if the
    /// fsync after the swap fails, the swap is undone so the previous version is the one in place,
    /// and the error is thrown: the version is never recorded as switched on a flush the disk
    /// refused. (The plan stays marked as switching with the staged tree in `next/`, so the next
    /// update redoes the switch, see ``VersionSwitch/recoverInterrupted()``.)
    ///
    /// `flushing` lists what the staging wrote (a small catch-up of the twin): those files and
    /// folders are flushed the cheaper way, one `syncfs` while the system holds little dirty data
    /// and else each on its own (``DiskFlush/written(_:holding:)``). Nil: `syncfs`.
    func swapIn(flushing: [String]? = nil) throws(FileSystemError) {
        if let flushing {
            try DiskFlush.written(flushing, holding: next)
        } else {
            try DiskFlush.filesystem(holding: next)
        }
        let parent = (contentDirectory as NSString).deletingLastPathComponent
        /// fsyncs the parent after a swap; when the disk refuses, `undo` puts the previous
        /// version back before the error goes up.
        func flushParent(orUndo undo: () -> Void) throws(FileSystemError) {
            do {
                try DiskFlush.folder(parent)
            } catch {
                undo()
                throw error
            }
        }
        if clinux_rename_exchange(AT_FDCWD, next, AT_FDCWD, contentDirectory) == 0 {
            // `next` now holds the previous version.
            try flushParent { _ = clinux_rename_exchange(AT_FDCWD, next, AT_FDCWD, contentDirectory) }
            try FileSystem.removeTree(retired)
            if Glibc.rename(next, retired) != 0 {
                throw FileSystemError(
                    "cannot retire the previous version to", path: retired, syscall: "rename", errno: errno)
            }
            return
        }
        let code = clinux_errno()
        switch code {
        case ENOENT:
            // No content folder yet: a plain rename creates it.
            if Glibc.rename(next, contentDirectory) != 0 {
                throw FileSystemError(
                    "cannot move the new version into place at", path: contentDirectory, syscall: "rename",
                    errno: errno)
            }
            try flushParent { _ = Glibc.rename(contentDirectory, next) }
        case EINVAL, ENOSYS, EOPNOTSUPP:
            try FileSystem.removeTree(retired)
            if Glibc.rename(contentDirectory, retired) != 0 {
                throw FileSystemError(
                    "cannot retire the previous version at", path: contentDirectory, syscall: "rename", errno: errno
                )
            }
            if Glibc.rename(next, contentDirectory) != 0 {
                let failure = errno
                _ = Glibc.rename(retired, contentDirectory)
                throw FileSystemError(
                    "cannot move the new version into place at", path: contentDirectory, syscall: "rename",
                    errno: failure)
            }
            try flushParent {
                if Glibc.rename(contentDirectory, next) == 0 { _ = Glibc.rename(retired, contentDirectory) }
            }
        default:
            throw FileSystemError(
                "cannot swap in the new version at", path: contentDirectory, syscall: "renameat2", errno: code)
        }
    }
}

/// The folder a ``StagingArea``'s copies work through while an update holds it.
private final class StagingHold: Sendable {
    private let held = Mutex<HeldFolder?>(nil)

    var folder: HeldFolder? {
        get { held.withLock { $0 } }
        set { held.withLock { $0 = newValue } }
    }
}
