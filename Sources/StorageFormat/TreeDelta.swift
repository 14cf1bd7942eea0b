import FileKit

/// Where two content trees differ, by folder: every folder whose subtree is not the same in both
/// (a file added, removed or with other bytes, a folder added or removed, anywhere below it),
/// with all its ancestors and the root.
///
/// A folder outside ``differing`` holds exactly the same names and bytes in both trees, so work
/// done on it for one tree holds for the other: a publish diffs, digests and archives only what
/// lies inside ``differing``, and a 1-file change over 100,000 files costs one pass of lookups
/// instead of a diff of every path.
public struct TreeDelta: Sendable, Equatable {
    /// The folders (the root included) that differ; closed under ancestors. Empty when the trees
    /// are equal.
    public let differing: Set<SafeRelativePath>

    /// The delta from `old` to `new`: one lookup per file of each tree.
    public init(from old: ContentTree, to new: ContentTree) {
        var differing = Set<SafeRelativePath>()
        // Marks `folder` and its ancestors. The set stays closed under ancestors, so the climb
        // stops at the first folder already in it.
        func mark(_ folder: SafeRelativePath) {
            var current = folder
            while differing.insert(current).inserted && !current.isRoot { current = current.parent }
        }
        for (path, fingerprint) in new.files where old.files[path] != fingerprint { mark(path.parent) }
        for path in old.files.keys where new.files[path] == nil { mark(path.parent) }
        // A folder in one tree only differs itself, so that nothing below it is taken as shared.
        for folder in new.folders where !old.folders.contains(folder) { mark(folder) }
        for folder in old.folders where !new.folders.contains(folder) { mark(folder) }
        self.differing = differing
    }

    /// True when the trees are equal.
    public var isEmpty: Bool { differing.isEmpty }

    /// True when `folder`'s subtree is the same in both trees (and `folder` is in both, or in neither).
    public func isShared(_ folder: SafeRelativePath) -> Bool { !differing.contains(folder) }
}
