import Archive
import FileKit
import StorageFormat

/// What differs between two trees, before any file is paired with a source: the whole-folder
/// moves, and which loose files left, arrived or changed.
struct DiffInventory {
    let old: DiffTree
    let new: DiffTree
    /// Folders present only in the old tree whose whole subtree reappears unchanged at a folder
    /// present only in the new tree: old path → new path. Each is one move.
    let folderMoves: [SafeRelativePath: SafeRelativePath]
    /// The sources of ``folderMoves``: everything inside them travels with the folder.
    let movedOld: Set<SafeRelativePath>
    /// The targets of ``folderMoves``: everything inside them arrives with the folder.
    let movedNew: Set<SafeRelativePath>
    /// Folders of the old tree that the new tree lacks.
    let oldOnlyFolders: Set<SafeRelativePath>
    /// Files at the same path in both trees with different bytes.
    let edited: Set<SafeRelativePath>
    /// Old files, outside moved folders, whose path holds no file in the new tree.
    let departed: [SafeRelativePath]
    /// New files, outside moved folders, whose path held no file in the old tree.
    let arrived: [SafeRelativePath]
    /// New-only empty folders outside moved folders: each needs an add.
    let emptyNewFolders: [SafeRelativePath]

    /// `bans` lists folder moves that earlier rounds could not order.
    init(old: DiffTree, new: DiffTree, bans: DiffBans) {
        self.old = old
        self.new = new
        let folderMoves = Self.matchFolders(old: old, new: new, banned: bans.folderPairs)
        self.folderMoves = folderMoves
        let movedOld = Set(folderMoves.keys)
        let movedNew = Set(folderMoves.values)
        self.movedOld = movedOld
        self.movedNew = movedNew
        oldOnlyFolders = old.folders.subtracting(new.folders)

        var edited = Set<SafeRelativePath>()
        var departed: [SafeRelativePath] = []
        for (path, fingerprint) in old.files where !path.isWithin(anyOf: movedOld) {
            if let now = new.files[path] {
                if now != fingerprint { edited.insert(path) }
            } else {
                departed.append(path)
            }
        }
        self.edited = edited
        self.departed = departed.sorted()
        arrived = new.files.keys.filter { old.files[$0] == nil && !$0.isWithin(anyOf: movedNew) }.sorted()
        emptyNewFolders = new.folders.filter {
            !old.folders.contains($0) && new.isEmptyFolder($0) && !$0.isWithin(anyOf: movedNew)
        }.sorted()
    }

    /// Pairs old-only folders with new-only folders of equal subtrees, largest subtrees first.
    ///
    /// A folder that contains another has a strictly larger subtree, so by the time a pair is
    /// considered every enclosing folder on both sides has already been matched or passed over:
    /// a moved parent covers its children, and no child is matched into a parent that moves later.
    static func matchFolders(
        old: DiffTree, new: DiffTree,
        banned: Set<DiffBans.Pair>
    ) -> [SafeRelativePath: SafeRelativePath] {
        var signatures = FolderSignatures()
        let oldSignatures = signatures.signatures(of: old)
        let newSignatures = signatures.signatures(of: new)
        var candidates: [Int: [SafeRelativePath]] = [:]
        for folder in new.folders.subtracting(old.folders).sorted() {
            candidates[newSignatures[folder]!.id, default: []].append(folder)
        }
        guard !candidates.isEmpty else { return [:] }
        let oldOnly = old.folders.subtracting(new.folders).sorted {
            let (left, right) = (oldSignatures[$0]!.size, oldSignatures[$1]!.size)
            return left != right ? left > right : $0 < $1
        }
        var moves: [SafeRelativePath: SafeRelativePath] = [:]
        var sources = Set<SafeRelativePath>()
        var targets = Set<SafeRelativePath>()
        for folder in oldOnly {
            if folder.isWithin(anyOf: sources) { continue }
            guard let bucket = candidates[oldSignatures[folder]!.id] else { continue }
            let free = bucket.filter {
                !$0.isWithin(anyOf: targets) && !banned.contains(DiffBans.Pair(source: folder, target: $0))
            }
            // Prefer a plain move (same name), then a rename (same parent), then path order.
            guard
                let target = free.first(where: { $0.lastComponent == folder.lastComponent })
                    ?? free.first(where: { $0.parent == folder.parent }) ?? free.first
            else { continue }
            moves[folder] = target
            sources.insert(folder)
            targets.insert(target)
        }
        return moves
    }
}
