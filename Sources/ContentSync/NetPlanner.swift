import Archive

/// Composes pending change lists into one net ``SyncPlan`` before anything is downloaded.
///
/// The storage serves only its latest content, so a client several versions behind cannot
/// replay history literally: a file added in 1.1 and moved in 1.2 exists on the server only at
/// its 1.2 place. The planner therefore replays every change on a *virtual* copy of the local
/// tree, where each file remembers where its bytes come from: an existing local file, or "fetch
/// from the storage". Only the final tree counts, so a file added then removed is never fetched,
/// a file redownloaded twice is fetched once, and an added-then-moved file is fetched once from
/// its final place.
public enum NetPlanner {
    /// Plans the way from `local` (at version `from`) through `lists`, which must already form a
    /// chain ending at `to`.
    public static func plan(local: LocalTree, from: CacheVersion, to: CacheVersion, lists: [ChangeList]) -> SyncPlan {
        var tree = VirtualTree(local: local)
        for list in lists {
            for change in list.changes {
                tree.apply(change, listName: list.url.lastPathComponent)
            }
        }
        return tree.plan(from: from, to: to)
    }
}

/// The working copy the planner edits. Paths map to nodes; `children` indexes folders so that a
/// subtree is found without scanning the whole tree.
struct VirtualTree {
    enum Source: Equatable {
        /// The bytes are the local file at this path of the current version.
        case local(SafeRelativePath)
        /// The bytes must be fetched from the storage, at the file's final path; with the
        /// integrity extension, the fingerprint the last change gave them.
        case download(FileFingerprint?)
    }

    enum Node: Equatable {
        case folder
        case file(Source)
    }

    private(set) var nodes: [SafeRelativePath: Node] = [:]
    private var children: [SafeRelativePath: Set<String>] = [.root: []]
    private(set) var warnings: [String] = []

    init(local: LocalTree) {
        for folder in local.folders.sorted() { insert(folder, .folder) }
        for file in local.files.sorted() { insert(file, .file(.local(file))) }
    }

    // MARK: - Changes

    mutating func apply(_ change: Change, listName: String) {
        let place = "\(listName) change #\(change.index)"
        switch change.kind {
        case .add(let path):
            add(path, fingerprint: change.fingerprint)
        case .remove(let path):
            if nodes[path] == nil {
                warnings.append("\(place): remove of '\(path)', which is not present; nothing to do")
            }
            removeSubtree(path)
        case .move(let from, let to, _):
            guard nodes[from] != nil else {
                warnings.append("\(place): move of '\(from)', which is not present; fetching '\(to)' instead")
                add(to, fingerprint: nil)
                return
            }
            move(from, to)
        case .redownload(let from, let to):
            switch nodes[from] {
            case nil:
                warnings.append("\(place): redownload of '\(from)', which is not present; fetching '\(to)' instead")
                add(to, fingerprint: change.fingerprint)
            case .folder:
                if from != to { move(from, to) }
                refreshFiles(under: to, change.folderFingerprints)
            case .file:
                if from != to { move(from, to) }
                insert(to, .file(.download(change.fingerprint)))
            }
        case .deepRedownload(let folder):
            switch nodes[folder] {
            case .file:
                insert(folder, .file(.download(change.fingerprint)))
            case .folder:
                refreshFiles(under: folder, change.folderFingerprints)
            case nil where folder.isRoot:
                refreshFiles(under: folder, change.folderFingerprints)
            case nil:
                // Static hosting cannot list a folder, so an unknown folder can only be created.
                warnings.append("\(place): folder redownload of '\(folder)', which is not present; creating it empty")
                insert(folder, .folder)
            }
        }
    }

    /// An add: a folder for a name with no extension, a download otherwise.
    private mutating func add(_ path: SafeRelativePath, fingerprint: FileFingerprint?) {
        if Change.namesFolder(path) {
            if nodes[path] != .folder { insert(path, .folder) }
        } else {
            insert(path, .file(.download(fingerprint)))
        }
    }

    private mutating func move(_ from: SafeRelativePath, _ to: SafeRelativePath) {
        guard from != to, !to.isWithin(from) else { return }
        let moved = removeSubtree(from)
        for (path, node) in moved {
            insert(path.rebased(from: from, onto: to), node)
        }
    }

    private mutating func refreshFiles(under folder: SafeRelativePath, _ fingerprints: [SafeRelativePath: FileFingerprint]) {
        for (path, node) in subtree(folder) where node != .folder {
            nodes[path] = .file(.download(fingerprints[path]))
        }
    }

    // MARK: - Tree primitives

    /// Puts `node` at `path`, replacing whatever was there (a folder with all it held), and
    /// creates missing parent folders (a file standing where a parent must go is replaced).
    mutating func insert(_ path: SafeRelativePath, _ node: Node) {
        guard !path.isRoot else { return }
        for ancestor in path.ancestors where nodes[ancestor] != .folder {
            if nodes[ancestor] != nil { removeSubtree(ancestor) }
            nodes[ancestor] = .folder
            children[ancestor] = []
            children[ancestor.parent, default: []].insert(ancestor.lastComponent!)
        }
        if let existing = nodes[path] {
            if existing == .folder && node == .folder { return }
            if existing == .folder { removeSubtree(path) }
        }
        nodes[path] = node
        if node == .folder, children[path] == nil { children[path] = [] }
        children[path.parent, default: []].insert(path.lastComponent!)
    }

    /// Deletes `path` and everything below it; returns what was removed, parents first.
    @discardableResult
    mutating func removeSubtree(_ path: SafeRelativePath) -> [(SafeRelativePath, Node)] {
        guard !path.isRoot, nodes[path] != nil else { return [] }
        let removed = subtree(path)
        for (entry, _) in removed {
            nodes[entry] = nil
            children[entry] = nil
        }
        children[path.parent]?.remove(path.lastComponent!)
        return removed
    }

    /// `path` and its descendants, parents before children.
    func subtree(_ path: SafeRelativePath) -> [(SafeRelativePath, Node)] {
        var result: [(SafeRelativePath, Node)] = []
        if !path.isRoot {
            guard let node = nodes[path] else { return [] }
            result.append((path, node))
        }
        var queue = [path]
        while let folder = queue.popLast() {
            for name in (children[folder] ?? []).sorted() {
                let child = folder.appending(try! SafeRelativePath(validating: name))
                guard let node = nodes[child] else { continue }
                result.append((child, node))
                if node == .folder { queue.append(child) }
            }
        }
        return result
    }

    func plan(from: CacheVersion, to: CacheVersion) -> SyncPlan {
        var folders: [SafeRelativePath] = []
        var reused: [SyncPlan.Reuse] = []
        var downloads: [SafeRelativePath] = []
        var expected: [SafeRelativePath: FileFingerprint] = [:]
        for (path, node) in nodes {
            switch node {
            case .folder: folders.append(path)
            case .file(.local(let source)): reused.append(SyncPlan.Reuse(target: path, source: source))
            case .file(.download(let fingerprint)):
                downloads.append(path)
                expected[path] = fingerprint
            }
        }
        return SyncPlan(from: from, to: to, folders: folders.sorted(), reused: reused.sorted { $0.target < $1.target },
                        downloads: downloads.sorted(), warnings: warnings, expectedFingerprints: expected)
    }
}
