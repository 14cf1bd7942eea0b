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

    /// Deletes the whole staging area.
    func removeAll() throws(SyncError) {
        try Self.removeTree(root)
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
            if rename(next, retired) != 0 {
                throw SyncError.fileSystem("cannot retire the previous version to", path: retired, errno: errno)
            }
        } else {
            let code = clinux_errno()
            switch code {
            case ENOENT:
                // No content folder yet: a plain rename creates it.
                if rename(next, contentDirectory) != 0 {
                    throw SyncError.fileSystem("cannot move the new version into place at", path: contentDirectory, errno: errno)
                }
            case EINVAL, ENOSYS, EOPNOTSUPP:
                try Self.removeTree(retired)
                if rename(contentDirectory, retired) != 0 {
                    throw SyncError.fileSystem("cannot retire the previous version at", path: contentDirectory, errno: errno)
                }
                if rename(next, contentDirectory) != 0 {
                    let failure = errno
                    _ = rename(retired, contentDirectory)
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
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return (Int64(bitPattern: UInt64(info.st_dev)), Int64(bitPattern: UInt64(info.st_ino)))
    }

    static func exists(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }

    static func makeFolder(_ path: String) throws(SyncError) {
        if mkdir(path, 0o755) != 0 {
            let code = errno
            var info = stat()
            if code == EEXIST, lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { return }
            throw SyncError.fileSystem("cannot create folder", path: path, errno: code)
        }
    }

    /// Deletes a file or a folder tree without following symlinks. Missing is fine.
    static func removeTree(_ path: String) throws(SyncError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        if info.st_mode & S_IFMT != S_IFDIR {
            if unlink(path) != 0 && errno != ENOENT {
                throw SyncError.fileSystem("cannot delete", path: path, errno: errno)
            }
            return
        }
        try removeContents(AT_FDCWD, path, shownAs: path)
        if rmdir(path) != 0 && errno != ENOENT {
            throw SyncError.fileSystem("cannot delete folder", path: path, errno: errno)
        }
    }

    /// Empties the folder `name` (relative to the open folder `parent`), unlinking each entry
    /// relative to its open folder: one short lookup per file, not a walk of its whole path.
    private static func removeContents(_ parent: Int32, _ name: String, shownAs path: String) throws(SyncError) {
        let folder = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard folder >= 0 else {
            if errno == ENOENT { return }
            throw SyncError.fileSystem("cannot read folder", path: path, errno: errno)
        }
        guard let handle = fdopendir(folder) else {
            let code = errno
            close(folder)
            throw SyncError.fileSystem("cannot read folder", path: path, errno: code)
        }
        defer { closedir(handle) }
        var folders: [String] = []
        while let entry = readdir(handle) {
            let type = entry.pointee.d_type
            if DirectoryEntryName.isDotOrDotDot(entry) { continue }
            let name = String(cString: DirectoryEntryName.pointer(entry))
            var isFolder = type == UInt8(DT_DIR)
            if type == UInt8(DT_UNKNOWN) {
                var info = stat()
                isFolder = fstatat(folder, name, &info, AT_SYMLINK_NOFOLLOW) == 0 && info.st_mode & S_IFMT == S_IFDIR
            }
            if isFolder {
                folders.append(name)
            } else if unlinkat(folder, name, 0) != 0 && errno != ENOENT {
                throw SyncError.fileSystem("cannot delete", path: path + "/" + name, errno: errno)
            }
        }
        for name in folders {
            try removeContents(folder, name, shownAs: path + "/" + name)
            if unlinkat(folder, name, AT_REMOVEDIR) != 0 && errno != ENOENT {
                throw SyncError.fileSystem("cannot delete folder", path: path + "/" + name, errno: errno)
            }
        }
    }

    /// Hard-links `source` to `target`, copying when the filesystem refuses links.
    static func linkOrCopy(_ source: String, _ target: String) throws(SyncError) {
        if link(source, target) == 0 { return }
        let code = errno
        if code == EEXIST { return }
        guard code == EXDEV || code == EPERM || code == EMLINK || code == ENOTSUP else {
            throw SyncError.fileSystem("cannot link \(source) to", path: target, errno: code)
        }
        do {
            try FileManager.default.copyItem(atPath: source, toPath: target)
        } catch {
            throw SyncError(code: .fileSystem, message: "cannot copy \(source) to \(target): \(error)", underlying: error)
        }
    }
}
