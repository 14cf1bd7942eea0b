import Archive
import FileKit
import StorageFormat

/// Computes the change list a storage publishes between two versions of its content.
///
/// The list is the smallest this type knows how to make such that a client replaying it with the
/// protocol's rules (see `NetPlanner` in ContentSync) ends with exactly the new tree, reusing old bytes
/// wherever a move can bring them and downloading the rest:
/// - A folder that exists only in the old version and whose whole subtree (names and bytes)
///   reappears at a folder that exists only in the new version is **one move**, however many
///   files it holds. Folders are matched largest subtree first, so a moved parent covers its
///   children.
/// - Other files move by fingerprint: an old file whose bytes a new path needs is moved there.
///   Each old file is the source of at most one move; extra copies are downloaded.
/// - A file whose bytes changed in place is a redownload. A folder whose shape is unchanged and
///   whose every file (at least two) changed is one deep folder redownload, which downloads the
///   same files.
/// - A file that moved and changed cannot be recognised by bytes. When a file removed on its own
///   and a file added elsewhere have the same name, they are one redownload from the old path to
///   the new one (closest folder first); otherwise the new file is an add.
/// - A folder that disappears is one remove, at its topmost level. A path that a move targets
///   gets no remove: the protocol has the move replace what stands there.
/// - A new folder gets an add only when it is empty: a file put inside creates its parents.
///
/// **Order.** Folder moves, file moves, removes, redownloads, file adds, folder adds, except where
/// replay needs otherwise (see `DiffScheduler`): a source moves away before anything replaces or
/// removes it, and a path is removed before something new is put at, above or below it.
///
/// **Cycles.** Moves can depend on each other in a cycle (two files swapping names; a folder
/// and a file trading places). One move of each cycle is given up and its target downloaded, so a
/// swap costs one move and one add, or two redownloads when the names have no extension. A given
/// up folder move leaves its files to move one by one. Only when giving up would leave a file
/// without extension to add does the move go through a temporary name at the content root
/// (`~content-sync-1.tmp`), one change more but no download.
///
/// **Folders that moved and changed.** A folder that exists only in the old version and shares
/// files (same relative path and bytes) with a folder that exists only in the new version is
/// moved first (see `FolderMoveCandidates`), and the rest is diffed from the tree the moves
/// leave: a renamed folder of 1,000 files that gained one file is a move and an add. Both lists,
/// with and without these moves, are computed; the one that downloads fewer bytes, then has
/// fewer changes, is published.
///
/// Every list is replayed with the client's own planner before it is returned; a list that would
/// not rebuild the new tree exactly is withheld with ``ChangeDifferError/Code/unreplayable``.
public enum ChangeDiffer {
    /// The changes that turn `old` into `new`, in replay order.
    ///
    /// Throws when the protocol cannot express `new`: a file that must be added has no extension
    /// (the client would create a folder), or an empty folder that must be added has one (the
    /// client would download a file).
    public static func diff(from old: ContentTree, to new: ContentTree) throws(ChangeDifferError) -> [Change.Kind] {
        try diff(from: old, to: new, delta: TreeDelta(from: old, to: new))
    }

    /// ``diff(from:to:)`` when the caller already has the trees' `TreeDelta`: only the folders
    /// it names as differing are diffed (`DiffScope`). `scoped: false` diffs the whole trees,
    /// for tests that compare both.
    public static func diff(
        from old: ContentTree, to new: ContentTree, delta: TreeDelta
    ) throws(ChangeDifferError) -> [Change.Kind] {
        try diff(from: old, to: new, delta: delta, scoped: true)
    }

