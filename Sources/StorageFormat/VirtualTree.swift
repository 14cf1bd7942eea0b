import FileKit

/// The working copy the planner edits (see ``NetPlanner``).
///
/// A trie of nodes kept in flat arrays: each node stores its parent, its name and its place in
/// its folder's list of children, and one hash table maps (folder, name) to the child, so a
/// path is found by one lookup per component. Moving or renaming a folder changes one node,
/// whatever the folder holds, and no operation is slower than linear in the length of the
/// paths it is given. Per node this costs about 50 bytes beyond long names, and a file to
/// download keeps its SHA-256 as 32 raw bytes.
///
/// A *lazy* tree (``init(loader:)``) starts from the root alone and lists a folder of the
/// current content (through its loader: the tree index) the first time a change reaches into
/// it; a folder that a change moves, removes or replaces is listed whole first. Its plan then
/// covers the folders listed (``listed``), each with all its entries; a folder never listed
/// stands for itself and everything below it, unchanged. So planning costs what the changes
/// touch, not the size of the tree.
package struct VirtualTree: Sendable {
    /// One entry of a folder of the current content, as a lazy tree's loader lists it.
    package struct ListedEntry: Sendable, Equatable {
        package var name: String
        package var isFolder: Bool

        package init(name: String, isFolder: Bool) {
            self.name = name
            self.isFolder = isFolder
        }
    }

    /// Lists a folder of the current content (by its path there); nil when it cannot (the tree
    /// is then ``failed``).
    package typealias Loader = @Sendable (SafeRelativePath) -> [ListedEntry]?

    package enum Source: Equatable {
        /// The bytes are the local file at this path of the current version.
        case local(SafeRelativePath)
        /// The bytes must be fetched from the storage, at the file's final path; with the
        /// integrity extension, the fingerprint the last change gave them.
        case download(FileFingerprint?)
    }

    package enum Node: Equatable {
        case folder
        case file(Source)
    }

    /// A fingerprint as the tree keeps it.
    package enum Fingerprint: Equatable, Sendable {
        case packed(PackedFingerprint)
        /// A hash that is not 64 hex digits, which only a ``Change`` built in code can carry; kept as given.
        case other(FileFingerprint)

        init(_ fingerprint: FileFingerprint) {
            self = PackedFingerprint(fingerprint).map(Fingerprint.packed) ?? .other(fingerprint)
        }

        var fileFingerprint: FileFingerprint {
            switch self {
            case .packed(let packed): return packed.fingerprint
            case .other(let fingerprint): return fingerprint
            }
        }
    }

    package typealias NodeID = Int32
    private enum Kind: UInt8 { case free, folder, localFile, download }
    private static let none: NodeID = -1
    private static let root: NodeID = 0
    /// Warnings kept word for word; the rest are counted.
    package static let maxWarnings = 1000

    // One entry per node; a freed node's entries are reused.
    private var kinds: [Kind] = [.folder]
    private var names: [String] = [""]
    private var parents: [NodeID] = [none]
    private var firstChildren: [NodeID] = [none]
    private var nextSiblings: [NodeID] = [none]
    private var previousSiblings: [NodeID] = [none]
    /// A local file's index in `localFiles`; a download's slot in `fingerprints`, or -1.
    private var payloads: [Int32] = [-1]
    private var freeNodes: [NodeID] = []
    private var fingerprints: [PackedFingerprint] = []
    /// Slots of `fingerprints` that hold an ``Fingerprint/other(_:)`` fingerprint instead.
    private var otherFingerprints: [Int32: FileFingerprint] = [:]
    private var freeFingerprints: [Int32] = []
    /// The child index: open addressing, linear probing. A slot holds the 32-bit hash of
    /// (parent, name) in its high half and node + 1 in its low half; 0 is empty.
    private var slots: [UInt64] = Array(repeating: 0, count: 16)
    private var usedSlots = 0
    /// The local files, by the index their nodes keep.
    private var localFiles: [SafeRelativePath]
    /// A lazy tree's loader; nil for a tree of a whole ``LocalTree``.
    private let loader: Loader?
    /// Folders of the current content not listed yet, by node, with their path in the current
    /// content.
    private var unlisted: [NodeID: SafeRelativePath] = [:]
    /// The folders a lazy tree's listings found (its files are ``localFiles``, which only
    /// listings fill in a lazy tree). Kept as a list and made a ``LocalTree`` when asked for:
    /// listing more of the tree to widen a plan or patch a twin never builds those sets.
    private var listedFolders: [SafeRelativePath] = []

    /// What a lazy tree listed of the current content: every entry of each folder it listed.
    package var listed: LocalTree {
        loader == nil ? LocalTree() : LocalTree(folders: Set(listedFolders), files: Set(localFiles))
    }
    /// Whether a lazy tree's loader failed: its plan is then not to be used.
    package private(set) var failed = false

    private var keptWarnings: [String] = []
    private var droppedWarnings = 0
    /// Path components looked up or created so far: the planner's work, which tests bound.
    private(set) var componentSteps = 0
    /// Node slots ever made, in use or free for reuse: the tree's memory, which tests bound.
    package var allocatedNodes: Int { kinds.count }

    /// The tolerated mistakes found so far, each naming the list and the change; past
    /// ``maxWarnings`` one line counts the rest.
    package var warnings: [String] {
        droppedWarnings == 0
            ? keptWarnings
            : keptWarnings + ["\(droppedWarnings) more tolerated mistakes in the change lists are not listed"]
    }

    /// The tree of `local`. A path of `local` cannot be both a file and a folder's parent
    /// (no folder scan produces that).
    package init(local: LocalTree) {
        localFiles = Array(local.files)
        loader = nil
        let expected = 1 + local.folders.count + local.files.count
        kinds.reserveCapacity(expected)
        names.reserveCapacity(expected)
        parents.reserveCapacity(expected)
        firstChildren.reserveCapacity(expected)
        nextSiblings.reserveCapacity(expected)
        previousSiblings.reserveCapacity(expected)
        payloads.reserveCapacity(expected)
        var capacity = 16
        while capacity * 3 < expected * 4 { capacity *= 2 }
        slots = Array(repeating: 0, count: capacity)
        for folder in local.folders { _ = ensureFolder(folder.components[...]) }
        for (index, file) in localFiles.enumerated() where !file.isRoot {
            let parent = ensureFolder(file.components.dropLast())
            _ = place(parent, file.components.last!, .localFile, payload: Int32(index))
        }
    }

    /// A lazy tree of the current content, listed folder by folder through `loader` as changes
    /// reach into it.
    package init(loader: @escaping Loader) {
        localFiles = []
        self.loader = loader
        unlisted[Self.root] = .root
    }

    /// Lists `folder` and everything below it, so that a plan covers them (a lazy tree; an
    /// eager one has every path already). A path the tree does not hold is ignored.
    package mutating func cover(_ paths: [SafeRelativePath]) {
        for path in paths {
            if let node = find(path.components[...], from: Self.root), kinds[Int(node)] == .folder { listWhole(node) }
        }
    }

    // MARK: - Listing (lazy trees)

    /// Lists `folder` if it was not yet: its entries become nodes (folders unlisted themselves).
    private mutating func list(_ folder: NodeID) {
        guard let source = unlisted.removeValue(forKey: folder) else { return }
        guard let entries = loader?(source) else {
            failed = true
            return
        }
        for entry in entries {
            guard let path = try? source.appending(component: entry.name), child(of: folder, named: entry.name) == nil
            else {
                failed = true
                continue
            }
            if entry.isFolder {
                let node = allocate(.folder, payload: -1)
                attach(node, to: folder, name: entry.name)
                unlisted[node] = path
                listedFolders.append(path)
            } else {
                localFiles.append(path)
                let node = allocate(.localFile, payload: Int32(localFiles.count - 1))
                attach(node, to: folder, name: entry.name)
            }
        }
    }

    /// Lists `folder` and every folder below it.
    private mutating func listWhole(_ folder: NodeID) {
        guard !unlisted.isEmpty else { return }
        var stack = [folder]
        while let node = stack.popLast() {
            list(node)
            var child = firstChildren[Int(node)]
            while child != Self.none {
                if kinds[Int(child)] == .folder { stack.append(child) }
                child = nextSiblings[Int(child)]
            }
        }
    }

    /// The child of `parent` named `name`, listing `parent` first.
    private mutating func lookup(_ parent: NodeID, _ name: String) -> NodeID? {
        if !unlisted.isEmpty { list(parent) }
        return child(of: parent, named: name)
    }

    // MARK: - Changes

    /// Applies one change built in code.
    package mutating func apply(_ change: Change, listName: String) {
        apply(ChangeRecord(change), listName: listName)
    }

    /// Applies one change; the protocol's table (docs/protocol.md §1.3) and tolerated mistakes (§3.1).
    package mutating func apply(_ change: ChangeRecord, listName: String) {
        func warn(_ text: @autoclosure () -> String) {
            if keptWarnings.count < Self.maxWarnings {
                keptWarnings.append("\(listName) change #\(change.index): \(text())")
            } else {
                droppedWarnings += 1
            }
        }
        switch change.kind {
        case .add(let path):
            add(path, change.fingerprint, replacing: false)
        case .remove(let path):
            if path.isRoot || locate(path) == nil {
                warn("remove of '\(path)', which is not present; nothing to do")
            }
            removeSubtree(path)
        case .move(let from, let to, _):
            guard !from.isRoot, let source = locate(from) else {
                warn("move of '\(from)', which is not present; fetching '\(to)' instead")
                add(to, nil, replacing: true)
                return
            }
            move(source, from: from, to: to)
        case .redownload(let from, let to):
            guard !from.isRoot, let source = locate(from) else {
                warn("redownload of '\(from)', which is not present; fetching '\(to)' instead")
                add(to, change.fingerprint, replacing: true)
                return
            }
            if kinds[Int(source)] == .folder {
                if from != to { move(source, from: from, to: to) }
                // What stands at `to` now: the folder, or (for a move into itself, which does
                // not happen) whatever was there.
                if let target = locate(to) {
                    if kinds[Int(target)] == .folder {
                        refreshFiles(under: target, at: to, change)
                    } else {
                        setDownload(target, nil)
                    }
                }
            } else {
                if from != to { move(source, from: from, to: to) }
                insert(to, download: change.fingerprint)
            }
        case .deepRedownload(let folder):
            let found = locate(folder)
            switch found.map({ kinds[Int($0)] }) {
            case .localFile?, .download?:
                insert(folder, download: change.fingerprint)
            case .folder?:
                refreshFiles(under: found!, at: folder, change)
            default:
                // Static hosting cannot list a folder, so an unknown folder can only be created.
                warn("folder redownload of '\(folder)', which is not present; creating it empty")
                _ = ensureFolder(folder.components[...])
            }
        }
    }

    /// An add: a folder for a name with no extension, a download otherwise. With `replacing`
    /// (the item a move or redownload should have brought), what stands at `path` goes first,
    /// so a folder ends empty.
    private mutating func add(_ path: SafeRelativePath, _ fingerprint: Fingerprint?, replacing: Bool) {
        if Change.namesFolder(path) {
            if replacing { removeSubtree(path) }
            _ = ensureFolder(path.components[...])
        } else {
            insert(path, download: fingerprint)
        }
    }

    /// Moves the node `source` (at `from`) to `to`, replacing whatever stands there, as
    /// §1.3 says: a folder moved onto a folder does not merge with it. A move into itself does
    /// nothing.
    private mutating func move(_ source: NodeID, from: SafeRelativePath, to: SafeRelativePath) {
        guard from != to, !to.isWithin(from) else { return }
        // A moved folder's files get new paths: the plan must name each of them.
        if kinds[Int(source)] == .folder { listWhole(source) }
        detach(source)
        if to.isRoot {
            // Only a folder redownload may name the content root: the folder becomes the whole content.
            if kinds[Int(source)] == .folder {
                clearChildren(of: Self.root)
                var child = firstChildren[Int(source)]
                while child != Self.none {
                    let next = nextSiblings[Int(child)]
                    detach(child)
                    attach(child, to: Self.root, name: names[Int(child)])
                    child = next
                }
            }
            release(source)
            return
        }
        // `to` may be an ancestor of `from`: the source is detached first, so it survives.
        let parent = ensureFolder(to.components.dropLast())
        let name = to.components.last!
        if let existing = lookup(parent, name) {
            detach(existing)
            release(existing)
        }
        attach(source, to: parent, name: name)
    }

    /// Turns every file below `folder` into a download, with the fingerprint the change gives it.
    private mutating func refreshFiles(under folder: NodeID, at path: SafeRelativePath, _ change: ChangeRecord) {
        listWhole(folder)
        var stack = [folder]
        while let node = stack.popLast() {
            var child = firstChildren[Int(node)]
            while child != Self.none {
                switch kinds[Int(child)] {
                case .folder: stack.append(child)
                case .localFile, .download: setDownload(child, nil)
                case .free: preconditionFailure("free node \(child) in the tree")
                }
                child = nextSiblings[Int(child)]
            }
        }
        change.forEachFolderFile(below: path) { relative, fingerprint in
            componentSteps += relative.components.count
            guard let file = find(relative.components[...], from: folder), kinds[Int(file)] == .download else { return }
            setDownload(file, fingerprint)
        }
    }

    // MARK: - Paths

    /// What stands at `path`.
    package mutating func node(at path: SafeRelativePath) -> Node? {
        find(path.components[...], from: Self.root).map(node)
    }

    /// Puts a download at `path`, replacing whatever was there (a folder with all it held), and
    /// creates missing parent folders (a file standing where a parent must go is replaced).
    private mutating func insert(_ path: SafeRelativePath, download fingerprint: Fingerprint?) {
        guard !path.isRoot else { return }
        let file = place(ensureFolder(path.components.dropLast()), path.components.last!, .download, payload: -1)
        setDownload(file, fingerprint)
    }

    /// Deletes `path` and everything below it.
    private mutating func removeSubtree(_ path: SafeRelativePath) {
        guard !path.isRoot, let node = locate(path) else { return }
        detach(node)
        release(node)
    }

    /// The node at `path`, counting the steps.
    private mutating func locate(_ path: SafeRelativePath) -> NodeID? {
        componentSteps += path.components.count
        return find(path.components[...], from: Self.root)
    }

    private mutating func find(_ components: ArraySlice<String>, from start: NodeID) -> NodeID? {
        var node = start
        for component in components {
            guard let next = lookup(node, component) else { return nil }
            node = next
        }
        return node
    }

    /// The folder at `components`, created with its missing parents; files in the way are replaced.
    private mutating func ensureFolder(_ components: ArraySlice<String>) -> NodeID {
        var node = Self.root
        for component in components {
            componentSteps += 1
            node = place(node, component, .folder, payload: -1)
        }
        return node
    }

    /// Puts a node of `kind` named `name` in `parent`. A folder already there stays as it is
    /// when `kind` is a folder; anything else already there is replaced.
    private mutating func place(_ parent: NodeID, _ name: String, _ kind: Kind, payload: Int32) -> NodeID {
        if let existing = lookup(parent, name) {
            let current = kinds[Int(existing)]
            if current == .folder && kind == .folder { return existing }
            if current == .folder {
                clearChildren(of: existing)
            } else {
                releaseFingerprint(of: existing)
            }
            kinds[Int(existing)] = kind
            payloads[Int(existing)] = payload
            return existing
        }
        let node = allocate(kind, payload: payload)
        attach(node, to: parent, name: name)
        return node
    }

    private func node(_ id: NodeID) -> Node {
        switch kinds[Int(id)] {
        case .folder: return .folder
        case .localFile: return .file(.local(localFiles[Int(payloads[Int(id)])]))
        case .download: return .file(.download(fingerprint(of: id)?.fileFingerprint))
        case .free: preconditionFailure("free node \(id) in the tree")
        }
    }

    // MARK: - Nodes

    private mutating func allocate(_ kind: Kind, payload: Int32) -> NodeID {
        if let reused = freeNodes.popLast() {
            let index = Int(reused)
            kinds[index] = kind
            payloads[index] = payload
            firstChildren[index] = Self.none
            return reused
        }
        precondition(kinds.count < Int(Int32.max), "the planner's tree is full")
        kinds.append(kind)
        names.append("")
        parents.append(Self.none)
        firstChildren.append(Self.none)
        nextSiblings.append(Self.none)
        previousSiblings.append(Self.none)
        payloads.append(payload)
        return NodeID(kinds.count - 1)
    }

    /// Frees `node` and everything below it; `node` must be detached already.
    private mutating func release(_ node: NodeID) {
        clearChildren(of: node)
        releaseFingerprint(of: node)
        kinds[Int(node)] = .free
        names[Int(node)] = ""
        freeNodes.append(node)
    }

    /// Frees everything below `folder`, keeping `folder`. A lazy tree lists it whole first: the
    /// plan names everything that goes.
    private mutating func clearChildren(of folder: NodeID) {
        listWhole(folder)
        var stack: [NodeID] = []
        var child = firstChildren[Int(folder)]
        while child != Self.none {
            let next = nextSiblings[Int(child)]
            detach(child)
            stack.append(child)
            child = next
        }
        // Children of freed nodes need no unlinking from their parents, only unindexing.
        while let node = stack.popLast() {
            var grandchild = firstChildren[Int(node)]
            while grandchild != Self.none {
                removeFromIndex(grandchild)
                stack.append(grandchild)
                grandchild = nextSiblings[Int(grandchild)]
            }
            firstChildren[Int(node)] = Self.none
            releaseFingerprint(of: node)
            kinds[Int(node)] = .free
            names[Int(node)] = ""
            parents[Int(node)] = Self.none
            freeNodes.append(node)
        }
    }

    /// Takes `node` out of its folder.
    private mutating func detach(_ node: NodeID) {
        let index = Int(node)
        let parent = parents[index]
        guard parent != Self.none else { return }
        removeFromIndex(node)
        let previous = previousSiblings[index]
        let next = nextSiblings[index]
        if previous == Self.none { firstChildren[Int(parent)] = next } else { nextSiblings[Int(previous)] = next }
        if next != Self.none { previousSiblings[Int(next)] = previous }
        parents[index] = Self.none
        previousSiblings[index] = Self.none
        nextSiblings[index] = Self.none
    }

    /// Puts a detached `node` into `folder` under `name`, which must be free there.
    private mutating func attach(_ node: NodeID, to folder: NodeID, name: String) {
        let index = Int(node)
        names[index] = name
        parents[index] = folder
        let head = firstChildren[Int(folder)]
        previousSiblings[index] = Self.none
        nextSiblings[index] = head
        if head != Self.none { previousSiblings[Int(head)] = node }
        firstChildren[Int(folder)] = node
        addToIndex(node)
    }

    // MARK: - Fingerprints

    private func fingerprint(of node: NodeID) -> Fingerprint? {
        guard kinds[Int(node)] == .download else { return nil }
        let slot = payloads[Int(node)]
        guard slot >= 0 else { return nil }
        if let other = otherFingerprints[slot] { return .other(other) }
        return .packed(fingerprints[Int(slot)])
    }

    /// Makes `node` a download with `fingerprint`, reusing its fingerprint slot.
    private mutating func setDownload(_ node: NodeID, _ fingerprint: Fingerprint?) {
        let index = Int(node)
        let slot: Int32 = kinds[index] == .download ? payloads[index] : -1
        kinds[index] = .download
        guard let fingerprint else {
            if slot >= 0 { freeFingerprint(slot) }
            payloads[index] = -1
            return
        }
        switch fingerprint {
        case .packed(let packed):
            if slot >= 0 {
                fingerprints[Int(slot)] = packed
                if !otherFingerprints.isEmpty { otherFingerprints[slot] = nil }
                payloads[index] = slot
            } else {
                payloads[index] = newFingerprintSlot(packed)
            }
        case .other(let other):
            let kept = slot >= 0 ? slot : newFingerprintSlot(Self.placeholder)
            otherFingerprints[kept] = other
            payloads[index] = kept
        }
    }

    private static let placeholder = PackedFingerprint(size: 0, hex: repeatElement(UInt8(ascii: "0"), count: 64))!

    private mutating func newFingerprintSlot(_ packed: PackedFingerprint) -> Int32 {
        if let reused = freeFingerprints.popLast() {
            fingerprints[Int(reused)] = packed
            return reused
        }
        fingerprints.append(packed)
        return Int32(fingerprints.count - 1)
    }

    private mutating func releaseFingerprint(of node: NodeID) {
        let index = Int(node)
        if kinds[index] == .download, payloads[index] >= 0 { freeFingerprint(payloads[index]) }
        payloads[index] = -1
    }

    private mutating func freeFingerprint(_ slot: Int32) {
        if !otherFingerprints.isEmpty { otherFingerprints[slot] = nil }
        freeFingerprints.append(slot)
    }

    // MARK: - Child index

    private func hash(_ parent: NodeID, _ name: String) -> UInt32 {
        var hasher = Hasher()
        hasher.combine(parent)
        hasher.combine(name)
        return UInt32(truncatingIfNeeded: hasher.finalize())
    }

    /// The child of `parent` named `name`.
    private func child(of parent: NodeID, named name: String) -> NodeID? {
        let hash = hash(parent, name)
        let mask = slots.count - 1
        var position = Int(hash) & mask
        while true {
            let slot = slots[position]
            if slot == 0 { return nil }
            if UInt32(truncatingIfNeeded: slot >> 32) == hash {
                let node = NodeID(truncatingIfNeeded: slot & 0xFFFF_FFFF) - 1
                if parents[Int(node)] == parent && names[Int(node)] == name { return node }
            }
            position = (position + 1) & mask
        }
    }

    private mutating func addToIndex(_ node: NodeID) {
        if (usedSlots + 1) * 4 > slots.count * 3 { growIndex() }
        let entry = UInt64(hash(parents[Int(node)], names[Int(node)])) << 32 | UInt64(UInt32(node + 1))
        insertSlot(entry)
        usedSlots += 1
    }

    private mutating func insertSlot(_ entry: UInt64) {
        let mask = slots.count - 1
        var position = Int(truncatingIfNeeded: entry >> 32) & mask
        while slots[position] != 0 { position = (position + 1) & mask }
        slots[position] = entry
    }

    private mutating func growIndex() {
        let old = slots
        slots = Array(repeating: 0, count: old.count * 2)
        for entry in old where entry != 0 { insertSlot(entry) }
    }

    /// Removes `node`'s entry (backward-shift deletion, so no tombstones pile up).
    private mutating func removeFromIndex(_ node: NodeID) {
        let mask = slots.count - 1
        let target = UInt64(UInt32(node + 1))
        var hole = Int(hash(parents[Int(node)], names[Int(node)])) & mask
        while slots[hole] & 0xFFFF_FFFF != target {
            precondition(slots[hole] != 0, "node \(node) is not in the child index")
            hole = (hole + 1) & mask
        }
        var next = hole
        while true {
            next = (next + 1) & mask
            let entry = slots[next]
            if entry == 0 { break }
            let home = Int(truncatingIfNeeded: entry >> 32) & mask
            // Move the entry back unless its home lies cyclically in (hole, next].
            let stays = hole <= next ? (hole < home && home <= next) : (hole < home || home <= next)
            if !stays {
                slots[hole] = entry
                hole = next
            }
        }
        slots[hole] = 0
        usedSlots -= 1
    }

    // MARK: - Output

    /// Every path and what stands there, parents before children, in path order.
    package func entries() -> [(SafeRelativePath, Node)] {
        var result: [(SafeRelativePath, Node)] = []
        walk(
            folder: { path, _ in result.append((path, .folder)) },
            file: { parent, id in result.append((path(of: id, in: parent), node(id))) })
        return result
    }

    /// Visits every node but the root in path order: each folder's children sorted by name, a
    /// folder right before what it holds (the order of `SafeRelativePath`'s `<`). A folder is
    /// given its path; a file its folder's, so that a caller who has the file's path already
    /// need not build it again.
    private func walk(
        from start: NodeID = root, at startPath: SafeRelativePath = .root,
        folder visitFolder: (SafeRelativePath, NodeID) -> Void,
        file visitFile: (_ parent: SafeRelativePath, NodeID) -> Void
    ) {
        var stack: [(node: NodeID, parent: SafeRelativePath)] = []
        var children: [NodeID] = []
        func push(childrenOf folder: NodeID, at path: SafeRelativePath) {
            children.removeAll(keepingCapacity: true)
            var child = firstChildren[Int(folder)]
            while child != Self.none {
                children.append(child)
                child = nextSiblings[Int(child)]
            }
            // Pushed last name first, so the first name comes off the stack first.
            children.sort { names[Int($0)] > names[Int($1)] }
            for child in children { stack.append((child, path)) }
        }
        push(childrenOf: start, at: startPath)
        while let (node, parent) = stack.popLast() {
            if kinds[Int(node)] == .folder {
                let path = path(of: node, in: parent)
                visitFolder(path, node)
                push(childrenOf: node, at: path)
            } else {
                visitFile(parent, node)
            }
        }
    }

    private func path(of node: NodeID, in parent: SafeRelativePath) -> SafeRelativePath {
        // Names come from checked paths, so they are always valid components.
        try! parent.appending(component: names[Int(node)])
    }

    /// What the current content holds at paths: true for a folder, false for a file, no key for
    /// nothing; nil when it cannot tell (the paths' folders are then listed instead).
    package typealias KindLookup = ([SafeRelativePath]) -> [SafeRelativePath: Bool]?

    /// When `path` leads into a folder not listed yet (walking the tree as listed so far, without
    /// listing anything), the path of the current content it stands for: no change reached that
    /// folder, so the path holds what the current content holds there. Nil otherwise.
    private func unlistedSource(of path: SafeRelativePath) -> SafeRelativePath? {
        var node = Self.root
        for (index, component) in path.components.enumerated() {
            if var source = unlisted[node] {
                // The rest of a checked path: each component passes again.
                for rest in path.components[index...] {
                    guard let longer = try? source.appending(component: rest) else { return nil }
                    source = longer
                }
                return source
            }
            guard kinds[Int(node)] == .folder, let next = child(of: node, named: component) else { return nil }
            node = next
        }
        return nil
    }

    /// ``SyncPlan/twinPatch(dirty:)`` of the plan this tree makes (``plan(from:to:fingerprints:)``),
    /// worked out from the tree itself: each dirty path is looked up, and only a folder rebuilt
    /// whole is walked. So it costs the dirty paths, not the plan's every entry.
    ///
    /// A lazy tree lists the folders on the way to a path, unless `kinds` is given: a path inside
    /// a folder no change reached (not listed) holds what the current content holds there, so it
    /// is asked about alone (all such paths in one call) rather than its folder listed whole.
    package mutating func twinPatch(dirty: [SafeRelativePath], kinds lookup: KindLookup? = nil) -> TwinPatch {
        // Paths in folders not listed, by the path of the current content they stand for; what
        // the lookup says is there (nil when it could not tell: they are then listed).
        var unlistedSources: [SafeRelativePath: SafeRelativePath] = [:]
        var known: [SafeRelativePath: Bool]?
        if let lookup {
            for path in Set(dirty) where !path.isRoot { unlistedSources[path] = unlistedSource(of: path) }
            known = unlistedSources.isEmpty ? [:] : lookup(Array(unlistedSources.values))
        }
        var (patch, rebuilt) = TwinPatch.removing(dirty) { path in
            if let source = unlistedSources[path], let known {
                switch known[source] {
                case false?: return .link(from: source)
                case nil: return .nothing
                case true?: break // a folder rebuilt whole: listed through the tree below
                }
            }
            // The root is never one of a plan's folders: removed, not rebuilt.
            guard !path.isRoot, let node = find(path.components[...], from: Self.root) else { return .nothing }
            switch kinds[Int(node)] {
            case .folder: return .folder
            case .localFile: return .link(from: localFiles[Int(payloads[Int(node)])])
            case .download: return .download
            case .free: return .nothing
            }
        }
        guard !rebuilt.isEmpty else { return patch }
        // Everything of the new version under a rebuilt folder is placed again, the folder too.
        for path in rebuilt {
            guard let node = find(path.components[...], from: Self.root) else { continue }
            listWhole(node)
            patch.folders.append(path)
            walk(
                from: node, at: path,
                folder: { folder, _ in patch.folders.append(folder) },
                file: { parent, id in
                    switch kinds[Int(id)] {
                    case .localFile:
                        patch.links.append(
                            SyncPlan.Reuse(
                                target: self.path(of: id, in: parent), source: localFiles[Int(payloads[Int(id)])]))
                    case .download:
                        patch.downloads.append(self.path(of: id, in: parent))
                    case .folder, .free:
                        preconditionFailure("node \(id) is not a file")
                    }
                })
        }
        patch.sortPlacements()
        return patch
    }

    /// The plan of the tree as it stands.
    ///
    /// A file that stays where it was keeps its source path as its target, so the plan does
    /// not hold a second copy of every unchanged path.
    package func plan(from: CacheVersion, to: CacheVersion, fingerprints keepFingerprints: Bool = true) -> SyncPlan {
        // Sized up front: a million reused files would otherwise be copied as the array grows.
        var counts = [0, 0, 0, 0]
        for kind in kinds { counts[Int(kind.rawValue)] += 1 }
        var folders: [SafeRelativePath] = []
        folders.reserveCapacity(counts[Int(Kind.folder.rawValue)] - 1)
        var reused: [SyncPlan.Reuse] = []
        reused.reserveCapacity(counts[Int(Kind.localFile.rawValue)])
        var downloads: [SafeRelativePath] = []
        downloads.reserveCapacity(counts[Int(Kind.download.rawValue)])
        var expected: [SafeRelativePath: FileFingerprint] = [:]
        walk(
            folder: { path, _ in folders.append(path) },
            file: { parent, id in
                switch kinds[Int(id)] {
                case .localFile:
                    let source = localFiles[Int(payloads[Int(id)])]
                    let unmoved =
                        source.components.count == parent.components.count + 1 && source.lastComponent == names[Int(id)]
                        && source.components.dropLast().elementsEqual(parent.components)
                    reused.append(SyncPlan.Reuse(target: unmoved ? source : path(of: id, in: parent), source: source))
                case .download:
                    let path = path(of: id, in: parent)
                    downloads.append(path)
                    if keepFingerprints, let fingerprint = fingerprint(of: id) {
                        expected[path] = fingerprint.fileFingerprint
                    }
                case .folder, .free:
                    preconditionFailure("node \(id) is not a file")
                }
            })
        return SyncPlan(
            from: from, to: to, folders: folders, reused: reused, downloads: downloads, warnings: warnings,
            expectedFingerprints: expected)
    }
}
