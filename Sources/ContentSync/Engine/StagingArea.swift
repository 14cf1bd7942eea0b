import Archive
import CLinux
import Foundation

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
/// - `retired/`: the previous version right after a swap, deleted next.
struct StagingArea: Sendable {
    let contentDirectory: String
    let root: String

    init(contentDirectory: String) {
        let parent = (contentDirectory as NSString).deletingLastPathComponent
        let name = (contentDirectory as NSString).lastPathComponent
        self.contentDirectory = contentDirectory
        self.root = (parent as NSString).appendingPathComponent(".\(name).content-sync")
    }

    var next: String { root + "/next" }
    var partial: String { root + "/partial" }
    var retired: String { root + "/retired" }
    var archive: String { root + "/archive.zip.part" }

    /// The partial-download file for `path`, stable across restarts.
    func partialFile(for path: SafeRelativePath) -> String {
        var hash = FNV1a64()
        hash.combine(path.string)
        return partial + "/" + String(hash.value, radix: 16) + ".part"
    }

    /// Creates the staging root and its `partial/` folder.
    func prepare() throws(SyncError) {
        try Self.makeFolder(root)
        try Self.makeFolder(partial)
    }

    /// Empties `next/` (and, with `downloads`, the partial downloads) for a new plan.
    func resetNext(includingDownloads downloads: Bool) throws(SyncError) {
        try Self.removeTree(next)
        try Self.removeTree(retired)
        if downloads {
            try Self.removeTree(partial)
            try Self.removeTree(archive)
        }
        try prepare()
        try Self.makeFolder(next)
    }

    /// Empties the staging area. The folder itself stays while an update holds it: its lock
    /// (``UpdateLock``) lives on it, and the lock removes it when released.
    func clear() throws(SyncError) {
        try TreeRemoval.removeContents(of: root)
    }

    /// Whether the staging area holds anything (leftovers of an interrupted or failed update).
    var hasContents: Bool {
        guard let names = try? FolderCursor(at: root)?.entries() else { return false }
        return !names.isEmpty
    }