    static func diff(
        from old: ContentTree, to new: ContentTree, delta: TreeDelta, scoped: Bool
    ) throws(ChangeDifferError) -> [Change.Kind] {
        let scope = scoped ? DiffScope(old: old, new: new, delta: delta) : nil
        let oldTree = try DiffTree(scope?.old ?? old, role: "old", untouched: scope?.untouched ?? [])
        let newTree = try DiffTree(scope?.new ?? new, role: "new", untouched: scope?.untouched ?? [])
        let plain: Result<Outcome, ChangeDifferError>
        do throws(ChangeDifferError) { plain = .success(try diffTrees(oldTree, newTree)) } catch {
            plain = .failure(error)
        }
        // A folder that moved and changed inside: move it first, then diff what it became.
        let moves = FolderMoveCandidates.moves(old: oldTree, new: newTree)
        if !moves.isEmpty, let outcome = try? diffAfter(moves, oldTree, newTree) {
            if case .success(let plainOutcome) = plain, !(outcome.isBetter(than: plainOutcome)) {
                return plainOutcome.kinds
            }
            return outcome.kinds
        }
        return try plain.get().kinds
    }

    /// A verified list and what it costs a client: bytes downloaded, then changes.
    struct Outcome {
        var kinds: [Change.Kind]
        var downloadedBytes: Int64

        func isBetter(than other: Outcome) -> Bool {
            (downloadedBytes, kinds.count) < (other.downloadedBytes, other.kinds.count)
        }
    }

    /// `moves` first, then the plain diff from the tree they leave to `new`, checked as a whole.
    static func diffAfter(_ moves: [Change.Kind], _ old: DiffTree, _ new: DiffTree) throws(ChangeDifferError) -> Outcome
    {
        var tree = VirtualTree(local: LocalTree(folders: old.folders, files: Set(old.files.keys)))
        for (index, kind) in moves.enumerated() {
            tree.apply(Change(kind: kind, index: index), listName: "the folder moves")
        }
        var folders = Set<SafeRelativePath>()
        var files: [SafeRelativePath: FileFingerprint] = [:]
        for (path, node) in tree.entries() {
            switch node {
            case .folder: folders.insert(path)
            case .file(.local(let source)): files[path] = old.files[source]
            case .file(.download): break
            }
        }
        let rest = try diffTrees(
            try DiffTree(ContentTree(folders: folders, files: files), role: "moved", untouched: old.untouched), new)
        let kinds = moves + rest.kinds
        return Outcome(kinds: kinds, downloadedBytes: try verify(kinds, old: old, new: new))
    }

    /// The list between two checked trees, ordered and verified.
    static func diffTrees(_ oldTree: DiffTree, _ newTree: DiffTree) throws(ChangeDifferError) -> Outcome {
        var bans = DiffBans()
        // A round that fails bans a pairing not banned before, or turns bans into detours (which
        // are never banned again), so the rounds end.
        while true {
            let inventory = DiffInventory(old: oldTree, new: newTree, bans: bans)
            let match = FileMatch(inventory, bans: &bans)
            switch DiffScheduler(steps: steps(inventory, match, bans: bans), oldFiles: oldTree.files).order() {
            case .ordered(let ordered):
                do {
                    try refuseInexpressible(ordered)
                } catch {
                    // A move given up for a cycle may have left a target that cannot be
                    // downloaded; a detour through a temporary name keeps every move.
                    guard !bans.filePairs.isEmpty else {
                        if let kinds = throughRemovedFiles(ordered, old: oldTree),
                            let bytes = try? verify(kinds, old: oldTree, new: newTree)
                        {
                            return Outcome(kinds: kinds, downloadedBytes: bytes)
                        }
                        throw error
                    }
                    bans.staged.formUnion(bans.filePairs)
                    bans.filePairs = []
                    continue
                }
                let kinds = ordered.map(\.kind)
                return Outcome(kinds: kinds, downloadedBytes: try verify(kinds, old: oldTree, new: newTree))
            case .cycles(let cycles):
                for cycle in cycles {
                    guard let step = moveToGiveUp(in: cycle, inventory, match) else {
                        throw ChangeDifferError(
                            code: .unreplayable,
                            message:
                                "cannot order the changes \(cycle.map { "'\($0.kind)'" }.joined(separator: ", ")): they depend on each other in a cycle without a file move to give up. This is a bug in ChangeDiffer; please report it with both trees"
                        )
                    }
                    switch step {
                    case .moveFile(let from, let to): bans.filePairs.insert(DiffBans.Pair(source: from, target: to))
                    case .moveFolder(let from, let to): bans.folderPairs.insert(DiffBans.Pair(source: from, target: to))
                    case .refreshMove(let from, let to):
                        bans.refreshPairs.insert(DiffBans.Pair(source: from, target: to))
                    default: break
                    }
                }
            }
        }
    }

