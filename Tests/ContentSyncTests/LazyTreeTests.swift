import Foundation
import Synchronization
import Testing

@testable import FileKit
@testable import StorageFormat

/// A lazy planning tree (listing folders only as changes reach into them) plans what the eager
/// tree of the whole local tree plans: over random trees and random change lists (adds,
/// removes, moves and renames of files and folders, redownloads, folder redownloads and the
/// protocol's tolerated mistakes).
@Suite("A lazy plan is the eager plan, restricted to the folders it listed")
struct LazyTreeTests {
    typealias Generator = TwinPatchTests.Generator

    static let names = ["a", "b", "c", "x.txt", "y.bin"]

    /// A random local tree: folders have no extension, files do (as the protocol's adds tell them).
    static func randomTree(using random: inout Generator) -> LocalTree {
        var tree = LocalTree()
        for _ in 0..<Int.random(in: 0...30, using: &random) {
            let depth = Int.random(in: 1...4, using: &random)
            var components: [String] = []
            for _ in 0..<(depth - 1) { components.append(["a", "b", "c"].randomElement(using: &random)!) }
            let leaf = names.randomElement(using: &random)!
            components.append(leaf)
            let path = p(components.joined(separator: "/"))
            // A path cannot go through a file.
            guard !path.ancestors.contains(where: { tree.files.contains($0) }), !tree.folders.contains(path) else {
                continue
            }
            for ancestor in path.ancestors { tree.folders.insert(ancestor) }
            if leaf.contains(".") {
                guard !tree.folders.contains(where: { $0.isWithin(path) }) else { continue }
                tree.files.insert(path)
            } else {
                tree.folders.insert(path)
            }
        }
        return tree
    }

    static func randomPath(using random: inout Generator) -> SafeRelativePath {
        let depth = Int.random(in: 1...3, using: &random)
        var components = (0..<(depth - 1)).map { _ in ["a", "b", "c"].randomElement(using: &random)! }
        components.append(names.randomElement(using: &random)!)
        return p(components.joined(separator: "/"))
    }

    static func randomChanges(using random: inout Generator) -> [Change] {
        (0..<Int.random(in: 1...6, using: &random)).map { index in
            let from = randomPath(using: &random)
            let to = randomPath(using: &random)
            let kind: Change.Kind
            switch Int.random(in: 0..<6, using: &random) {
            case 0: kind = .add(to)
            case 1: kind = .remove(from)
            case 2: kind = .move(from: from, to: to, rename: false)
            case 3: kind = .redownload(from: from, to: Bool.random(using: &random) ? from : to)
            case 4: kind = .deepRedownload(p(["a", "b", "a/b", "c/a"].randomElement(using: &random)!))
            default:
                kind = .move(
                    from: from.parent.isRoot ? from : from.parent, to: to.parent.isRoot ? to : to.parent, rename: true)
            }
            let fingerprint = FileFingerprint(size: Int64(index), sha256: String(repeating: "ab", count: 32))
            return Change(kind: kind, index: index, fingerprint: Bool.random(using: &random) ? fingerprint : nil)
        }
    }

    /// A random local tree and change list, applied to an eager tree of it and to a lazy one.
    static func randomCase(using random: inout Generator) -> (LocalTree, [Change], VirtualTree, VirtualTree) {
        let local = randomTree(using: &random)
        let changes = randomChanges(using: &random)
        var eager = VirtualTree(local: local)
        var lazy = VirtualTree(loader: loader(local))
        for change in changes {
            eager.apply(change, listName: "changes.json")
            lazy.apply(change, listName: "changes.json")
        }
        return (local, changes, eager, lazy)
    }

    /// Counts a loader's listings.
    final class Listings: Sendable {
        let count = Mutex(0)
    }

    /// The lazy tree's loader over `local`, counting the folders it lists.
    static func loader(_ local: LocalTree, count: Listings? = nil) -> VirtualTree.Loader {
        { folder in
            count?.count.withLock { $0 += 1 }
            var entries: [VirtualTree.ListedEntry] = []
            for path in local.folders where path.parent == folder && !path.isRoot {
                entries.append(VirtualTree.ListedEntry(name: path.lastComponent!, isFolder: true))
            }
            for path in local.files where path.parent == folder {
                entries.append(VirtualTree.ListedEntry(name: path.lastComponent!, isFolder: false))
            }
            return entries
        }
    }

