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
        try DirectoryWalker.walk(directory) { entry in
            switch entry {
            case .folder(let path): tree.folders.insert(path)
            case .file(let path, _): tree.files.insert(path)
            case .special, .unsafeName: break
            }
        }
        return tree
    }
}