    /// Where a move that closes a cycle parks its file, at the content root: `~content-sync-1.tmp`.
    static let temporaryPrefix = "~content-sync-"

    /// Every step, unordered, for one pairing of files. Pairs in `staged` go through a
    /// temporary name.
    static func steps(_ inventory: DiffInventory, _ match: FileMatch, bans: DiffBans = DiffBans()) -> [DiffStep] {
        let new = inventory.new
        var steps: [DiffStep] = []
        for (from, to) in inventory.folderMoves { steps.append(.moveFolder(from: from, to: to)) }
        var detours: [DiffBans.Pair] = []
        for (to, from) in match.sourceOf {
            let pair = DiffBans.Pair(source: from, target: to)
            if bans.staged.contains(pair) { detours.append(pair) } else { steps.append(.moveFile(from: from, to: to)) }
        }
        var taken = 0
        for pair in detours.sorted(by: { $0.target < $1.target }) {
            var temporary: SafeRelativePath
            repeat {
                taken += 1
                temporary = try! SafeRelativePath(validating: "\(temporaryPrefix)\(taken).tmp")
            } while inventory.old.files[temporary] != nil || inventory.old.folders.contains(temporary)
                || new.files[temporary] != nil || new.folders.contains(temporary)
            steps.append(.park(from: pair.source, to: temporary))
            steps.append(.unpark(from: temporary, to: pair.target))
        }

        // A folder is removed at its topmost vanished level. A path that a move targets needs no
        // remove: the protocol has the move replace what stands there (and a remove would destroy
        // the move's source when it lies inside the replaced folder).
        let movedOnto = Set(inventory.folderMoves.values).union(match.sourceOf.keys)
        for folder in inventory.oldOnlyFolders
        where !inventory.movedOld.contains(folder)
            && !inventory.oldOnlyFolders.contains(folder.parent) && !movedOnto.contains(folder)
        {
            steps.append(.remove(folder))
        }
        let removedFiles = inventory.departed.filter {
            match.targetOf[$0] == nil && !inventory.oldOnlyFolders.contains($0.parent) && !movedOnto.contains($0)
        }
        // A file removed on its own and a file of the same name added elsewhere: the file moved
        // and changed. One redownload to the new place replaces a remove and an add.
        let refreshMoves = pairMovedAndEdited(
            removed: removedFiles,
            added: inventory.arrived.filter { match.sourceOf[$0] == nil },
            banned: bans.refreshPairs)
        let refreshedSources = Set(refreshMoves.values)
        for file in removedFiles where !refreshedSources.contains(file) { steps.append(.remove(file)) }
        for (to, from) in refreshMoves { steps.append(.refreshMove(from: from, to: to)) }

        var inPlace = Set<SafeRelativePath>()
        for file in inventory.edited where match.sourceOf[file] == nil {
            // An edited file whose old bytes moved away must be fetched anew at its empty path.
            if match.targetOf[file] == nil { inPlace.insert(file) } else { steps.append(.addFile(file)) }
        }
        let refreshedFolders = foldersRefreshedWhole(inventory, inPlace: inPlace)
        for folder in refreshedFolders { steps.append(.refreshFolder(folder)) }
        for file in inPlace where !refreshedFolders.contains(where: file.isWithin) { steps.append(.redownload(file)) }
        for file in inventory.arrived where match.sourceOf[file] == nil && refreshMoves[file] == nil {
            steps.append(.addFile(file))
        }
        for folder in inventory.emptyNewFolders { steps.append(.addFolder(folder)) }
        return steps
    }

