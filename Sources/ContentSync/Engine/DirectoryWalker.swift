import Archive
import Foundation

/// The one folder walk: every entry below a folder, without following symlinks. The local tree
/// scan, the publisher's hashing scan and tree deletion all read folders through it.
enum DirectoryWalker {
    /// What one entry is.
    enum Entry {
        case folder(SafeRelativePath)
        /// A regular file, with the identity its `lstat` gave (no second lookup needed).
        case file(SafeRelativePath, FileIdentity)
        /// A symlink, device, fifo or socket.
        case special(SafeRelativePath)
        /// A name the path rules refuse.
        case unsafeName(String, in: SafeRelativePath, SafePathError)
    }

    /// Calls `visit` for every entry below `directory`, parents before children. A missing
    /// `directory` is an empty walk.
    static func walk(_ directory: String, _ visit: (Entry) throws(SyncError) -> Void) throws(SyncError) {
        var rootInfo = stat()
        guard lstat(directory, &rootInfo) == 0 else { return }
        var pending: [SafeRelativePath] = [.root]
        while let folder = pending.popLast() {
            for (name, info) in try entries(in: folder.absolute(in: directory)) {
                let child: SafeRelativePath
                do {
                    child = folder.appending(try SafeRelativePath(validating: name))
                } catch {
                    try visit(.unsafeName(name, in: folder, error))
                    continue
                }
                switch info.st_mode & S_IFMT {
                case S_IFDIR:
                    try visit(.folder(child))
                    pending.append(child)
                case S_IFREG:
                    try visit(.file(child, FileIdentity(info)))
                default:
                    try visit(.special(child))
                }
            }
        }
    }

    /// The names in one folder with their `lstat`, each looked up relative to the open folder
    /// (`fstatat`), not by walking its whole path again. An entry gone meanwhile is skipped.
    private static func entries(in path: String) throws(SyncError) -> [(String, stat)] {
        guard let handle = opendir(path) else {
            throw SyncError.fileSystem("cannot read folder", path: path, errno: errno)
        }
        defer { closedir(handle) }
        let folder = dirfd(handle)
        var result: [(String, stat)] = []
        while let entry = readdir(handle) {
            if DirectoryEntryName.isDotOrDotDot(entry) { continue }
            let cName = DirectoryEntryName.pointer(entry)
            var info = stat()
            guard fstatat(folder, cName, &info, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
            result.append((String(cString: cName), info))
        }
        return result
    }

    /// The names in one folder, without `.` and `..`.
    static func names(in path: String) throws(SyncError) -> [String] {
        guard let handle = opendir(path) else {
            throw SyncError.fileSystem("cannot read folder", path: path, errno: errno)
        }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            if !DirectoryEntryName.isDotOrDotDot(entry) { names.append(String(cString: DirectoryEntryName.pointer(entry))) }
        }
        return names
    }
}
