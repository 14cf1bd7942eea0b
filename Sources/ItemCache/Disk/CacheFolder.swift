import FileKit
import Foundation

/// The cache folder as open descriptors, checked once when the cache opens: the one place
/// that decides what the cache may touch (docs/security.md, "The item cache's folder").
///
/// - The folder is opened once (following a symlink at its own path: the caller chose that
///   path); everything inside is reached relative to that descriptor, never through a symlink.
/// - It must belong to this user (or root) and be writable by no one else (with
///   ``FolderSharing/group``: by this user's group too), as OpenSSH insists on a safe `~/.ssh`.
/// - It is used only when it is empty (then it becomes a cache), holds this cache's
///   `CACHEDIR.TAG`, or is a cache made before the tag existed (its index and nothing of
///   anyone else's); any other folder is refused, so a mistyped `--cache` never touches
///   someone's files.
/// - A new folder is made with mode 0700 (0770 for a group-shared cache), and so are the
///   files in it (0600, 0660).
final class CacheFolder: Sendable {
    /// The folder's path, for messages and for SQLite (which opens by path; the names it opens
    /// are checked not to be symlinks first).
    let path: String
    /// The folder itself.
    let descriptor: Int32
    /// Mode bits for folders and files made inside.
    let folderMode: mode_t
    let fileMode: mode_t

    /// The tag of a cache folder (https://bford.info/cachedir/): backup tools skip a folder
    /// holding it, and it tells this cache that the folder is its own.
    static let tagName = "CACHEDIR.TAG"
    static let tagSignature = "Signature: 8a477f597d28d172789f06886806bc55"
    static let tagText = """
        \(tagSignature)
        # This folder is an item cache of content-sync (ItemCache, sync-agent cache).
        # Its files are made again when deleted. Cache directory tags: https://bford.info/cachedir/

        """
    /// Every name the cache makes in its folder: a folder holding only these (and the index)
    /// is a cache made before the tag.
    static let ownNames: Set<String> = [
        tagName, "index.sqlite", "index.sqlite-wal", "index.sqlite-shm", "index.sqlite-journal", "index.sqlite.damaged",
        "blobs", "cache.lock",
    ]

    /// Opens (or, when `create`, makes) the cache folder at `path` and checks it may be used.
    init(path: String, sharing: FolderSharing, create: Bool) throws(ItemCacheError) {
        self.path = path
        folderMode = sharing == .group ? 0o770 : 0o700
        fileMode = sharing == .group ? 0o660 : 0o600
        var opened = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        var made = false
        if opened < 0 && errno == ENOENT {
            guard create else {
                throw ItemCacheError(
                    code: .folderRefused,
                    message:
                        "there is no item cache at \(path); check the path (sync-agent cache get creates a cache, the other commands only read one)"
                )
            }
            do {
                try FileSystem.makeFolder((path as NSString).deletingLastPathComponent)
            } catch {
                throw Self.failure("cannot make the folder above", path, error)
            }
            if mkdir(path, folderMode) != 0 && errno != EEXIST {
                throw Self.failure(
                    "cannot make the cache folder", path,
                    FileSystemError("cannot make the cache folder", path: path, syscall: "mkdir", errno: errno))
            }
            made = true
            opened = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        }
        guard opened >= 0 else {
            let code = errno
            if code == ENOTDIR {
                throw ItemCacheError(
                    code: .folderRefused, message: "\(path) is a file, not a folder; give the cache a folder of its own"
                )
            }
            throw Self.failure(
                "cannot open the cache folder", path,
                FileSystemError("cannot open the cache folder", path: path, syscall: "open", errno: code))
        }
        // Every stored property is set from here on, so a throw below runs `deinit`, which closes
        // the descriptor: closing it here too closed it twice, the second time as whatever
        // another thread had opened under the same number meanwhile (a cache write got EBADF).
        descriptor = opened
        if made { _ = fchmod(descriptor, folderMode) } // mkdir's mode passed through the umask
        try checkOwnership(sharing: sharing)
        try checkContents(create: create)
    }

    deinit { close(descriptor) }