    /// Pairs each added file with a removed file of the same name, so that one redownload moves
    /// the old file into place and refreshes it: new path → old path. Among several candidates
    /// the one whose folder shares the longest prefix with the new folder wins, then path order.
    static func pairMovedAndEdited(
        removed: [SafeRelativePath], added: [SafeRelativePath],
        banned: Set<DiffBans.Pair>
    ) -> [SafeRelativePath: SafeRelativePath] {
        var byName: [String: [SafeRelativePath]] = [:]
        for path in removed.sorted() { byName[path.lastComponent!, default: []].append(path) }
        guard !byName.isEmpty else { return [:] }
        var used = Set<SafeRelativePath>()
        var pairs: [SafeRelativePath: SafeRelativePath] = [:]
        for target in added.sorted() {
            guard let candidates = byName[target.lastComponent!] else { continue }
            var best: (source: SafeRelativePath, shared: Int)?
            for source in candidates
            where !used.contains(source) && !target.isWithin(source)
                && !banned.contains(DiffBans.Pair(source: source, target: target))
            {
                let shared = zip(source.parent.components, target.parent.components).prefix { $0 == $1 }.count
                if best == nil || shared > best!.shared { best = (source, shared) }
            }
            if let best {
                used.insert(best.source)
                pairs[target] = best.source
            }
        }
        return pairs
    }

    /// The topmost folders (the content root included) whose shape is the same in both trees
    /// and whose every file, at least two of them, is redownloaded in place: each becomes one
    /// deep folder redownload that fetches exactly the same files.
    static func foldersRefreshedWhole(_ inventory: DiffInventory, inPlace: Set<SafeRelativePath>) -> [SafeRelativePath]
    {
        guard inPlace.count >= 2 else { return [] }
        let old = inventory.old
        let new = inventory.new
        // Files below each folder that qualifies, or nil when the folder does not.
        var memo: [SafeRelativePath: Int?] = [:]
        func refreshedFiles(_ folder: SafeRelativePath) -> Int? {
            if let known = memo[folder] { return known }
            var count: Int? = 0
            let children = old.children[folder] ?? []
            if old.untouched.contains(folder) || Set(children) != Set(new.children[folder] ?? []) {
                count = nil
            } else {
                for child in children {
                    if old.files[child] != nil {
                        guard new.files[child] != nil, inPlace.contains(child) else {
                            count = nil
                            break
                        }
                        count! += 1
                    } else {
                        guard new.folders.contains(child), let below = refreshedFiles(child) else {
                            count = nil
                            break
                        }
                        count! += below
                    }
                }
            }
            memo[folder] = count
            return count
        }
        if let all = refreshedFiles(.root), all >= 2 { return [.root] }
        let candidates = Set(inPlace.flatMap(\.ancestors))
        return candidates.filter { folder in
            guard let count = refreshedFiles(folder), count >= 2 else { return false }
            return !folder.ancestors.contains { refreshedFiles($0) != nil }
        }.sorted()
    }

    /// Which move of a cycle to give up. First a file move whose target can then be downloaded
    /// (it has an extension, or it is an edited file that stays in place); then a folder move,
    /// whose contents can still move file by file; then any file move. Ties go by target path.
    static func moveToGiveUp(in cycle: [DiffStep], _ inventory: DiffInventory, _ match: FileMatch) -> DiffStep? {
        func cost(_ step: DiffStep) -> Int? {
            switch step {
            case .moveFile(_, let to):
                let downloadable =
                    !Change.namesFolder(to) || (inventory.edited.contains(to) && match.targetOf[to] == nil)
                return downloadable ? 0 : 2
            case .moveFolder:
                return 1
            case .refreshMove(_, let to):
                return Change.namesFolder(to) ? 2 : 0
            default:
                return nil
            }
        }
        return cycle.filter { cost($0) != nil }.min { (cost($0)!, $0.written!) < (cost($1)!, $1.written!) }
    }

