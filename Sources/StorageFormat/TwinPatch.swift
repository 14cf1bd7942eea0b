import FileKit
import Foundation

/// Catching up a *twin*: a tree that equals the current content everywhere but at a known set of
/// paths (the previous version, kept after a switch), made equal to a plan's new version by
/// touching those paths only.
///
/// A path in the twin's *dirty set* means "here the twin may differ from the current content"; a
/// folder in it means its whole subtree may differ. The set for the next version is the old set
/// plus ``SyncPlan/changedPaths(from:)``, so patching costs what changed in the last two versions,
/// not the size of the tree.
public struct TwinPatch: Sendable, Equatable {
    /// Paths to remove from the twin first, whatever is there (a file, a folder and all below).
    public var removals: [SafeRelativePath] = []
    /// Folders to create next, parents before children.
    public var folders: [SafeRelativePath] = []
    /// Files to hard-link from the current content.
    public var links: [SyncPlan.Reuse] = []
    /// Files to download.
    public var downloads: [SafeRelativePath] = []

    /// An empty patch: nothing to touch.
    public init() {}

    /// Every path the patch touches, for a count in logs and tests.
    public var count: Int { removals.count + folders.count + links.count + downloads.count }

    /// Every path the patch removes, creates, links or downloads.
    public var paths: [SafeRelativePath] { removals + folders + links.map(\.target) + downloads }

    /// What the new version has at a dirty path.
    package enum Placement {
        /// A folder: rebuilt whole, with everything the new version has under it.
        case folder
        /// A file with the bytes of this path of the current content.
        case link(from: SafeRelativePath)
        case download
        /// Nothing: the path, and all below it, is only removed.
        case nothing
    }

    /// The patch's steps for `dirty` (each path once, in order; a path below one that is rebuilt
    /// or removed whole is covered by it): every path is removed, then placed again as
    /// `placement` says. The folders to rebuild come back apart: the caller adds what the new
    /// version has under each (``folders``, ``links``, ``downloads``, the folder itself
    /// included), then calls ``sortPlacements()``.
    package static func removing(
        _ dirty: [SafeRelativePath], placement: (SafeRelativePath) -> Placement
    ) -> (patch: TwinPatch, rebuilt: [SafeRelativePath]) {
        var patch = TwinPatch()
        var rebuilt: [SafeRelativePath] = []
        var covered: SafeRelativePath?
        for path in Set(dirty).sorted() {
            if let covered, path.isWithin(covered) { continue }
            patch.removals.append(path)
            switch placement(path) {
            case .folder:
                rebuilt.append(path)
                covered = path
            case .link(let source): patch.links.append(SyncPlan.Reuse(target: path, source: source))
            case .download: patch.downloads.append(path)
            case .nothing: covered = path
            }
        }
        return (patch, rebuilt)
    }

    /// Puts the folders (parents first), links and downloads in path order.
    package mutating func sortPlacements() {
        folders.sort()
        links.sort { $0.target < $1.target }
        downloads.sort()
    }
}

extension SyncPlan {
    /// The paths where the version this plan builds differs from `local` (the current content):
    /// files downloaded, linked from another path, or gone; folders new or gone. Sorted. Nil when
    /// `local` holds intruders (entries a plan cannot name): a twin of it could not be caught up
    /// by path.
    public func changedPaths(from local: LocalTree) -> [SafeRelativePath]? {
        guard local.intruders.isEmpty else { return nil }
        var changed = Set<SafeRelativePath>()
        var unchanged = Set<SafeRelativePath>()
        for reuse in reused {
            if reuse.source == reuse.target { unchanged.insert(reuse.target) } else { changed.insert(reuse.target) }
        }
        changed.formUnion(downloads)
        for file in local.files where !unchanged.contains(file) { changed.insert(file) }
        let newFolders = Set(folders)
        for folder in folders where !local.folders.contains(folder) { changed.insert(folder) }
        for folder in local.folders where !newFolders.contains(folder) { changed.insert(folder) }
        return changed.sorted()
    }

    /// The steps that make a twin equal to the version this plan builds, given the twin equals
    /// the current content outside `dirty` (see ``TwinPatch``).
    public func twinPatch(dirty: [SafeRelativePath]) -> TwinPatch {
        let newFolders = Set(folders)
        var sources: [SafeRelativePath: SafeRelativePath] = [:]
        for reuse in reused { sources[reuse.target] = reuse.source }
        let downloaded = Set(downloads)
        var (patch, rebuiltFolders) = TwinPatch.removing(dirty) { path in
            if newFolders.contains(path) { return .folder }
            if let source = sources[path] { return .link(from: source) }
            return downloaded.contains(path) ? .download : .nothing
        }
        guard !rebuiltFolders.isEmpty else { return patch }
        // Folders rebuilt whole: everything of the new version under them is placed again.
        let rebuilt = Set(rebuiltFolders)
        func underRebuilt(_ path: SafeRelativePath) -> Bool {
            var folder = path
            while !folder.isRoot {
                if rebuilt.contains(folder) { return true }
                folder = folder.parent
            }
            return false
        }
        for folder in folders where underRebuilt(folder) { patch.folders.append(folder) }
        for reuse in reused where underRebuilt(reuse.target.parent) { patch.links.append(reuse) }
        for download in downloads where underRebuilt(download.parent) { patch.downloads.append(download) }
        patch.sortPlacements()
        return patch
    }
}