    /// Makes `next/` the content folder in one step, flushing the filesystem first.
    ///
    /// Durability comes here, once per version: `syncfs` of the staging filesystem, then the
    /// swap, then an fsync of the parent folder. With an existing content folder the swap is
    /// `renameat2(RENAME_EXCHANGE)`: readers see the old tree or the new one, never a mix. Where
    /// the filesystem lacks it, two renames leave a window of microseconds with no folder.
    func swapIn() throws(SyncError) {
        let fd = open(next, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd >= 0 {
            _ = clinux_syncfs(fd)
            close(fd)
        }
        if clinux_rename_exchange(AT_FDCWD, next, AT_FDCWD, contentDirectory) == 0 {
            // `next` now holds the previous version.
            try Self.removeTree(retired)
            if Glibc.rename(next, retired) != 0 {
                throw SyncError.fileSystem("cannot retire the previous version to", path: retired, errno: errno)
            }
        } else {
            let code = clinux_errno()
            switch code {
            case ENOENT:
                // No content folder yet: a plain rename creates it.
                if Glibc.rename(next, contentDirectory) != 0 {
                    throw SyncError.fileSystem("cannot move the new version into place at", path: contentDirectory, errno: errno)
                }
            case EINVAL, ENOSYS, EOPNOTSUPP:
                try Self.removeTree(retired)
                if Glibc.rename(contentDirectory, retired) != 0 {
                    throw SyncError.fileSystem("cannot retire the previous version at", path: contentDirectory, errno: errno)
                }
                if Glibc.rename(next, contentDirectory) != 0 {
                    let failure = errno
                    _ = Glibc.rename(retired, contentDirectory)
                    throw SyncError.fileSystem("cannot move the new version into place at", path: contentDirectory, errno: failure)
                }
            default:
                throw SyncError.fileSystem("cannot swap in the new version at", path: contentDirectory, errno: code)
            }
        }
        let parent = (contentDirectory as NSString).deletingLastPathComponent
        let parentFD = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if parentFD >= 0 {
            _ = fsync(parentFD)
            close(parentFD)
        }
    }

    /// Device and inode of `path`, or nil when it does not exist.
    static func identity(of path: String) -> (device: Int64, inode: Int64)? {
        guard let info = try? LongPath.at(path, { folder, rest throws(SyncError) -> stat? in
            var info = stat()
            return fstatat(folder, rest, &info, AT_SYMLINK_NOFOLLOW) == 0 ? info : nil
        }) ?? nil else { return nil }
        return (Int64(bitPattern: UInt64(info.st_dev)), Int64(bitPattern: UInt64(info.st_ino)))
    }

    static func exists(_ path: String) -> Bool {
        identity(of: path) != nil
    }

    /// Creates the folder `path`; an existing folder is fine, anything else in the way is an error.
    static func makeFolder(_ path: String) throws(SyncError) {
        try LongPath.at(path) { folder, rest throws(SyncError) in
            if mkdirat(folder, rest, 0o755) != 0 {
                let code = errno
                var info = stat()
                if code == EEXIST, fstatat(folder, rest, &info, AT_SYMLINK_NOFOLLOW) == 0, info.st_mode & S_IFMT == S_IFDIR { return }
                throw SyncError.fileSystem("cannot create folder", path: path, errno: code)
            }
        }
    }

    /// Deletes a file or a folder tree without following symlinks. Missing is fine.
    static func removeTree(_ path: String) throws(SyncError) {
        try TreeRemoval.remove(path)
    }

    /// Renames `source` to `target` (both may be longer than the kernel takes in one piece).
    static func rename(_ source: String, to target: String, what: String) throws(SyncError) {
        try LongPath.at(source) { sourceFolder, sourceRest throws(SyncError) in
            try LongPath.at(target) { targetFolder, targetRest throws(SyncError) in
                if renameat(sourceFolder, sourceRest, targetFolder, targetRest) != 0 {
                    throw SyncError.fileSystem(what, path: target, errno: errno)
                }
            }
        }
    }

    /// Hard-links `source` to `target`, copying when the filesystem refuses links. An existing
    /// target is kept (a resumed run linked it already).
    static func linkOrCopy(_ source: String, _ target: String) throws(SyncError) {
        try LongPath.at(source) { sourceFolder, sourceRest throws(SyncError) in
            try LongPath.at(target) { targetFolder, targetRest throws(SyncError) in
                if linkat(sourceFolder, sourceRest, targetFolder, targetRest, 0) == 0 { return }
                let code = errno
                if code == EEXIST { return }
                guard code == EXDEV || code == EPERM || code == EMLINK || code == ENOTSUP else {
                    throw SyncError.fileSystem("cannot link \(source) to", path: target, errno: code)
                }
                try copy(sourceFolder, sourceRest, to: targetFolder, targetRest, shownAs: (source, target))
            }
        }
    }

    /// Copies a regular file's bytes (mode 0644), for filesystems without hard links.
    private static func copy(_ sourceFolder: Int32, _ source: String, to targetFolder: Int32, _ target: String,
                             shownAs names: (source: String, target: String)) throws(SyncError) {
        let input = openat(sourceFolder, source, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard input >= 0 else { throw SyncError.fileSystem("cannot copy", path: names.source, errno: errno) }
        defer { close(input) }
        let output = openat(targetFolder, target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard output >= 0 else {
            if errno == EEXIST { return }
            throw SyncError.fileSystem("cannot copy \(names.source) to", path: names.target, errno: errno)
        }
        defer { close(output) }
        do {
            try FileCopy.copy(from: input, to: output, shownFrom: names.source, shownTo: names.target)
        } catch {
            unlinkat(targetFolder, target, 0)
            throw error
        }
    }
}
