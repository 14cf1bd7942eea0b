import Archive
import Foundation
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// protocol.md §1.3: a move, rename or redownload to a new path replaces what stands at the
/// target; it never merges two folders. Every kind of change that moves something, and the
/// tolerated mistakes of §3.1 that fetch the target instead.
@Suite("A change that moves something replaces what stands at its target", .timeLimit(.minutes(3)))
struct NetPlannerReplaceTests {
    /// docs/{intro.md, guide/{a.md, b.md}}, img/logo.png, readme.txt
    static let local = LocalTree(
        folders: [p("docs"), p("docs/guide"), p("img")],
        files: [p("readme.txt"), p("docs/intro.md"), p("docs/guide/a.md"), p("docs/guide/b.md"), p("img/logo.png")])

    static let hash = String(repeating: "ab", count: 32)

    /// The plan's final tree: folders, and each file with where its bytes come from.
    struct Outcome: Equatable, CustomStringConvertible {
        var folders: Set<String>
        var files: [String: String]
        var description: String { "folders \(folders.sorted()), files \(files.sorted { $0.key < $1.key })" }
    }

    func outcome(_ changes: Change...) -> (Outcome, SyncPlan) {
        let list = ChangeList(
            from: v("1.0"), to: v("1.1"), changes: changes,
            url: URL(string: "https://h.example/s/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json")!)
        let plan = NetPlanner.plan(local: Self.local, from: v("1.0"), to: v("1.1"), lists: [list])
        var files: [String: String] = [:]
        for reuse in plan.reused { files[reuse.target.string] = "local " + reuse.source.string }
        for download in plan.downloads { files[download.string] = "download" }
        return (Outcome(folders: Set(plan.folders.map(\.string)), files: files), plan)
    }

    func change(_ kind: Change.Kind, fingerprints: [SafeRelativePath: FileFingerprint] = [:]) -> Change {
        Change(kind: kind, index: 0, folderFingerprints: fingerprints)
    }

    static let untouched = ["readme.txt": "local readme.txt"]

