import Foundation
import Testing

@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// The twin catch-up as pure logic: a twin that equals the current version outside its dirty set,
/// patched by ``SyncPlan/twinPatch(dirty:keep:)``, equals the plan's version, over random edits
/// (files added, changed, moved, removed; folders added, removed, turned into files and back).
@Suite("A twin caught up by its dirty paths equals the new version")
struct TwinPatchTests {
    /// A tree in memory: folders, and files with a content id.
    struct Tree: Equatable {
        var folders: Set<SafeRelativePath> = []
        var files: [SafeRelativePath: Int] = [:]

        var local: LocalTree { LocalTree(folders: folders, files: Set(files.keys)) }

        mutating func remove(_ path: SafeRelativePath) {
            folders = folders.filter { !$0.isWithin(path) }
            files = files.filter { !$0.key.isWithin(path) }
        }
    }

    /// A small repeatable generator (tests name their seed).
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static let names = ["a", "b", "c", "d"]

    /// Version `tree` edited at random: new ids are downloads, kept ids are links.
    static func edit(_ tree: Tree, nextID: inout Int, using random: inout Generator) -> Tree {
        var next = tree
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            let depth = Int.random(in: 1...3, using: &random)
            let path = p((0..<depth).map { _ in names.randomElement(using: &random)! }.joined(separator: "/"))
            switch Int.random(in: 0..<6, using: &random) {
            case 0, 1: // add or change a file (its folders made, whatever was in the way removed)
                for ancestor in path.ancestors where !next.folders.contains(ancestor) {
                    next.remove(ancestor)
                    next.folders.insert(ancestor)
                }
                next.remove(path)
                nextID += 1
                next.files[path] = nextID
            case 2: // add a folder
                for ancestor in path.ancestors + [path] where !next.folders.contains(ancestor) {
                    next.remove(ancestor)
                    next.folders.insert(ancestor)
                }
            case 3: // remove whatever is there
                next.remove(path)
            case 4: // move a file (its bytes reused at another path)
                guard let (source, id) = next.files.randomElement(using: &random) else { continue }
                next.remove(source)
                for ancestor in path.ancestors where !next.folders.contains(ancestor) {
                    next.remove(ancestor)
                    next.folders.insert(ancestor)
                }
                next.remove(path)
                next.files[path] = id
            default: // copy a file
                guard let (_, id) = next.files.randomElement(using: &random) else { continue }
                guard path.ancestors.allSatisfy({ next.folders.contains($0) }) else { continue }
                next.remove(path)
                next.files[path] = id
            }
        }
        return next
    }

    /// The plan from `current` to `next`: a file whose id `current` holds is linked from a path
    /// holding it, anything else is downloaded.
    static func plan(from current: Tree, to next: Tree) -> SyncPlan {
        var holders: [Int: SafeRelativePath] = [:]
        for (path, id) in current.files.sorted(by: { $0.key < $1.key }) where holders[id] == nil { holders[id] = path }
        var reused: [SyncPlan.Reuse] = []
        var downloads: [SafeRelativePath] = []
        for (path, id) in next.files.sorted(by: { $0.key < $1.key }) {
            if current.files[path] == id {
                reused.append(SyncPlan.Reuse(target: path, source: path))
            } else if let source = holders[id] {
                reused.append(SyncPlan.Reuse(target: path, source: source))
            } else {
                downloads.append(path)
            }
        }
        return SyncPlan(
            from: v("1.0"), to: v("1.1"), folders: next.folders.sorted(), reused: reused, downloads: downloads,
            warnings: [])
    }

    /// `twin` with the patch applied, links taken from `current` and downloads from `next`.
    static func apply(_ patch: TwinPatch, to twin: Tree, current: Tree, next: Tree) -> Tree {
        var twin = twin
        for path in patch.removals { twin.remove(path) }
        for folder in patch.folders { twin.folders.insert(folder) }
        for reuse in patch.links { twin.files[reuse.target] = current.files[reuse.source] }
        for path in patch.downloads { twin.files[path] = next.files[path] }
        return twin
    }

    @Test("over 300 random histories of 6 versions, the twin caught up equals each new version", arguments: 0..<3)
    func randomHistories(batch: Int) {
        for seed in (batch * 100)..<(batch * 100 + 100) {
            var random = Generator(state: UInt64(seed))
            var nextID = 0
            var current = Tree()
            for _ in 0..<6 { current = Self.edit(current, nextID: &nextID, using: &random) }
            // The twin starts as a copy of the current version, clean.
            var twin = current
            var dirty: [SafeRelativePath] = []
            for step in 0..<6 {
                let next = Self.edit(current, nextID: &nextID, using: &random)
                let plan = Self.plan(from: current, to: next)
                guard let changed = plan.changedPaths(from: current.local) else {
                    Issue.record("a tree without intruders has changed paths")
                    return
                }
                let patch = plan.twinPatch(dirty: dirty + changed)
                twin = Self.apply(patch, to: twin, current: current, next: next)
                #expect(twin == next, "seed \(seed), step \(step): patch \(patch)")
                if twin != next { return }
                // The switch: the twin is the new version; the previous one becomes the twin.
                (twin, current, dirty) = (current, next, changed)
            }
        }
    }

    /// `tree` as a content tree, each id's bytes standing for a fingerprint.
    static func content(_ tree: Tree) -> ContentTree {
        ContentTree(folders: tree.folders, files: tree.files.mapValues(Self.fingerprint))
    }

    static func fingerprint(_ id: Int) -> FileFingerprint {
        FileFingerprint(size: Int64(id), sha256: FileDigest.sha256(Data("\(id)".utf8)))
    }

    /// The tree index of `tree`: every folder's digest (the root's too) and every file's fingerprint.
    static func index(_ tree: Tree) -> [SafeRelativePath: TreeDigest.Entry] {
        let content = Self.content(tree)
        var index = TreeDigest.folderDigests(of: content).mapValues { TreeDigest.Entry.folder(digest: $0) }
        for (path, fingerprint) in content.files { index[path] = .file(fingerprint) }
        return index
    }

    /// `index` as the delta reads it: the entries directly in a folder; nil for a folder in `unreadable`.
    static func listing(
        _ index: [SafeRelativePath: TreeDigest.Entry], unreadable: Set<SafeRelativePath> = []
    ) -> (SafeRelativePath) -> [(name: String, entry: TreeDigest.Entry)]? {
        var children: [SafeRelativePath: [(name: String, entry: TreeDigest.Entry)]] = [:]
        for (path, entry) in index where !path.isRoot {
            children[path.parent, default: []].append((path.lastComponent!, entry))
        }
        return { folder in unreadable.contains(folder) ? nil : children[folder] ?? [] }
    }

    @Test("over 300 random changes, the index delta gives the new tree's digest and, applied, its whole index")
    func indexDeltaIsExact() {
        for seed in 0..<300 {
            var random = Generator(state: UInt64(seed) &+ 1_000)
            var nextID = 0
            var current = Tree()
            for _ in 0..<6 { current = Self.edit(current, nextID: &nextID, using: &random) }
            let next = Self.edit(current, nextID: &nextID, using: &random)
            var plan = Self.plan(from: current, to: next)
            for path in plan.downloads { plan.expectedFingerprints[path] = Self.fingerprint(next.files[path]!) }
            let changed = plan.changedPaths(from: current.local) ?? []
            var index = Self.index(current)
            let delta = plan.indexDelta(changed: changed, recorded: Self.listing(index))
            guard let delta else {
                Issue.record("seed \(seed): every entry is recorded, yet no delta")
                return
            }
            #expect(delta.rootDigest == TreeDigest.digest(of: Self.content(next)), "seed \(seed)")
            for path in delta.removed { index = index.filter { !$0.key.isWithin(path) } }
            index.merge(delta.entries) { _, new in new }
            #expect(index == Self.index(next), "seed \(seed)")
            if index != Self.index(next) { return }
        }
    }

    @Test(
        "a folder the index cannot list, a moved file's source it lacks, or a download without a fingerprint, gives no delta"
    )
    func missingEntriesGiveNoDelta() {
        var current = Tree()
        current.folders = [p("a"), p("b")]
        current.files = [p("a/x"): 1, p("a/y"): 2, p("b/w"): 4]
        var next = current
        next.files[p("a/z")] = 3
        next.files[p("b/v")] = 1 // x's bytes: linked from a/x
        var plan = Self.plan(from: current, to: next)
        #expect(plan.reused.contains(SyncPlan.Reuse(target: p("b/v"), source: p("a/x"))))
        let changed = plan.changedPaths(from: current.local) ?? []
        var index = Self.index(current)
        #expect(
            plan.indexDelta(changed: changed, recorded: Self.listing(index)) == nil, "the download has no fingerprint")
        plan.expectedFingerprints[p("a/z")] = Self.fingerprint(3)
        let delta = plan.indexDelta(changed: changed, recorded: Self.listing(index))
        #expect(delta?.rootDigest == TreeDigest.digest(of: Self.content(next)))
        #expect(
            plan.indexDelta(changed: changed, recorded: Self.listing(index, unreadable: [p("a")])) == nil,
            "a cannot be listed")
        #expect(plan.indexDelta(changed: changed, recorded: Self.listing(index, unreadable: [.root])) == nil)
        // An entry the index lacks in a folder the delta hashes: the digest is not the new tree's, so
        // the caller checks the whole tree.
        index[p("a/y")] = nil
        let short = plan.indexDelta(changed: changed, recorded: Self.listing(index))
        #expect(short != nil && short?.rootDigest != TreeDigest.digest(of: Self.content(next)))
        // The moved file's source is not recorded: no fingerprint to give it.
        index[p("a/x")] = nil
        #expect(plan.indexDelta(changed: changed, recorded: Self.listing(index)) == nil, "a/x is not recorded")
    }

    @Test(
        "the delta removes a folder a file replaces (and a file a folder replaces), and nothing for files it writes over or adds in new folders"
    )
    func deltaRemovesOnlyWhatItMust() throws {
        var current = Tree()
        current.folders = [p("a"), p("a/b"), p("c")]
        current.files = [p("a/b/x"): 1, p("a/y"): 2, p("c/z"): 3, p("top"): 4]
        var next = Tree()
        next.folders = [p("a"), p("top"), p("new"), p("new/deep"), p("c")]
        // a/b: a folder become a file; top: a file become a folder; a/y written over; new/…: added.
        next.files = [p("a/b"): 5, p("a/y"): 6, p("c/z"): 3, p("top/t"): 7, p("new/deep/n1"): 8, p("new/n2"): 9]
        var plan = Self.plan(from: current, to: next)
        for path in plan.downloads { plan.expectedFingerprints[path] = Self.fingerprint(next.files[path]!) }
        let changed = plan.changedPaths(from: current.local) ?? []
        var index = Self.index(current)
        let delta = try #require(plan.indexDelta(changed: changed, recorded: Self.listing(index)))
        #expect(Set(delta.removed) == [p("a/b"), p("top"), p("new")], "\(delta.removed)")
        for path in delta.removed { index = index.filter { !$0.key.isWithin(path) } }
        index.merge(delta.entries) { _, new in new }
        #expect(index == Self.index(next))
        #expect(delta.rootDigest == TreeDigest.digest(of: Self.content(next)))
    }

    @Test("a patch touches only the dirty paths (and what is rebuilt under a dirty folder)")
    func patchIsLocal() {
        var current = Tree()
        for index in 0..<1_000 {
            let folder = p("f\(index / 100)")
            current.folders.insert(folder)
            current.files[folder.appending(p("file\(index)"))] = index
        }
        var next = current
        next.files[p("f3/file300")] = 5_000
        next.files[p("f9/new")] = 5_001
        next.remove(p("f1/file150"))
        let plan = Self.plan(from: current, to: next)
        let changed = plan.changedPaths(from: current.local)
        #expect(changed == [p("f1/file150"), p("f3/file300"), p("f9/new")])
        let patch = plan.twinPatch(dirty: changed ?? [])
        #expect(patch.removals == changed)
        #expect(patch.downloads == [p("f3/file300"), p("f9/new")])
        #expect(patch.links.isEmpty && patch.folders.isEmpty)
    }

    @Test("a dirty folder that the new version has is rebuilt whole: the old twin's files under it go")
    func dirtyFolderIsRebuilt() {
        let plan = SyncPlan(
            from: v("1.0"), to: v("1.1"), folders: [p("d")], reused: [SyncPlan.Reuse(target: p("d/x"), source: p("x"))],
            downloads: [p("d/y")], warnings: [])
        let patch = plan.twinPatch(dirty: [p("d"), p("d/y")])
        #expect(patch.removals == [p("d")])
        #expect(patch.folders == [p("d")])
        #expect(patch.links == [SyncPlan.Reuse(target: p("d/x"), source: p("x"))])
        #expect(patch.downloads == [p("d/y")])
    }

    @Test("a tree with intruders has no changed paths: no twin can be kept of it")
    func intrudersKeepNoTwin() {
        var local = LocalTree(files: [p("a")])
        local.intruders = [Intruder(folder: .root, name: Array("link".utf8), kind: .symlink)]
        let plan = SyncPlan(
            from: v("1.0"), to: v("1.1"), folders: [], reused: [SyncPlan.Reuse(target: p("a"), source: p("a"))],
            downloads: [], warnings: [])
        #expect(plan.changedPaths(from: local) == nil)
    }
}

