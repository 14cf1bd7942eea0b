import Archive
import Foundation
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// Work and memory follow what the plan needs, not what the storage says: deep paths cost
/// linear work per path, repeated changes reuse the tree's nodes, and warnings stay bounded.
@Suite("Planning work grows with the paths and the tree, not faster", .timeLimit(.minutes(3)))
struct PlannerScalingTests {
    /// A chain of `depth` folders `a/a/…` with `leaf.txt` at the bottom.
    static func chain(_ depth: Int) -> (LocalTree, SafeRelativePath) {
        var folders = Set<SafeRelativePath>()
        var path = SafeRelativePath.root
        for _ in 0..<depth {
            path = path.appending(p("a"))
            folders.insert(path)
        }
        return (LocalTree(folders: folders, files: [path.appending(p("leaf.txt"))]), path)
    }

    /// Plans a rename of the chain's top, a redownload and an add at its bottom, and a move of
    /// its lower half; returns the plan and the tree's count of path components visited.
    static func planDeepChain(_ depth: Int) -> (SyncPlan, Int) {
        let (local, bottom) = chain(depth)
        var tree = VirtualTree(local: local)
        let renamedBottom = p("b").appending(
            SafeRelativePath(validatingComponents: Array(bottom.components.dropFirst())))
        let half = SafeRelativePath(validatingComponents: Array(renamedBottom.components.prefix(depth / 2)))
        let changes: [Change.Kind] = [
            .move(from: p("a"), to: p("b"), rename: true),
            .redownload(from: renamedBottom.appending(p("leaf.txt")), to: renamedBottom.appending(p("leaf.txt"))),
            .add(renamedBottom.appending(p("new.txt"))),
            .move(from: half, to: p("c"), rename: false),
        ]
        for (index, kind) in changes.enumerated() {
            tree.apply(Change(kind: kind, index: index), listName: "deep.json")
        }
        return (tree.plan(from: v("1.0"), to: v("1.1")), tree.componentSteps)
    }

    @Test func aDeepChainIsPlannedWithWorkLinearInEachPath() {
        let depth = 1800
        let (plan, steps) = Self.planDeepChain(depth)
        // The local tree alone has depth folders of lengths 1…depth: that much reading is unavoidable.
        let inputComponents = depth * (depth + 1) / 2 + depth + 1
        let changeComponents = 4 * (depth + 1)
        #expect(steps <= 2 * (inputComponents + changeComponents), "\(steps) component steps")
        #expect(plan.folders.count == depth)
        #expect(plan.folders.first == p("b") && plan.folders.contains(p("c")))
        let lower = depth - depth / 2
        #expect(plan.downloads.count == 2)
        #expect(plan.downloads.allSatisfy { $0.components.count == lower + 2 && $0.components.first == "c" })
        #expect(plan.reused.isEmpty)
        #expect(plan.warnings.isEmpty)
    }

    @Test func doublingTheDepthAboutQuadruplesTheWorkAsTheInputDoes() {
        let (_, small) = Self.planDeepChain(400)
        let (_, large) = Self.planDeepChain(800)
        // The input (the local tree's paths) grows 4×; cubic work would grow 8×.
        #expect(Double(large) / Double(small) < 4.5, "\(small) → \(large) steps")
    }

    @Test func aPathAddedAndRemovedManyTimesReusesItsNodes() {
        var tree = VirtualTree(local: LocalTree(folders: [p("d")], files: [p("d/keep.txt")]))
        let before = tree.allocatedNodes
        for index in 0..<10_000 {
            tree.apply(Change(kind: .add(p("tmp/deep/x.txt")), index: 2 * index), listName: "churn.json")
            tree.apply(Change(kind: .remove(p("tmp")), index: 2 * index + 1), listName: "churn.json")
            tree.apply(Change(kind: .move(from: p("d"), to: p("e"), rename: false), index: 0), listName: "churn.json")
            tree.apply(Change(kind: .move(from: p("e"), to: p("d"), rename: false), index: 0), listName: "churn.json")
        }
        #expect(tree.allocatedNodes <= before + 3)
        #expect(
            tree.plan(from: v("1.0"), to: v("1.1")).reused == [
                SyncPlan.Reuse(target: p("d/keep.txt"), source: p("d/keep.txt"))
            ])
    }

    @Test func warningsBeyondTheLimitAreCountedNotKept() {
        let removes = (0..<5000).map { Change.Kind.remove(p("gone/\($0).txt")) }
        let plan = NetPlanner.plan(
            local: LocalTree(), from: v("1.0"), to: v("1.1"),
            lists: [list("1.0", "1.1", removes)])
        #expect(plan.warnings.count == VirtualTree.maxWarnings + 1)
        #expect(plan.warnings.last == "4000 more tolerated mistakes in the change lists are not listed")
        #expect(plan.warnings.first?.contains("change #0: remove of 'gone/0.txt'") == true)
    }

    @Test func aFolderRefreshNamingFilesTheClientLacksCreatesNothing() throws {
        let layout = try StorageLayout(baseURL: URL(string: "https://h.example/s/")!)
        let hash = String(repeating: "c", count: 64)
        let files = (0..<20_000).map { "\"f\($0).txt\": {\"sha256\": \"\(hash)\", \"size\": 1}" }.joined(
            separator: ", ")
        let json =
            #"{"changes": [{"oldPath": "https://h.example/s/RXCacheContent/d", "newPath": "https://h.example/s/RXCacheContent/d", "isDeepFolderRedownload": true, "files": {\#(files), "keep.txt": {"sha256": "\#(hash)", "size": 2}}}], "from": "1.0", "to": "1.1"}"#
        let reader = try ChangeListReader(
            Data(json.utf8), from: URL(string: "https://h.example/s/changes_1.0_1.1.json")!, layout: layout)
        var tree = VirtualTree(local: LocalTree(folders: [p("d")], files: [p("d/keep.txt")]))
        let before = tree.allocatedNodes
        try reader.forEachChange { tree.apply($0, listName: reader.name) }
        #expect(tree.allocatedNodes == before)
        let plan = tree.plan(from: v("1.0"), to: v("1.1"))
        #expect(plan.downloads == [p("d/keep.txt")])
        #expect(plan.expectedFingerprints == [p("d/keep.txt"): FileFingerprint(size: 2, sha256: hash)])
    }
}

/// A change list of `kinds`, numbered in order.
func list(_ from: String, _ to: String, _ kinds: [Change.Kind]) -> ChangeList {
    ChangeList(
        from: v(from), to: v(to), changes: kinds.enumerated().map { Change(kind: $1, index: $0) },
        url: URL(string: "https://h.example/s/RXCacheConfig/HistoryOfVersions/changes_\(from)_\(to).json")!)
}

extension SafeRelativePath {
    init(validatingComponents components: [String]) {
        self = try! SafeRelativePath(validating: components.joined(separator: "/"))
    }
}
