import FileKit
import Foundation
import Glibc
import StorageFormat

/// What a publish keeps for the next one, so that a publish costs what changed and one stat pass:
/// `<storage>/.content-sync-publish-base/`, beside the work folder and like it never served.
/// - `retired/`: the version before the published one, its unchanged files hard links to the
///   published ones (after a publish over nothing, a hard-linked twin of the published tree). The next publish moves it into its work folder and catches it up to the
///   new `--content` (``ContentSnapshot``), instead of linking every file into an empty folder
///   and deleting the previous tree afterwards.
/// - `index`: ``PublishIndex`` of the published `RXCacheContent/`;
/// - `.gitignore` holding `*`: git leaves the whole folder out of a storage kept in a repository
///   (a GitHub raw folder) without the operator adding anything.
///
/// Both are shortcuts and nothing else: a publish checks everything it takes from them (the
/// retired tree entry by entry, the index record by stamp), and without them it does what it
/// always did. A publish killed anywhere loses them at worst.
///
/// Each use holds the folder open (``HeldFolder``) and works through its descriptor: the folder
/// swapped for a link after the check (a neighbour's rename) has nothing read, written or deleted
/// through the link.
struct PublishBase {
    static let folderName = ".content-sync-publish-base"
    /// Ignores the folder, itself included.
    static let gitignore = "# Kept by sync-agent publish for its next run; never published.\n*\n"

    let storage: String

    var root: String { storage + "/" + Self.folderName }
    var retired: String { root + "/retired" }

    /// The folder, held; nil when it is missing, is not a folder itself, or is another user's
    /// (a neighbour who made it could rewrite the index and the retired tree the next publish
    /// takes as shortcuts: it is made again). Callers keep the value alive
    /// (`withExtendedLifetime`) until their last path through it is used: its descriptor closes
    /// with it.
    private func held() -> HeldFolder? {
        guard let folder = (try? HeldFolder(opening: Self.folderName, in: storage)) ?? nil,
            folder.owner == geteuid()
        else { return nil }
        return folder
    }

    /// The index, or an empty one when there is none or it cannot be trusted whole.
    func loadIndex() -> PublishIndex {
        guard let folder = held() else { return PublishIndex() }
        defer { withExtendedLifetime(folder) {} }
        guard let data = Self.regularFileContents(folder.path + "/index"), let index = PublishIndex.decode(data) else {
            return PublishIndex()
        }
        return index
    }

    /// Moves the retired tree to `destination` (which must not exist); false when there is no
    /// retired tree to take (none, or not a plain folder: then it is deleted).
    func takeRetired(to destination: String) -> Bool {
        guard let folder = held() else { return false }
        defer { withExtendedLifetime(folder) {} }
        let retired = folder.path + "/retired"
        var info = stat()
        guard lstat(retired, &info) == 0 else { return false }
        guard info.st_mode & S_IFMT == S_IFDIR, rename(retired, destination) == 0 else {
            try? TreeRemoval.remove(retired)
            return false
        }
        return true
    }

    /// Keeps the tree at `previous` (the version just replaced) as the retired tree, and writes
    /// `index`. Best effort: what fails is only a shortcut missed by the next publish.
    func keep(previous: String?, index: PublishIndex) {
        if held() == nil {
            try? TreeRemoval.remove(root)
            guard mkdir(root, 0o755) == 0 else { return }
        }
        guard let folder = held() else { return }
        defer { withExtendedLifetime(folder) {} }
        let root = folder.path
        // Nothing else belongs here (a temporary index of a run killed while writing it).
        for name in (try? DirectoryWalker.names(in: root)) ?? []
        where !["retired", "index", ".gitignore"].contains(name) {
            try? TreeRemoval.remove(root + "/" + name)
        }
        if !FileSystem.exists(root + "/.gitignore") {
            try? AtomicFile.write(Array(Self.gitignore.utf8), to: root + "/.gitignore", durability: .none)
        }
        // The index first: a retired tree without the index that goes with it is still checked
        // entry by entry, an index is checked record by record.
        unlink(root + "/index")
        try? AtomicFile.write(index.encoded(), to: root + "/index", durability: .none)
        try? TreeRemoval.remove(root + "/retired")
        if let previous, FileSystem.exists(previous) { _ = rename(previous, root + "/retired") }
    }

