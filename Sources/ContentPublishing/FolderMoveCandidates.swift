import Archive
import FileKit
import StorageFormat

/// Folders that moved and changed inside: an old-only folder and a new-only folder that share
/// files at the same relative paths with the same bytes.
///
/// Pairs are found from the files, not by comparing every folder with every other: each old file
/// inside an old-only folder is looked up by name and bytes among the new files, and every
/// common suffix of the two paths whose prefixes are an old-only and a new-only folder scores one
/// shared file for that pair. Pairs are then taken greedily, most shared files first (an
/// enclosing pair before the pairs inside it), never nesting one source in another or one target
/// in another. A pair must share at least two files; a single file is better moved by itself.
enum FolderMoveCandidates {
    /// Name and bytes shared by more files than this are too ambiguous to score folders by.
    static let maxAmbiguity = 32

    struct Pair: Hashable {
        var from: SafeRelativePath
        var to: SafeRelativePath
    }

    static func moves(old: DiffTree, new: DiffTree) -> [Change.Kind] {
        let oldOnly = old.folders.subtracting(new.folders)
        let newOnly = new.folders.subtracting(old.folders)
        guard !oldOnly.isEmpty, !newOnly.isEmpty else { return [] }

        struct Key: Hashable {
            var name: String
            var bytes: FileFingerprint
        }
        var newByKey: [Key: [SafeRelativePath]] = [:]
        for (path, bytes) in new.files where path.components.count > 1 && newOnly.contains(path.parent) {
            newByKey[Key(name: path.lastComponent!, bytes: bytes), default: []].append(path)
        }
        var shared: [Pair: Int] = [:]
        for (path, bytes) in old.files where path.components.count > 1 && oldOnly.contains(path.parent) {
            guard let candidates = newByKey[Key(name: path.lastComponent!, bytes: bytes)],
                candidates.count <= maxAmbiguity
            else { continue }
            for candidate in candidates {
                var from = path.parent
                var to = candidate.parent
                var suffix = 1
                while oldOnly.contains(from) && newOnly.contains(to) {
                    if !to.isWithin(from) { shared[Pair(from: from, to: to), default: 0] += 1 }
                    suffix += 1
                    guard suffix < path.components.count, suffix < candidate.components.count,
                        path.components[path.components.count - suffix]
                            == candidate.components[candidate.components.count - suffix]
                    else { break }
                    from = from.parent
                    to = to.parent
                }
            }
        }
        let ranked = shared.filter { $0.value >= 2 }.sorted {
            if $0.value != $1.value { return $0.value > $1.value }
            if $0.key.from.components.count != $1.key.from.components.count {
                return $0.key.from.components.count < $1.key.from.components.count
            }
            return ($0.key.from, $0.key.to) < ($1.key.from, $1.key.to)
        }
        var sources = Set<SafeRelativePath>()
        var targets = Set<SafeRelativePath>()
        var moves: [Change.Kind] = []
        for (pair, _) in ranked {
            guard !pair.from.isWithin(anyOf: sources), !sources.contains(where: { $0.isWithin(pair.from) }),
                !pair.to.isWithin(anyOf: targets), !targets.contains(where: { $0.isWithin(pair.to) })
            else { continue }
            sources.insert(pair.from)
            targets.insert(pair.to)
            moves.append(.move(from: pair.from, to: pair.to, rename: pair.from.parent == pair.to.parent))
        }
        return moves
    }
}