    @Test(
        "300 random trees and change lists: widened to everything, the lazy plan is the eager plan; unwidened, the same changed paths and new shape"
    )
    func lazyMatchesEager() {
        var random = Generator(state: 23)
        let (from, to) = (try! CacheVersion("1.0"), try! CacheVersion("2.0"))
        for round in 0..<300 {
            var (local, changes, eager, lazy) = Self.randomCase(using: &random)
            #expect(!lazy.failed)
            let eagerPlan = eager.plan(from: from, to: to)
            let partial = lazy.plan(from: from, to: to)
            // The changed paths and the new version's shape, from the part listed alone.
            #expect(
                partial.changedPaths(from: lazy.listed) == eagerPlan.changedPaths(from: local),
                "round \(round): \(changes)")
            let recorded = TreeShape(folders: local.folders, files: local.files)
            let shape = recorded.replacing(
                TreeShape(folders: lazy.listed.folders, files: lazy.listed.files), with: partial.shape)
            #expect(shape == eagerPlan.shape, "round \(round): \(changes)")
            #expect(partial.warnings == eagerPlan.warnings, "round \(round)")
            // Every plan entry of the partial plan is the eager plan's.
            let eagerReuse = Dictionary(uniqueKeysWithValues: eagerPlan.reused.map { ($0.target, $0.source) })
            for reuse in partial.reused { #expect(eagerReuse[reuse.target] == reuse.source, "round \(round)") }
            #expect(Set(partial.downloads).isSubset(of: Set(eagerPlan.downloads)), "round \(round)")
            #expect(Set(partial.downloads) == Set(eagerPlan.downloads), "round \(round): every download is a change")
            // Widened to the root, it is the eager plan exactly.
            lazy.cover([SafeRelativePath.root])
            var widened = lazy.plan(from: from, to: to)
            widened.widenedFrom = nil
            #expect(widened == eagerPlan, "round \(round): \(changes)")
        }
    }

