import FileKit
import Foundation

/// How the recorded tree of the current version (its files' fingerprints and folders' digests)
/// becomes the next version's, computed from the plan and the changed paths alone: only the
/// folders on the way from a changed path to the root are hashed again.
public struct TreeIndexDelta: Sendable, Equatable {
    /// The new version's tree digest.
    public var rootDigest: String
    /// Paths whose recorded entries, and everything recorded below them, go first: the changed
    /// paths but those a removal above already covers (below another changed path) and files written
    /// where the index records a file or nothing (the entry written over them is enough).
    public var removed: [SafeRelativePath]
    /// Entries recorded after that: the changed paths the new version has, and the new digest
    /// of every folder on the way to the root (the root's included, as `SafeRelativePath.root`).
    public var entries: [SafeRelativePath: TreeDigest.Entry]
}

extension SyncPlan {
    /// The delta from the recorded tree of the current version to the one this plan builds, or
    /// nil when something it needs is not recorded (a folder it cannot list, a moved file's
    /// source) or a download has no expected fingerprint.
    ///
    /// `changed` are the paths where the plan's version differs from the current one
    /// (``changedPaths(from:)``); `recorded` lists the current version's entries directly in a
    /// folder (nil when it cannot). Only the changed paths and the folders on their way to the
    /// root are looked at: each such folder's entries are the recorded ones, less its changed
    /// names, plus what the plan puts at those names. So the work is the changes and the folders
    /// they reach, not the plan, which lists every entry of each folder it reached.
    public func indexDelta(
        changed: [SafeRelativePath], recorded: (SafeRelativePath) -> [(name: String, entry: TreeDigest.Entry)]?
    ) -> TreeIndexDelta? {
        var listings: [SafeRelativePath: [(name: String, entry: TreeDigest.Entry)]] = [:]
        func listing(_ folder: SafeRelativePath) -> [(name: String, entry: TreeDigest.Entry)]? {
            if let known = listings[folder] { return known }
            let listed = recorded(folder)
            listings[folder] = listed
            return listed
        }
        var lookups: [SafeRelativePath: [String: TreeDigest.Entry]] = [:]
        func recordedEntry(_ path: SafeRelativePath) -> TreeDigest.Entry? {
            guard let name = path.lastComponent else { return nil }
            let folder = path.parent
            if let byName = lookups[folder] { return byName[name] }
            guard let listed = listing(folder) else { return nil }
            let byName = Dictionary(listed, uniquingKeysWith: { first, _ in first })
            lookups[folder] = byName
            return byName[name]
        }

        // What the plan puts at each changed path it keeps, by folder and name: a file's
        // fingerprint, or nil for a folder (hashed below, as an affected folder).
        let changedSet = Set(changed)
        var placed: [SafeRelativePath: [String: TreeDigest.Entry?]] = [:]
        var changedFolders: Set<SafeRelativePath> = []
        var entries: [SafeRelativePath: TreeDigest.Entry] = [:]
        for folder in folders where changedSet.contains(folder) {
            placed[folder.parent, default: [:]][folder.lastComponent!] = .some(nil)
            changedFolders.insert(folder)
        }
        for reuse in reused where changedSet.contains(reuse.target) {
            guard case .file(let fingerprint)? = recordedEntry(reuse.source) else { return nil }
            placed[reuse.target.parent, default: [:]][reuse.target.lastComponent!] = .file(fingerprint)
            entries[reuse.target] = .file(fingerprint)
        }
        for download in downloads {
            guard let fingerprint = expectedFingerprints[download] else { return nil }
            placed[download.parent, default: [:]][download.lastComponent!] = .file(fingerprint)
            entries[download] = .file(fingerprint)
        }
        // Every folder on the way from a changed path to the root, and the changed folders the
        // new version has; by folder, its changed names and its affected subfolders' names.
        var affected: Set<SafeRelativePath> = [.root]
        var changedNames: [SafeRelativePath: Set<String>] = [:]
        var affectedNames: [SafeRelativePath: Set<String>] = [:]
        for path in changed where !path.isRoot {
            changedNames[path.parent, default: []].insert(path.lastComponent!)
            if changedFolders.contains(path) { affected.insert(path) }
            var folder = path.parent
            var below = path
            while true {
                // `below` is an ancestor of the changed path, so a folder with changes below it.
                if below != path { affectedNames[folder, default: []].insert(below.lastComponent!) }
                guard affected.insert(folder).inserted, !folder.isRoot else { break }
                below = folder
                folder = folder.parent
            }
        }
        let allFolders = Set(folders)
        var digests: [SafeRelativePath: String] = [:]
        // Deepest first: a folder's affected subfolders are hashed before it.
        for folder in affected.sorted(by: { $0.components.count > $1.components.count }) {
            guard folder.isRoot || allFolders.contains(folder) else { continue } // gone: nothing to hash
            var lines: [(name: String, entry: TreeDigest.Entry)] = []
            // A changed folder is new whole (everything in it is a changed path): nothing recorded counts.
            if !changedFolders.contains(folder) {
                guard let listed = listing(folder) else { return nil }
                let skipped = changedNames[folder] ?? []
                let reached = affectedNames[folder] ?? []
                lines.reserveCapacity(listed.count)
                for (name, entry) in listed where !skipped.contains(name) {
                    if reached.contains(name) {
                        // An unchanged subfolder with changes below: hashed already.
                        guard case .folder = entry, let path = try? folder.appending(component: name),
                            let digest = digests[path]
                        else { return nil }
                        lines.append((name, .folder(digest: digest)))
                    } else {
                        lines.append((name, entry))
                    }
                }
            }
            for (name, entry) in placed[folder] ?? [:] {
                if let entry {
                    lines.append((name, entry))
                } else if let path = try? folder.appending(component: name), let digest = digests[path] {
                    lines.append((name, .folder(digest: digest)))
                } else {
                    return nil
                }
            }
            let digest = TreeDigest.folderDigest(lines)
            digests[folder] = digest
            entries[folder] = .folder(digest: digest)
        }
        // What goes before the entries are written. A replay adding 2,000 files in new folders
        // removes one path (the top new folder, whose subtree may hold stale rows), not 2,000.
        var removed: [SafeRelativePath] = []
        for path in changed {
            // Below a changed path: the top changed path above it is removed, subtree and all.
            if !path.isRoot, changedSet.contains(path.parent) { continue }
            if case .file? = entries[path] {
                // The parent is an affected folder the index listed above: its entry is known.
                switch recordedEntry(path) {
                case nil, .file?: continue
                case .folder?: break
                }
            }
            removed.append(path)
        }
        return TreeIndexDelta(rootDigest: digests[.root]!, removed: removed, entries: entries)
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
        (self.files, self.folders, self.hash) = (0, 0, 0)
        for folder in folders { add(folder: folder) }
        for file in files { add(file: file) }
    }

    /// Counts one more folder (not the root), as a streamed walk finds it.
    public mutating func add(folder: SafeRelativePath) {
        folders += 1
        hash &+= Self.hash(folder, kind: "d")
    }

    /// Counts one more file, as a streamed walk finds it.
    public mutating func add(file: SafeRelativePath) {
        files += 1
        hash &+= Self.hash(file, kind: "f")
    }

    private static func hash(_ path: SafeRelativePath, kind: String) -> UInt64 {
        var hasher = FNV1a64()
        hasher.combine(kind)
        for component in path.components { hasher.combine(component) }
        return hasher.value
    }

    /// The shape as stored: `files:folders:hash`.
    public var text: String { "\(files):\(folders):\(String(hash, radix: 16))" }

    /// More entries of one kind than any tree has (2⁴⁰): a stored shape counting more is not
    /// one, and sums and differences of real counts stay far from `Int`'s limits.
    public static let maxCount = 1 << 40

    /// The shape stored as `text` (``text``); nil for anything else, counts over ``maxCount``
    /// included.
    public init?(text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, let files = Int(parts[0]), let folders = Int(parts[1]),
            (0...Self.maxCount).contains(files), (0...Self.maxCount).contains(folders),
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