    /// The list with each new file whose name has no extension (which an add would make a
    /// folder) brought by a redownload from an old file the new version removes: the client
    /// moves that file to the new name and downloads the new bytes over it (§1.3), so its
    /// removal goes. Nil when a file has no such old file to come from, or an empty folder's
    /// name has an extension; the caller verifies the result like any list.
    static func throughRemovedFiles(_ ordered: [DiffStep], old: DiffTree) -> [Change.Kind]? {
        var removals: [(index: Int, path: SafeRelativePath)] = []
        var adds: [(index: Int, path: SafeRelativePath)] = []
        for (index, step) in ordered.enumerated() {
            switch step {
            case .remove(let path) where old.files[path] != nil: removals.append((index, path))
            case .addFile(let path) where Change.namesFolder(path): adds.append((index, path))
            case .addFolder(let path) where !Change.namesFolder(path): return nil
            default: break
            }
        }
        guard !adds.isEmpty, removals.count >= adds.count else { return nil }
        var kinds = ordered.map(\.kind)
        var dropped = Set<Int>()
        for (add, removal) in zip(adds, removals) {
            kinds[add.index] = .redownload(from: removal.path, to: add.path)
            dropped.insert(removal.index)
        }
        return kinds.indices.filter { !dropped.contains($0) }.map { kinds[$0] }
    }

    /// Refuses adds the protocol's folder rule would misread.
    static func refuseInexpressible(_ steps: [DiffStep]) throws(ChangeDifferError) {
        var files: [SafeRelativePath] = []
        var folders: [SafeRelativePath] = []
        for step in steps {
            if case .addFile(let path) = step, Change.namesFolder(path) { files.append(path) }
            if case .addFolder(let path) = step, !Change.namesFolder(path) { folders.append(path) }
        }
        if !files.isEmpty {
            files.sort()
            throw ChangeDifferError(
                code: .fileWithoutExtension,
                message:
                    "cannot publish new file \(DiffTree.list(files)): a name without extension must be added as a folder, and no old file is free to move there (one with the same bytes, or one this version removes, which a redownload would bring). Give the file an extension (e.g. '\(files[0].lastComponent!).txt'), or keep its bytes in a file the old version has",
                paths: files)
        }
        if !folders.isEmpty {
            folders.sort()
            throw ChangeDifferError(
                code: .emptyFolderWithExtension,
                message:
                    "cannot publish new empty folder \(DiffTree.list(folders)): a name with an extension must be added as a file. Rename the folder without the extension, or put a file in it",
                paths: folders)
        }
    }

    /// Replays `kinds` with the client's planner and checks the result is exactly `new`, with
    /// every reused file carrying the right bytes.
    @discardableResult
    static func verify(_ kinds: [Change.Kind], old: DiffTree, new: DiffTree) throws(ChangeDifferError) -> Int64 {
        var tree = VirtualTree(local: LocalTree(folders: old.folders, files: Set(old.files.keys)))
        for (index, kind) in kinds.enumerated() {
            tree.apply(Change(kind: kind, index: index), listName: "the computed list")
        }
        var problems = tree.warnings
        let entries = tree.entries()
        var final: [SafeRelativePath: VirtualTree.Node] = [:]
        final.reserveCapacity(entries.count)
        for (path, node) in entries {
            final[path] = node
            switch node {
            case .folder where !new.folders.contains(path):
                problems.append("'\(path)' ends as a folder the new version does not have")
            case .file(.local(let source)) where new.files[path] == nil || old.files[source] != new.files[path]:
                problems.append("'\(path)' ends as old '\(source)', which has other bytes")
            case .file(.download(_)) where new.files[path] == nil:
                problems.append("'\(path)' ends as a download the new version does not have")
            default:
                break
            }
        }
        let missing =
            new.folders.filter { final[$0] != .folder }
            + new.files.keys.filter {
                if case .file = final[$0] { return false } else { return true }
            }
        problems += missing.sorted().map { "'\($0)' is missing after replay" }
        if !problems.isEmpty {
            throw ChangeDifferError(
                code: .unreplayable,
                message:
                    "the computed change list does not rebuild the new version (\(problems.prefix(3).joined(separator: "; "))); it is withheld. This is a bug in ChangeDiffer; please report it with both trees"
            )
        }
        return entries.reduce(0) { total, entry in
            if case .file(.download) = entry.1 { return total + (new.files[entry.0]?.size ?? 0) }
            return total
        }
    }
}
