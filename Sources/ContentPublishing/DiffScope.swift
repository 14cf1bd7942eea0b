import FileKit
import StorageFormat

/// The part of two trees that a diff has to look at: every path whose parent folder differs
/// (``TreeDelta``), and, in place of each topmost shared folder, that folder alone and empty.
///
/// Nothing shared can take part in a change: a folder move pairs folders that exist in one tree
/// only, a file move takes its bytes from a file that left or changed, and a remove or an add
/// names a path that one tree lacks. So the list between the scoped trees is the list between the
/// whole trees, and it replays on the whole old tree to the whole new one, since the shared
/// folders are left as they are. The one rule that looks inside folders it does not change, a
/// folder redownloaded whole, is told which empty stand-ins hold files (``untouched``).
/// `ChangeDifferTests` compares scoped and whole lists on random trees.
struct DiffScope {
    var old: ContentTree
    var new: ContentTree
    /// The stand-ins for shared folders that hold files.
    var untouched: Set<SafeRelativePath>

    init(old: ContentTree, new: ContentTree, delta: TreeDelta) {
        guard !delta.isEmpty else {
            self.old = ContentTree(folders: [], files: [:])
            self.new = self.old
            untouched = []
            return
        }
        var untouched = Set<SafeRelativePath>()
        // A shared parent → its topmost shared ancestor, found once per folder.
        var topmost: [SafeRelativePath: SafeRelativePath] = [:]
        func keptFiles(_ files: [SafeRelativePath: FileFingerprint]) -> [SafeRelativePath: FileFingerprint] {
            var kept: [SafeRelativePath: FileFingerprint] = [:]
            for (path, fingerprint) in files {
                let parent = path.parent
                if delta.differing.contains(parent) {
                    kept[path] = fingerprint
                } else if topmost[parent] == nil {
                    var top = parent // not the root: the root differs when anything does
                    while !delta.differing.contains(top.parent) { top = top.parent }
                    topmost[parent] = top
                    untouched.insert(top)
                }
            }
            return kept
        }
        func keptFolders(_ folders: Set<SafeRelativePath>) -> Set<SafeRelativePath> {
            var kept = untouched
            for folder in folders where delta.differing.contains(folder.parent) { kept.insert(folder) }
            return kept
        }
        let oldFiles = keptFiles(old.files)
        let newFiles = keptFiles(new.files)
        self.old = ContentTree(folders: keptFolders(old.folders), files: oldFiles)
        self.new = ContentTree(folders: keptFolders(new.folders), files: newFiles)
        self.untouched = untouched
    }
}