    @Test("300 random trees, change lists and dirty sets: the twin patch from a lazy tree is the eager plan's")
    func lazyTwinPatchMatchesThePlans() {
        var random = Generator(state: 29)
        let (from, to) = (try! CacheVersion("1.0"), try! CacheVersion("2.0"))
        var rebuilt = 0
        for round in 0..<300 {
            var (local, changes, eager, lazy) = Self.randomCase(using: &random)
            let eagerPlan = eager.plan(from: from, to: to)
            // A dirty set as a twin has: this plan's changes, paths of the current tree (an earlier
            // version's changes), folders, and paths neither version has; the root once in a while.
            var dirty = eagerPlan.changedPaths(from: local) ?? []
            let known = Array(local.files) + Array(local.folders)
            for _ in 0..<Int.random(in: 0...4, using: &random) where !known.isEmpty {
                dirty.append(known.randomElement(using: &random)!)
            }
            for _ in 0..<Int.random(in: 0...2, using: &random) { dirty.append(Self.randomPath(using: &random)) }
            if round % 50 == 7 { dirty.append(.root) }
            dirty.shuffle(using: &random)
            let expected = eagerPlan.twinPatch(dirty: dirty)
            if !expected.folders.isEmpty { rebuilt += 1 }
            // Looking up paths in folders no change reached (as the index answers), or listing them.
            var pointed = lazy
            #expect(
                pointed.twinPatch(dirty: dirty, kinds: Self.kinds(local)) == expected,
                "round \(round): \(changes), dirty \(dirty)")
            #expect(!pointed.failed)
            #expect(lazy.twinPatch(dirty: dirty) == expected, "round \(round): \(changes), dirty \(dirty)")
            #expect(!lazy.failed)
            #expect(eager.twinPatch(dirty: dirty) == expected, "round \(round): the eager tree's own patch")
        }
        #expect(rebuilt > 20, "folders rebuilt whole in \(rebuilt) of 300 rounds")
    }

    /// What `local` holds at paths, as the tree index answers ``VirtualTree/KindLookup``.
    static func kinds(_ local: LocalTree) -> VirtualTree.KindLookup {
        { paths in
            var kinds: [SafeRelativePath: Bool] = [:]
            for path in paths where local.folders.contains(path) || local.files.contains(path) {
                kinds[path] = local.folders.contains(path)
            }
            return kinds
        }
    }

    @Test(
        "a twin's dirty paths in folders no change reached are looked up alone, not listed; a failed lookup lists them"
    )
    func twinPatchLooksUpUnreachedPaths() {
        var local = LocalTree()
        for top in 0..<10 {
            local.folders.insert(p("t\(top)"))
            for file in 0..<10 { local.files.insert(p("t\(top)/f\(file).bin")) }
        }
        local.folders.insert(p("t3/sub"))
        local.files.insert(p("t3/sub/deep.bin"))
        let listings = Listings()
        var lazy = VirtualTree(loader: Self.loader(local, count: listings))
        lazy.apply(Change(kind: .redownload(from: p("t1/f1.bin"), to: p("t1/f1.bin")), index: 0), listName: "c.json")
        let planned = listings.count.withLock { $0 }
        let dirty = [p("t1/f1.bin"), p("t2/f2.bin"), p("t4/f4.bin"), p("t5/missing.bin"), p("t3/sub")]
        var asked: [SafeRelativePath] = []
        let patch = lazy.twinPatch(dirty: dirty) { paths in
            asked += paths
            return Self.kinds(local)(paths)
        }
        #expect(asked.sorted() == [p("t2/f2.bin"), p("t3/sub"), p("t4/f4.bin"), p("t5/missing.bin")])
        #expect(patch.downloads == [p("t1/f1.bin")])
        #expect(patch.links.map(\.target) == [p("t2/f2.bin"), p("t3/sub/deep.bin"), p("t4/f4.bin")])
        #expect(patch.folders == [p("t3/sub")])
        // Only t3 and its subfolder were listed for the patch (the folder rebuilt whole).
        #expect(listings.count.withLock { $0 } == planned + 2)
        var failing = VirtualTree(loader: Self.loader(local))
        failing.apply(Change(kind: .redownload(from: p("t1/f1.bin"), to: p("t1/f1.bin")), index: 0), listName: "c.json")
        let listed = failing.twinPatch(dirty: [p("t2/f2.bin"), p("t5/missing.bin")]) { _ in nil }
        #expect(listed.links == [SyncPlan.Reuse(target: p("t2/f2.bin"), source: p("t2/f2.bin"))])
        #expect(listed.removals == [p("t2/f2.bin"), p("t5/missing.bin")])
        #expect(!failing.failed)
    }

    @Test("a change deep in a big tree lists only the folders on its way")
    func listsOnlyWhatChangesReach() {
        var local = LocalTree()
        for top in 0..<20 {
            for sub in 0..<20 {
                let folder = p("t\(top)/s\(sub)")
                local.folders.insert(folder.parent)
                local.folders.insert(folder)
                for file in 0..<10 { local.files.insert(p("t\(top)/s\(sub)/f\(file).bin")) }
            }
        }
        let listings = Listings()
        var lazy = VirtualTree(loader: Self.loader(local, count: listings))
        lazy.apply(Change(kind: .redownload(from: p("t3/s4/f5.bin"), to: p("t3/s4/f5.bin")), index: 0), listName: "c")
        lazy.apply(Change(kind: .add(p("t7/new.bin")), index: 1), listName: "c")
        #expect(listings.count.withLock { $0 } == 4, "the root, t3, t3/s4 and t7")
        let plan = lazy.plan(from: try! CacheVersion("1.0"), to: try! CacheVersion("1.1"))
        #expect(plan.downloads == [p("t3/s4/f5.bin"), p("t7/new.bin")])
        #expect(plan.changedPaths(from: lazy.listed) == [p("t3/s4/f5.bin"), p("t7/new.bin")])
        #expect(lazy.listed.files.count == 10, "t3/s4's files")
    }

    @Test("a loader that fails marks the tree failed")
    func failingLoader() {
        var lazy = VirtualTree(loader: { folder in folder.isRoot ? [.init(name: "a", isFolder: true)] : nil })
        lazy.apply(Change(kind: .add(p("a/new.bin")), index: 0), listName: "c")
        #expect(lazy.failed)
    }
}
