import FileKit
import Foundation

/// How the recorded tree of the current version (its files' fingerprints and folders' digests)
/// becomes the next version's, computed from the plan and the changed paths alone: only the
/// folders on the way from a changed path to the root are hashed again.
public struct TreeIndexDelta: Sendable, Equatable {
    /// The new version's tree digest.
    public var rootDigest: String
    /// Paths whose recorded entries, and everything recorded below them, go first.
    public var removed: [SafeRelativePath]
    /// Entries recorded after that: the changed paths the new version has, and the new digest
    /// of every folder on the way to the root (the root's included, as ``SafeRelativePath/root``).
    public var entries: [SafeRelativePath: TreeDigest.Entry]
}

extension SyncPlan {
    /// The delta from the recorded tree of the current version to the one this plan builds, or
    /// nil when something it needs is not recorded (or a download has no expected fingerprint).
    ///
    /// `changed` are the paths where the plan's version differs from the current one
    /// (``changedPaths(from:)``); `recorded` answers the current version's entry at a path.
    public func indexDelta(
        changed: [SafeRelativePath], recorded: (SafeRelativePath) -> TreeDigest.Entry?
    ) -> TreeIndexDelta? {
        let changedSet = Set(changed)
        let newFolders = Set(folders)
        // Every folder on the way from a changed path to the root, and the changed folders the
        // new version has (everything below one is a changed path too: it is new).
        var affected: Set<SafeRelativePath> = [.root]
        for path in changed {
            var folder = path.parent
            while affected.insert(folder).inserted, !folder.isRoot { folder = folder.parent }
            if newFolders.contains(path) { affected.insert(path) }
        }
        var children: [SafeRelativePath: [(name: String, path: SafeRelativePath, file: FileFingerprint?)]] = [:]
        var entries: [SafeRelativePath: TreeDigest.Entry] = [:]
        for folder in folders where affected.contains(folder.parent) {
            children[folder.parent, default: []].append((folder.lastComponent!, folder, nil))
        }
        for reuse in reused where affected.contains(reuse.target.parent) {
            let source = changedSet.contains(reuse.target) ? reuse.source : reuse.target
            guard case .file(let fingerprint)? = recorded(source) else { return nil }
            children[reuse.target.parent, default: []].append((reuse.target.lastComponent!, reuse.target, fingerprint))
            if changedSet.contains(reuse.target) { entries[reuse.target] = .file(fingerprint) }
        }
        for download in downloads where affected.contains(download.parent) {
            guard let fingerprint = expectedFingerprints[download] else { return nil }
            children[download.parent, default: []].append((download.lastComponent!, download, fingerprint))
            entries[download] = .file(fingerprint)
        }
        var digests: [SafeRelativePath: String] = [:]
        // Deepest first: a folder's affected subfolders are hashed before it.
        for folder in affected.sorted(by: { $0.components.count > $1.components.count }) {
            guard folder.isRoot || newFolders.contains(folder) else { continue } // gone: nothing to hash
            var lines: [(name: String, entry: TreeDigest.Entry)] = []
            for child in children[folder] ?? [] {
                if let file = child.file {
                    lines.append((child.name, .file(file)))
                } else if let digest = digests[child.path] {
                    lines.append((child.name, .folder(digest: digest)))
                } else if case .folder(let digest)? = recorded(child.path) {
                    lines.append((child.name, .folder(digest: digest)))
                } else {
                    return nil
                }
            }
            let digest = TreeDigest.folderDigest(lines)
            digests[folder] = digest
            entries[folder] = .folder(digest: digest)
        }
        return TreeIndexDelta(rootDigest: digests[.root]!, removed: changed, entries: entries)
    }

    /// ``TreeShape`` of the version this plan builds.
    public var shape: TreeShape {
        TreeShape(folders: folders, files: reused.lazy.map(\.target) + downloads)
    }
}

/// An order-independent summary of a tree's paths and their kinds (a sum of 64-bit FNV-1a
/// hashes, and the counts): equal for equal shapes, and in practice different for any change of
/// a name, a kind, an added or a missing entry. Not a security hash: it tells a recorded tree from
/// one a person or program changed by hand, not from a crafted collision.
public struct TreeShape: Sendable, Equatable {
    /// How many files.
    public var files: Int
    /// How many folders (the root not counted).
    public var folders: Int
    /// The sum of every entry's hash.
    public var hash: UInt64

    /// The shape of these folders and files.
    public init(folders: some Sequence<SafeRelativePath>, files: some Sequence<SafeRelativePath>) {
        var (fileCount, folderCount, sum) = (0, 0, UInt64(0))
        for folder in folders {
            folderCount += 1
            sum &+= Self.hash(folder, kind: "d")
        }
        for file in files {
            fileCount += 1
            sum &+= Self.hash(file, kind: "f")
        }
        (self.files, self.folders, self.hash) = (fileCount, folderCount, sum)
    }

    private static func hash(_ path: SafeRelativePath, kind: String) -> UInt64 {
        var hasher = FNV1a64()
        hasher.combine(kind)
        for component in path.components { hasher.combine(component) }
        return hasher.value
    }

    /// The shape as stored: `files:folders:hash`.
    public var text: String { "\(files):\(folders):\(String(hash, radix: 16))" }

    /// The shape stored as `text` (``text``); nil for anything else.
    public init?(text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, let files = Int(parts[0]), let folders = Int(parts[1]), files >= 0, folders >= 0,
            let hash = UInt64(parts[2], radix: 16)
        else { return nil }
        (self.files, self.folders, self.hash) = (files, folders, hash)
    }

    /// The shape of a tree with the entries of `removed` taken out and those of `added` put in:
    /// a shape is a sum, so a tree's shape follows its changes without reading the tree again.
    public func replacing(_ removed: TreeShape, with added: TreeShape) -> TreeShape {
        var shape = self
        shape.files += added.files - removed.files
        shape.folders += added.folders - removed.folders
        shape.hash = hash &- removed.hash &+ added.hash
        return shape
    }
}
