import Crypto
import FileKit
import Foundation

/// A Merkle-style digest of a content tree: equal digests mean equal trees (names, folders,
/// file bytes), and the digest is cheap to publish and compare.
///
/// Each folder hashes its entries sorted by name (UTF-8 byte order), one line each:
/// `f NUL name NUL sha256 NUL size LF` for a file and `d NUL name NUL digest LF` for a folder,
/// where a folder's digest is the SHA-256 of its lines. The tree digest is the root folder's.
/// Empty folders count, so a tree missing one does not match.
public enum TreeDigest {
    /// One entry of a folder, as its digest line names it.
    public enum Entry: Sendable, Equatable {
        case file(FileFingerprint)
        /// A folder, by its own digest.
        case folder(digest: String)
    }

    /// The digest as lower-case hex.
    public static func digest(of tree: ContentTree) -> String {
        folderDigests(of: tree)[.root]!
    }

    /// The digest of every folder of `tree`, the root's included (by `SafeRelativePath.root`).
    public static func folderDigests(of tree: ContentTree) -> [SafeRelativePath: String] {
        var digests: [SafeRelativePath: String] = [:]
        _ = hashFolders(of: tree, differing: nil, reusing: [:]) { digests[$0] = $1 }
        return digests
    }

    /// The digest of `tree`, taking from `previous` (``folderDigests(of:)`` of an earlier tree)
    /// the digest of every folder that `delta` (from that tree to this one) says is shared: only
    /// the folders along the changes are hashed again. The result is ``digest(of:)``'s.
    public static func digest(
        of tree: ContentTree, reusing previous: [SafeRelativePath: String], delta: TreeDelta
    ) -> String {
        if delta.isEmpty, let root = previous[.root] { return root }
        // A shared folder the earlier tree did not reach the same way: hash the whole tree.
        return hashFolders(of: tree, differing: delta.differing, reusing: previous) { _, _ in }
            ?? digest(of: tree)
    }

    /// The root's digest, hashing the folders of `tree` from the bottom up and handing each to
    /// `record`. With `differing`, only those folders are hashed: any other is taken from
    /// `previous`, and nil is returned when `previous` lacks one.
    private static func hashFolders(
        of tree: ContentTree, differing: Set<SafeRelativePath>?, reusing previous: [SafeRelativePath: String],
        record: (SafeRelativePath, String) -> Void
    ) -> String? {
        var children: [SafeRelativePath: [(name: String, path: SafeRelativePath, isFolder: Bool)]] = [:]
        for folder in tree.folders {
            let parent = folder.parent
            if differing?.contains(parent) ?? true {
                children[parent, default: []].append((folder.lastComponent!, folder, true))
            }
        }
        for file in tree.files.keys {
            let parent = file.parent
            if differing?.contains(parent) ?? true {
                children[parent, default: []].append((file.lastComponent!, file, false))
            }
        }
        func digest(_ folder: SafeRelativePath) -> String? {
            var entries: [(String, Entry)] = []
            for entry in children[folder] ?? [] {
                if !entry.isFolder {
                    entries.append((entry.name, .file(tree.files[entry.path]!)))
                } else if let differing, !differing.contains(entry.path) {
                    guard let known = previous[entry.path] else { return nil }
                    entries.append((entry.name, .folder(digest: known)))
                } else {
                    guard let inner = digest(entry.path) else { return nil }
                    entries.append((entry.name, .folder(digest: inner)))
                }
            }
            let result = folderDigest(entries)
            record(folder, result)
            return result
        }
        return digest(.root)
    }

    /// The digest of one folder holding `entries` (by name, in any order).
    public static func folderDigest(_ entries: [(name: String, entry: Entry)]) -> String {
        var hasher = SHA256()
        for (name, entry) in entries.sorted(by: { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }) {
            var line: String
            switch entry {
            case .folder(let digest): line = "d\u{0}\(name)\u{0}\(digest)\n"
            case .file(let fingerprint): line = "f\u{0}\(name)\u{0}\(fingerprint.sha256)\u{0}\(fingerprint.size)\n"
            }
            line.withUTF8 { hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }
        }
        return HexDigest.string(hasher.finalize())
    }
}
