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
    /// The digest as lower-case hex.
    public static func digest(of tree: ContentTree) -> String {
        var children: [SafeRelativePath: [(name: String, path: SafeRelativePath, isFolder: Bool)]] = [:]
        for folder in tree.folders {
            children[folder.parent, default: []].append((folder.lastComponent!, folder, true))
        }
        for file in tree.files.keys { children[file.parent, default: []].append((file.lastComponent!, file, false)) }
        func digest(_ folder: SafeRelativePath) -> String {
            var hasher = SHA256()
            let entries = (children[folder] ?? []).sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
            for entry in entries {
                var line: String
                if entry.isFolder {
                    line = "d\u{0}\(entry.name)\u{0}\(digest(entry.path))\n"
                } else {
                    let fingerprint = tree.files[entry.path]!
                    line = "f\u{0}\(entry.name)\u{0}\(fingerprint.sha256)\u{0}\(fingerprint.size)\n"
                }
                line.withUTF8 { hasher.update(bufferPointer: UnsafeRawBufferPointer($0)) }
            }
            return HexDigest.string(hasher.finalize())
        }
        return digest(.root)
    }
}