    @Test(arguments: [false, true])
    func aFolderMovedOntoAFolderReplacesIt(rename: Bool) {
        let (result, _) = outcome(change(.move(from: p("img"), to: p("docs/guide"), rename: rename)))
        #expect(
            result
                == Outcome(
                    folders: ["docs", "docs/guide"],
                    files: Self.untouched.merging([
                        "docs/intro.md": "local docs/intro.md",
                        "docs/guide/logo.png": "local img/logo.png",
                    ]) { a, _ in a }))
    }

    @Test func aFolderRedownloadedToAFolderReplacesIt() {
        let fingerprint = FileFingerprint(size: 3, sha256: Self.hash)
        let (result, plan) = outcome(
            change(
                .redownload(from: p("img"), to: p("docs/guide")),
                fingerprints: [p("docs/guide/logo.png"): fingerprint]))
        #expect(
            result
                == Outcome(
                    folders: ["docs", "docs/guide"],
                    files: Self.untouched.merging([
                        "docs/intro.md": "local docs/intro.md",
                        "docs/guide/logo.png": "download",
                    ]) { a, _ in a }))
        #expect(plan.expectedFingerprints == [p("docs/guide/logo.png"): fingerprint])
    }

    @Test func aDeepFolderRedownloadToANewPathReplacesTheFolderThere() throws {
        // As the parser reads `isDeepFolderRedownload` with two different paths.
        let layout = try StorageLayout(baseURL: URL(string: "https://h.example/s/")!)
        let c = "https://h.example/s/RXCacheContent/"
        let json =
            #"{"from": "1.0", "to": "1.1", "changes": [{"oldPath": "\#(c)img", "newPath": "\#(c)docs", "redownload": true, "isDeepFolderRedownload": true, "files": {"logo.png": {"sha256": "\#(Self.hash)", "size": 3}}}]}"#
        let list = try ChangeList.parse(
            Data(json.utf8),
            from: URL(string: "https://h.example/s/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json")!,
            layout: layout)
        let (result, plan) = outcome(list.changes[0])
        #expect(
            result
                == Outcome(
                    folders: ["docs"], files: Self.untouched.merging(["docs/logo.png": "download"]) { a, _ in a }))
        #expect(plan.expectedFingerprints == [p("docs/logo.png"): FileFingerprint(size: 3, sha256: Self.hash)])
    }

    @Test func aFileMovedOntoAFolderReplacesTheFolder() {
        let (result, _) = outcome(change(.move(from: p("readme.txt"), to: p("docs/guide"), rename: false)))
        #expect(
            result
                == Outcome(
                    folders: ["docs", "img"],
                    files: [
                        "docs/intro.md": "local docs/intro.md", "docs/guide": "local readme.txt",
                        "img/logo.png": "local img/logo.png",
                    ]))
    }

    @Test func aFileRedownloadedOntoAFolderReplacesTheFolder() {
        let (result, _) = outcome(change(.redownload(from: p("readme.txt"), to: p("docs"))))
        #expect(result == Outcome(folders: ["img"], files: ["docs": "download", "img/logo.png": "local img/logo.png"]))
    }

    @Test func aFolderMovedOntoAFileReplacesTheFile() {
        let (result, _) = outcome(change(.move(from: p("img"), to: p("readme.txt"), rename: false)))
        #expect(
            result
                == Outcome(
                    folders: ["docs", "docs/guide", "readme.txt"],
                    files: [
                        "docs/intro.md": "local docs/intro.md", "docs/guide/a.md": "local docs/guide/a.md",
                        "docs/guide/b.md": "local docs/guide/b.md", "readme.txt/logo.png": "local img/logo.png",
                    ]))
    }

    @Test(arguments: [false, true])
    func aFolderMovedOntoItsOwnAncestorBecomesThatAncestor(rename: Bool) {
        let (result, _) = outcome(change(.move(from: p("docs/guide"), to: p("docs"), rename: rename)))
        #expect(
            result
                == Outcome(
                    folders: ["docs", "img"],
                    files: Self.untouched.merging([
                        "docs/a.md": "local docs/guide/a.md", "docs/b.md": "local docs/guide/b.md",
                        "img/logo.png": "local img/logo.png",
                    ]) { a, _ in a }))
    }

    @Test func aFolderRedownloadedOntoItsOwnAncestorBecomesThatAncestor() {
        let (result, _) = outcome(change(.redownload(from: p("docs/guide"), to: p("docs"))))
        #expect(
            result
                == Outcome(
                    folders: ["docs", "img"],
                    files: Self.untouched.merging([
                        "docs/a.md": "download", "docs/b.md": "download",
                        "img/logo.png": "local img/logo.png",
                    ]) { a, _ in a }))
    }

    @Test(arguments: [
        Change.Kind.move(from: p("ghost"), to: p("docs"), rename: false), .redownload(from: p("ghost"), to: p("docs")),
    ])
    func aMissingSourceMovedOntoAFolderLeavesTheTargetEmpty(kind: Change.Kind) {
        let (result, plan) = outcome(change(kind))
        #expect(
            result
                == Outcome(
                    folders: ["docs", "img"],
                    files: Self.untouched.merging(["img/logo.png": "local img/logo.png"]) { a, _ in a }))
        #expect(plan.warnings.count == 1 && plan.warnings[0].contains("'ghost', which is not present"))
    }

    @Test func aMissingFileMovedOntoAFileFetchesTheTarget() {
        let (result, plan) = outcome(change(.move(from: p("ghost.txt"), to: p("docs/intro.md"), rename: false)))
        #expect(result.files["docs/intro.md"] == "download")
        #expect(plan.warnings.count == 1)
    }

    @Test func addingAFolderThatExistsKeepsWhatItHolds() {
        let (result, _) = outcome(change(.add(p("docs/guide"))))
        #expect(result.files["docs/guide/a.md"] == "local docs/guide/a.md")
    }
}
