import Archive
import Foundation

/// The one folder walk: every entry below a folder, without following symlinks. The local tree
/// scan, the publisher's hashing scan and tree deletion all read folders through it.
enum DirectoryWalker {
    /// What one entry is.
    enum Entry {
        case folder(SafeRelativePath)
        case file(SafeRelativePath)
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
            for name in try names(in: folder.absolute(in: directory)) {
                let child: SafeRelativePath
                do {
                    child = folder.appending(try SafeRelativePath(validating: name))
                } catch {
                    try visit(.unsafeName(name, in: folder, error))
                    continue
                }
                var info = stat()
                guard lstat(child.absolute(in: directory), &info) == 0 else { continue }
                switch info.st_mode & S_IFMT {
                case S_IFDIR:
                    try visit(.folder(child))
                    pending.append(child)
                case S_IFREG:
                    try visit(.file(child))
                default:
                    try visit(.special(child))
                }
            }
        }
    }

    /// The names in one folder, without `.` and `..`.
    static func names(in path: String) throws(SyncError) -> [String] {
        guard let handle = opendir(path) else {
            throw SyncError.fileSystem("cannot read folder", path: path, errno: errno)
        }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