    /// Keeps `tree`, the snapshot of a publish that failed, as the retired tree when there is none
    /// (that publish took it): caught up part of the way or not, the next catch-up checks it entry
    /// by entry, and it spares that publish linking every file again, which would also move every
    /// published file's status-change time and so cost it the index. Best effort.
    func giveBack(_ tree: String) {
        guard let folder = held() else { return }
        defer { withExtendedLifetime(folder) {} }
        let retired = folder.path + "/retired"
        var info = stat()
        guard isOurFolder(tree), lstat(retired, &info) != 0, errno == ENOENT else { return }
        _ = rename(tree, retired)
    }

    /// Makes `destination` (which must not exist) a tree of the folders of `source` with a hard
    /// link to each of its regular files. Names are opened one at a time below open folders,
    /// never following a symlink; anything else than a folder or a regular file is left out (the
    /// catch-up that uses the twin checks every entry anyway).
    static func linkTree(_ source: String, to destination: String) throws(FileSystemError) {
        guard mkdir(destination, 0o755) == 0 else {
            throw FileSystemError("cannot create the twin folder", path: destination, syscall: "mkdir", errno: errno)
        }
        guard var from = try FolderCursor(at: source), var to = try FolderCursor(at: destination) else {
            throw FileSystemError("cannot read folder", path: source, syscall: "openat", errno: ENOENT)
        }
        func linkEntries(_ from: borrowing FolderCursor, _ to: borrowing FolderCursor) throws(FileSystemError)
            -> [[UInt8]]
        {
            var folders: [[UInt8]] = []
            for entry in try from.entries() {
                switch entry.info.st_mode & S_IFMT {
                case S_IFDIR:
                    guard entry.name.withCString({ mkdirat(to.descriptor, $0, 0o755) }) == 0 else {
                        throw FileSystemError(
                            "cannot create folder '\(EscapedName.text(entry.name))' in", path: to.shownAs,
                            syscall: "mkdirat", errno: errno)
                    }
                    folders.append(entry.name)
                case S_IFREG:
                    guard entry.name.withCString({ linkat(from.descriptor, $0, to.descriptor, $0, 0) }) == 0 else {
                        throw FileSystemError(
                            "cannot link '\(EscapedName.text(entry.name))' into", path: to.shownAs, syscall: "linkat",
                            errno: errno)
                    }
                default:
                    continue
                }
            }
            return folders
        }
        var levels = [try linkEntries(from, to)]
        while let top = levels.indices.last {
            guard let name = levels[top].popLast() else {
                levels.removeLast()
                if !levels.isEmpty {
                    try from.ascend()
                    try to.ascend()
                }
                continue
            }
            guard try from.descend(into: name) else { continue } // gone meanwhile: left out
            guard try to.descend(into: name) else {
                throw FileSystemError(
                    "cannot enter the twin's folder '\(EscapedName.text(name))' in", path: destination,
                    syscall: "openat",
                    errno: ENOENT)
            }
            levels.append(try linkEntries(from, to))
        }
    }

    /// Deletes everything kept (a publish over no previous version).
    func remove() {
        try? TreeRemoval.remove(root)
    }

    /// Whether `path` is a folder itself, not a symlink to one or anything else.
    private func isOurFolder(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR
    }

    /// The bytes of the regular file at `path` (never following a symlink), at most 1 GiB.
    private static func regularFileContents(_ path: String) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_size < 1 << 30 else {
            return nil
        }
        guard let data = try? DescriptorIO.read(descriptor, count: Int(info.st_size), path: path),
            data.count == Int(info.st_size)
        else { return nil }
        return Array(data)
    }
}
