import FileKit
import StorageFormat

/// What turns a local tree into the published one: the pure half of a repair, so its order and
/// its handling of kind changes are tested without I/O.
struct RepairPlan: Equatable {
    /// Entries that cannot be content, to delete by their raw names.
    var intruders: [Intruder]
    /// Files and folders the version does not have at that path with that kind, deepest first;
    /// none lies inside another (a folder's removal takes its contents).
    var removals: [SafeRelativePath]
    /// Folders to create, parents first.
    var folders: [SafeRelativePath]
    /// Files to fetch (missing, different, or where something else stood), with their fingerprints.
    var downloads: [(SafeRelativePath, FileFingerprint)]

    init(staged: ContentTree, intruders: [Intruder], manifest: ContentTree) {
        self.intruders = intruders
        var doomed = Set<SafeRelativePath>()
        for path in staged.files.keys where manifest.files[path] == nil { doomed.insert(path) }
        for folder in staged.folders where !manifest.folders.contains(folder) { doomed.insert(folder) }
        // Only the outermost of each doomed subtree: deleting it takes the rest. Sorted, a
        // subtree's paths follow its root, so one comparison each finds them (no ancestor
        // lists: a tree can be 1,800 levels deep).
        var outermost: [SafeRelativePath] = []
        for path in doomed.sorted() where !(outermost.last.map(path.isWithin) ?? false) { outermost.append(path) }
        removals = outermost.reversed()
        folders = manifest.folders.subtracting(staged.folders).sorted()
        downloads = manifest.files.sorted(by: { $0.key < $1.key }).filter { staged.files[$0.key] != $0.value }
    }

    /// Paths repaired, for the report.
    var count: Int { intruders.count + removals.count + folders.count + downloads.count }

    static func == (lhs: RepairPlan, rhs: RepairPlan) -> Bool {
        lhs.intruders == rhs.intruders && lhs.removals == rhs.removals && lhs.folders == rhs.folders
            && lhs.downloads.map(\.0) == rhs.downloads.map(\.0) && lhs.downloads.map(\.1) == rhs.downloads.map(\.1)
    }
}