/// The folders a patch leaves with their `ctime`, as one rule: not the root, not a folder the
/// patch touches or any folder inside one (its ancestors' verdicts are reused, so a deep chain
/// is judged in linear passes, not by listing each folder's ancestors).
@Suite("Folders a twin patch leaves untouched")
struct UntouchedFoldersTests {
    static func path(_ text: String) -> SafeRelativePath { try! SafeRelativePath(validating: text) }

    @Test func foldersInsideATouchedOneAreTouchedAndTheRestKeepTheirTimes() {
        var patch = TwinPatch()
        patch.downloads = [Self.path("a/b/f.txt")]
        patch.removals = [Self.path("x/y")]
        let recorded: [SafeRelativePath: Int64] = Dictionary(
            uniqueKeysWithValues: ["", "a", "a/b", "a/b/c", "a/b/c/d", "a/e", "x", "x/y", "x/y/z", "q", "q/r"].map {
                ($0.isEmpty ? .root : Self.path($0), 1)
            })
        let kept = Set(Stager.untouched(recorded, by: patch).keys)
        // The root, "a/b" (the download's folder) and all within it, "x" (the removal's folder),
        // "x/y" and all within it go; "a", "a/e" and "q", "q/r" keep their times.
        #expect(kept == Set(["a", "a/e", "q", "q/r"].map(Self.path)))
    }

    @Test func aChainOfEighteenHundredFoldersIsJudgedWhole() {
        var components: [String] = []
        var recorded: [SafeRelativePath: Int64] = [:]
        // 1,800 one-letter levels: 3,599 bytes, within Linux's 4,095.
        for level in 0..<1_800 {
            components.append(String(UnicodeScalar(UInt8(ascii: "a") + UInt8(level % 26))))
            recorded[Self.path(components.joined(separator: "/"))] = Int64(level)
        }
        var patch = TwinPatch()
        // A file in the folder at level 900: it and the 900 below it are touched.
        patch.downloads = [Self.path(components.prefix(900).joined(separator: "/") + "/f.txt")]
        let kept = Stager.untouched(recorded, by: patch)
        #expect(kept.count == 899)
        #expect(kept.keys.allSatisfy { $0.components.count < 900 })
    }
}
