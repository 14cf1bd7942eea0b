import Archive
import FileKit
import StorageFormat

/// A ``ContentTree`` checked and indexed for diffing: every folder a deeper path implies is
/// present, and each folder (the root included) lists its direct children.
struct DiffTree {
    let folders: Set<SafeRelativePath>
    let files: [SafeRelativePath: FileFingerprint]
    /// Direct children of each folder, files and folders alike. Leaves have no entry.
    let children: [SafeRelativePath: [SafeRelativePath]]
    /// Folders that stand, empty, for a subtree holding files that both versions share
    /// (``DiffScope``): nothing in them changes.
    let untouched: Set<SafeRelativePath>

    /// `role` ("old" or "new") only names the tree in error messages.
    init(_ tree: ContentTree, role: String, untouched: Set<SafeRelativePath> = []) throws(ChangeDifferError) {
        var folders = FolderSet()
        for folder in tree.folders {
            folders.insert(folder)
        }
        for file in tree.files.keys {
            if file.isRoot {
                throw ChangeDifferError(
                    code: .invalidTree,
                    message: "the \(role) tree names the content root itself as a file; list only paths inside it")
            }
            folders.insertAncestors(of: file)
        }
        let clashes = tree.files.keys.filter(folders.contains).sorted()
        if !clashes.isEmpty {
            throw ChangeDifferError(
                code: .invalidTree,
                message:
                    "the \(role) tree names \(Self.list(clashes)) as both a file and a folder; a path can only be one of them",
                paths: clashes)
        }
        var children: [SafeRelativePath: [SafeRelativePath]] = [:]
        for folder in folders.members { children[folder.parent, default: []].append(folder) }
        for file in tree.files.keys { children[file.parent, default: []].append(file) }
        self.folders = folders.members
        self.files = tree.files
        self.children = children
        self.untouched = untouched
    }

    /// True for a folder with nothing inside it.
    func isEmptyFolder(_ folder: SafeRelativePath) -> Bool {
        children[folder]?.isEmpty ?? true
    }

    /// Up to five quoted paths, for messages: `'a', 'b' and 3 more`.
    static func list(_ paths: [SafeRelativePath]) -> String {
        let shown = paths.prefix(5).map { "'\($0)'" }.joined(separator: ", ")
        return paths.count > 5 ? "\(shown) and \(paths.count - 5) more" : shown
    }
}

extension SafeRelativePath {
    /// True when `self` or one of its ancestors is in `set`.
    func isWithin(anyOf set: Set<SafeRelativePath>) -> Bool {
        guard !set.isEmpty else { return false }
        return set.contains(self) || ancestors.contains(where: set.contains)
    }
}
