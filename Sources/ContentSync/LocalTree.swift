import Archive
import Foundation

/// The files and folders of a content folder: what the planner starts from.
public struct LocalTree: Sendable, Equatable {
    public var folders: Set<SafeRelativePath>
    public var files: Set<SafeRelativePath>

    public init(folders: Set<SafeRelativePath> = [], files: Set<SafeRelativePath> = []) {
        self.folders = folders
        self.files = files
    }

    /// Reads a folder from disk (blocking: call it from the file-work queue). Symlinks and other
    /// special files are ignored: content-sync never creates them, so they are not content.
    public static func scan(_ directory: String) throws(SyncError) -> LocalTree {
        var tree = LocalTree()
        var pending: [SafeRelativePath] = [.root]
        while let folder = pending.popLast() {
            let absolute = folder.absolute(in: directory)
            guard let handle = opendir(absolute) else {
                let code = errno
                if folder.isRoot && code == ENOENT { return tree }
                throw SyncError.fileSystem("cannot read folder", path: absolute, errno: code)
            }
            defer { closedir(handle) }
            while let entry = readdir(handle) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
                }
                if name == "." || name == ".." { continue }
                guard let child = try? folder.appending(SafeRelativePath(validating: name)) else { continue }
                var info = stat()
                guard lstat(child.absolute(in: directory), &info) == 0 else { continue }
                switch info.st_mode & S_IFMT {
                case S_IFDIR:
                    tree.folders.insert(child)
                    pending.append(child)
                case S_IFREG:
                    tree.files.insert(child)
                default:
                    continue
                }
            }
        }
        return tree
    }
}