    /// The folder belongs to this user (or root) and no one else may write in it.
    private func checkOwnership(sharing: FolderSharing) throws(ItemCacheError) {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw Self.failure(
                "cannot inspect the cache folder", path,
                FileSystemError("cannot inspect the cache folder", path: path, syscall: "fstat", errno: errno))
        }
        let user = geteuid()
        if status.st_uid != user && status.st_uid != 0 {
            throw ItemCacheError(
                code: .folderRefused,
                message:
                    "the cache folder \(path) belongs to user \(status.st_uid), not to this user (\(user)); another user could plant files or links in it: use a folder of your own"
            )
        }
        let writableByOthers = status.st_mode & S_IWOTH != 0
        let writableByGroup = status.st_mode & S_IWGRP != 0
        if writableByOthers || (writableByGroup && sharing != .group) {
            let who = writableByOthers ? "every user" : "its group"
            let fix =
                writableByOthers
                ? "chmod o-w \(path)"
                : "chmod g-w \(path), or share it with the group on purpose (CacheConfiguration.sharing = .group)"
            throw ItemCacheError(
                code: .folderRefused,
                message:
                    "the cache folder \(path) is writable by \(who) (mode \(String(status.st_mode & 0o7777, radix: 8))), who could plant files or links in it; \(fix)"
            )
        }
    }

    /// The folder is empty (it becomes a cache, when `create`), tagged as this cache, or an
    /// untagged cache of an earlier version (tagged now); anything else is refused. Without
    /// `create`, a folder with neither a tag nor an index is no cache, and is left untouched.
    private func checkContents(create: Bool) throws(ItemCacheError) {
        let names: [String]
        do {
            names = try entryNames()
        } catch {
            throw Self.failure("cannot list the cache folder", path, error)
        }
        if names.contains(Self.tagName) {
            guard isOurTag() else {
                // A tag this user may not read is a cache of another user's (a root-owned
                // folder), not another program's.
                if faccessat(descriptor, Self.tagName, R_OK, AT_EACCESS) != 0, errno == EACCES {
                    throw ItemCacheError(
                        code: .storage,
                        message:
                            "this user (uid \(geteuid())) may not read \(path)/\(Self.tagName): the cache's files belong to another user; run as that user, or give this user a cache folder of its own"
                    )
                }
                throw ItemCacheError(
                    code: .folderRefused,
                    message: "\(path) holds another program's CACHEDIR.TAG; give the item cache a folder of its own")
            }
            return
        }
        // Another process making the cache at this moment may be writing its tag.
        let foreign = names.filter { !Self.ownNames.contains($0) && !$0.hasPrefix(".\(Self.tagName).") }
        let earlierCache = names.contains("index.sqlite") && foreign.isEmpty && holdsOurIndex()
        if !create && foreign.isEmpty && !earlierCache {
            throw ItemCacheError(
                code: .folderRefused,
                message:
                    "there is no item cache at \(path) (the folder holds no cache index); check the path (sync-agent cache get creates a cache, the other commands only read one)"
            )
        }
        guard foreign.isEmpty && (earlierCache || !names.contains { Self.ownNames.contains($0) }) else {
            let shown = (foreign.isEmpty ? names : foreign).sorted().prefix(3).map {
                "'\(EscapedName.text(Array($0.utf8)))'"
            }
            throw ItemCacheError(
                code: .folderRefused,
                message:
                    "\(path) is not an item cache (it holds \(shown.joined(separator: ", "))\(names.count > 3 ? ", …" : "")); give an empty or new folder, or the folder of an existing cache"
            )
        }
        writeTag()
    }

    /// The names in the folder (not `.` and `..`).
    private func entryNames() throws(FileSystemError) -> [String] {
        try FolderCursor.entries(of: descriptor, shownAs: path).map { String(decoding: $0.name, as: UTF8.self) }
    }

    /// Whether `index.sqlite` is this cache's index (or empty): an SQLite file whose schema,
    /// in its first MiB, creates the `item` table and GRDB's migration table. Someone's own
    /// `index.sqlite` in a folder given as the cache is no earlier cache: opening it would add
    /// the cache's tables to it.
    private func holdsOurIndex() -> Bool {
        let file = openat(descriptor, "index.sqlite", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard file >= 0 else { return false }
        defer { close(file) }
        var status = stat()
        guard fstat(file, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return false }
        if status.st_size == 0 { return true }
        guard
            let head = try? DescriptorIO.read(
                file, count: Int(min(status.st_size, 1 << 20)), path: path + "/index.sqlite")
        else { return false }
        return head.starts(with: Data("SQLite format 3\0".utf8))
            && head.range(of: Data("CREATE TABLE item (".utf8)) != nil
            && head.range(of: Data("grdb_migrations".utf8)) != nil
    }

    private func isOurTag() -> Bool {
        guard let data = readSmallFile(Self.tagName, limit: 4096) else { return false }
        let text = String(decoding: data, as: UTF8.self)
        return text.hasPrefix(Self.tagSignature) && text.contains("content-sync")
    }

    /// Writes the tag; a folder that cannot take it (read-only) still works as a cache.
    private func writeTag() {
        let name = ".\(Self.tagName).\(getpid()).\(UInt32.random(in: 0 ... .max))"
        let file = openat(descriptor, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, fileMode)
        guard file >= 0 else { return }
        let written = Array(Self.tagText.utf8).withUnsafeBytes { DescriptorIO.writeAll(file, $0) }
        close(file)
        if written != nil || renameat(descriptor, name, descriptor, Self.tagName) != 0 {
            unlinkat(descriptor, name, 0)
        }
    }

    /// The bytes of the regular file `name` in the folder when it has at most `limit`; nil
    /// otherwise (missing, a symlink, a folder, a FIFO, too big).
    func readSmallFile(_ name: String, limit: Int) -> Data? {
        let file = openat(descriptor, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard file >= 0 else { return nil }
        defer { close(file) }
        var status = stat()
        guard fstat(file, &status) == 0, status.st_mode & S_IFMT == S_IFREG, Int(status.st_size) <= limit else {
            return nil
        }
        return try? DescriptorIO.read(file, count: Int(status.st_size), path: path + "/" + name)
    }

    /// Makes sure `name` in the folder is not a symlink or anything but a regular file (SQLite
    /// opens its files by path and would follow one): a link or a special file is removed (the
    /// link only, never its target), then the file is created with the cache's mode when
    /// missing, so SQLite's files (and the log and shared-memory files it derives from the
    /// database's mode) are private.
    func prepareFile(_ name: String, create: Bool) throws(ItemCacheError) {
        var status = stat()
        if fstatat(descriptor, name, &status, AT_SYMLINK_NOFOLLOW) == 0 {
            if status.st_mode & S_IFMT == S_IFREG { return }
            if status.st_mode & S_IFMT == S_IFDIR {
                throw ItemCacheError(
                    code: .storage,
                    message:
                        "\(path)/\(name) is a folder where the cache keeps a file; remove it (the cache makes the file again)"
                )
            }
            unlinkat(descriptor, name, 0)
        }
        guard create else { return }
        let file = openat(descriptor, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, fileMode)
        guard file >= 0 else {
            throw Self.failure(
                "cannot create", path + "/" + name,
                FileSystemError("cannot create", path: path + "/" + name, syscall: "openat", errno: errno))
        }
        close(file)
    }

    /// The folder's `cache.lock` (a link in its place removed first), opened with the cache's mode.
    func openLockFile() throws -> RangeLockFile {
        try prepareFile("cache.lock", create: false)
        return try RangeLockFile(in: descriptor, name: "cache.lock", mode: fileMode, path: path + "/cache.lock")
    }

    /// The subfolder `name`, opened without following a symlink and made when missing; a link
    /// or a file in its place is removed first (the link, never its target).
    func openSubfolder(_ name: String) throws(FileSystemError) -> Int32 {
        try Self.openSubfolder(name, in: descriptor, mode: folderMode, shownAs: path + "/" + name)
    }

    /// ``openSubfolder(_:)`` in the open folder `parent`.
    static func openSubfolder(_ name: String, in parent: Int32, mode: mode_t, shownAs: String) throws(FileSystemError)
        -> Int32
    {
        for _ in 0..<4 {
            let opened = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if opened >= 0 { return opened }
            switch errno {
            case ENOENT:
                if mkdirat(parent, name, mode) == 0 {
                    // mkdir's mode passed through the umask: a group-shared cache needs g+w.
                    let made = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                    if made >= 0 {
                        _ = fchmod(made, mode)
                        return made
                    }
                } else if errno != EEXIST {
                    throw FileSystemError("cannot make the folder", path: shownAs, syscall: "mkdirat", errno: errno)
                }
            case ELOOP, ENOTDIR:
                // A symlink or a file where the folder belongs: remove it, never what it names.
                if unlinkat(parent, name, 0) != 0 && errno != ENOENT {
                    throw FileSystemError(
                        "cannot remove the link or file in place of the folder", path: shownAs, syscall: "unlinkat",
                        errno: errno)
                }
            default:
                throw FileSystemError("cannot open the folder", path: shownAs, syscall: "openat", errno: errno)
            }
        }
        throw FileSystemError(
            code: .changedUnderneath, operation: "the folder keeps changing:", path: shownAs,
            remedy: "make sure nothing else writes in the cache folder")
    }

    private static func failure(_ what: String, _ path: String, _ error: any Error) -> ItemCacheError {
        ItemCacheError(code: .storage, message: "\(what) \(path): \(error)", underlying: error)
    }
}

/// Who may share a cache folder.
public enum FolderSharing: Sendable, Equatable {
    /// This user only: a new folder is made with mode 0700 and its files 0600, and a folder
    /// that other users or its group can write is refused. The default.
    case `private`
    /// This user and the members of the folder's group (several service accounts sharing one
    /// cache): folders 0770, files 0660; a folder every user can write is still refused. Every
    /// member of the group is trusted as the owner is.
    case group
}
