import Archive
import FileKit
import StorageFormat

/// Gives every folder a number that is equal for two folders exactly when their whole subtrees
/// are equal: the same relative names of files and subfolders, and the same file bytes.
///
/// Signatures are interned bottom-up (a folder's entry for a subfolder is the subfolder's number),
/// so the work is linear in the size of the trees however deep they are. Numbers from one
/// instance are comparable across every tree it has seen.
struct FolderSignatures {
    /// A folder's signature: its interned number and how many files and folders lie below it.
    struct Signature: Hashable {
        var id: Int
        var size: Int
    }

    private enum Entry: Hashable {
        case file(String, FileFingerprint)
        case folder(String, Int)

        var name: String {
            switch self {
            case .file(let name, _), .folder(let name, _): return name
            }
        }
    }

    private var ids: [[Entry]: Int] = [:]

    /// The signature of every folder of `tree` (the root excluded).
    mutating func signatures(of tree: DiffTree) -> [SafeRelativePath: Signature] {
        var result: [SafeRelativePath: Signature] = [:]
        // Deepest first, so that every subfolder is done before its parent.
        let order = tree.folders.sorted {
            $0.components.count != $1.components.count ? $0.components.count > $1.components.count : $0 < $1
        }
        for folder in order {
            var entries: [Entry] = []
            var size = 0
            for child in tree.children[folder] ?? [] {
                let name = child.lastComponent!
                if let fingerprint = tree.files[child] {
                    entries.append(.file(name, fingerprint))
                    size += 1
                } else if let inner = result[child] {
                    entries.append(.folder(name, inner.id))
                    size += 1 + inner.size
                }
            }
            entries.sort { $0.name < $1.name }
            let id: Int
            if let known = ids[entries] {
                id = known
            } else {
                id = ids.count
                ids[entries] = id
            }
            result[folder] = Signature(id: id, size: size)
        }
        return result
    }
}
