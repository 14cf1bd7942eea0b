import FileKit
import Foundation
import StorageFormat

extension LocalTree {
    /// Reads a folder from disk (blocking: call it from the file-work queue). Symlinks, other
    /// special files and entries with names no content path can have are not content
    /// (content-sync never creates them): they go to ``intruders``, never into a plan.
    /// `file` is told each regular file's identity as it is found.
    static func scan(
        _ directory: String, file: (SafeRelativePath, FileIdentity) -> Void = { _, _ in }
    ) throws(FileSystemError) -> LocalTree {
        var tree = LocalTree()
        try DirectoryWalker.walk(directory) { entry in
            switch entry {
            case .folder(let path): tree.folders.insert(path)
            case .file(let path, let identity):
                tree.files.insert(path)
                file(path, identity)
            case .special(let path, let mode):
                tree.intruders.append(
                    Intruder(
                        folder: path.parent, name: Array(path.lastComponent!.utf8), kind: Intruder.kind(ofMode: mode)))
            case .unsafeName(let name, let folder, let error):
                tree.intruders.append(
                    Intruder(folder: folder, name: Array(name.utf8), kind: .unsafeName, detail: "\(error)"))
            case .undecodableName(let name, let folder):
                tree.intruders.append(Intruder(folder: folder, name: name, kind: .undecodableName))
            }
        }
        return tree
    }
}
