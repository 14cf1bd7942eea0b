import Archive
import Foundation
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

func p(_ text: String) -> SafeRelativePath { try! SafeRelativePath(validating: text) }
func v(_ text: String) -> CacheVersion { try! CacheVersion(text) }

/// A change list built in code: `list("1.0", "1.1", .add(p("a.txt")), …)`.
func list(_ from: String, _ to: String, _ kinds: Change.Kind...) -> ChangeList {
    ChangeList(
        from: v(from), to: v(to), changes: kinds.enumerated().map { Change(kind: $1, index: $0) },
        url: URL(string: "https://h.example/s/RXCacheConfig/HistoryOfVersions/changes_\(from)_\(to).json")!)
}

@Suite("The net plan composes change lists before anything is downloaded", .timeLimit(.minutes(3)))
struct NetPlannerTests {
    static let local = LocalTree(
        folders: [p("docs"), p("docs/guide"), p("img")],
        files: [p("readme.txt"), p("docs/guide/a.md"), p("docs/guide/b.md"), p("img/logo.png")])

    func plan(_ lists: ChangeList...) -> SyncPlan {
        NetPlanner.plan(
            local: Self.local, from: lists.first?.from ?? v("1.0"), to: lists.last?.to ?? v("1.0"), lists: lists)
    }

    func reuse(_ target: String, _ source: String) -> SyncPlan.Reuse {
        SyncPlan.Reuse(target: p(target), source: p(source))
    }

    @Test func withNoChangesEveryLocalFileIsReusedInPlace() {
        let result = plan()
        #expect(result.downloads.isEmpty)
        #expect(Set(result.reused) == Set(Self.local.files.map { SyncPlan.Reuse(target: $0, source: $0) }))
        #expect(Set(result.folders) == Self.local.folders)
    }

    @Test func aFileAddedThenMovedIsDownloadedOnceFromItsFinalPlace() {
        let result = plan(
            list("1.0", "1.1", .add(p("new/x.json"))),
            list("1.1", "1.2", .move(from: p("new/x.json"), to: p("final/x.json"), rename: false)))
        #expect(result.downloads == [p("final/x.json")])
        #expect(result.folders.contains(p("new")) && result.folders.contains(p("final")))
    }

    @Test func aFileAddedThenRemovedIsNeverDownloaded() {
        let result = plan(list("1.0", "1.1", .add(p("tmp/scratch.txt"))), list("1.1", "1.2", .remove(p("tmp"))))
        #expect(result.downloads.isEmpty)
        #expect(!result.folders.contains(p("tmp")))
    }

    @Test func aFileRedownloadedTwiceIsFetchedOnce() {
        let result = plan(
            list("1.0", "1.1", .redownload(from: p("readme.txt"), to: p("readme.txt"))),
            list("1.1", "1.2", .redownload(from: p("readme.txt"), to: p("readme.txt"))))
        #expect(result.downloads == [p("readme.txt")])
        #expect(!result.reused.contains { $0.target == p("readme.txt") })
    }

    @Test func movesAndRenamesReuseLocalBytes() {
        let result = plan(
            list(
                "1.0", "1.1", .move(from: p("readme.txt"), to: p("README.txt"), rename: true),
                .move(from: p("docs/guide"), to: p("manual"), rename: false)))
        #expect(result.downloads.isEmpty)
        #expect(result.reused.contains(reuse("README.txt", "readme.txt")))
        #expect(result.reused.contains(reuse("manual/a.md", "docs/guide/a.md")))
        #expect(result.reused.contains(reuse("manual/b.md", "docs/guide/b.md")))
        #expect(!result.folders.contains(p("docs/guide")) && result.folders.contains(p("docs")))
    }

    @Test func aFileAddedIntoAFolderMovedInTheSameListLandsInTheNewPlace() {
        let result = plan(
            list(
                "1.0", "1.1", .move(from: p("img"), to: p("assets/img"), rename: false),
                .add(p("assets/img/banner.png"))))
        #expect(result.downloads == [p("assets/img/banner.png")])
        #expect(result.reused.contains(reuse("assets/img/logo.png", "img/logo.png")))
        #expect(Set(result.folders) == [p("docs"), p("docs/guide"), p("assets"), p("assets/img")])
    }

    @Test func aRedownloadPlusMoveFetchesAtTheNewPlaceOnly() {
        let result = plan(list("1.0", "1.1", .redownload(from: p("docs/guide/a.md"), to: p("docs/a.md"))))
        #expect(result.downloads == [p("docs/a.md")])
        #expect(!result.reused.contains { $0.target == p("docs/guide/a.md") || $0.source == p("docs/guide/a.md") })
    }

    @Test func aDeepFolderRedownloadRefreshesEveryFileInsideAndNothingElse() {
        let result = plan(list("1.0", "1.1", .deepRedownload(p("docs"))))
        #expect(result.downloads == [p("docs/guide/a.md"), p("docs/guide/b.md")])
        #expect(result.reused.contains(reuse("readme.txt", "readme.txt")))
    }

    @Test func aMoveOfAMissingFileFetchesTheTargetAndWarns() {
        let result = plan(
            list(
                "1.0", "1.1", .move(from: p("ghost.txt"), to: p("found/ghost.txt"), rename: false),
                .redownload(from: p("nope.bin"), to: p("nope.bin"))))
        #expect(result.downloads == [p("found/ghost.txt"), p("nope.bin")])
        #expect(result.warnings.count == 2)
        #expect(result.warnings[0].contains("change #0") && result.warnings[0].contains("ghost.txt"))
    }

    @Test func removingAFolderRemovesEverythingInside() {
        let result = plan(list("1.0", "1.1", .remove(p("docs"))))
        #expect(!result.reused.contains { $0.target.isWithin(p("docs")) })
        #expect(!result.folders.contains { $0.isWithin(p("docs")) })
    }

    @Test func aMoveOntoAnExistingFileReplacesIt() {
        let result = plan(list("1.0", "1.1", .move(from: p("img/logo.png"), to: p("readme.txt"), rename: false)))
        #expect(result.reused.filter { $0.target == p("readme.txt") } == [reuse("readme.txt", "img/logo.png")])
        #expect(result.downloads.isEmpty)
    }

    @Test func addsCreateMissingParentsAndFoldersWithoutExtension() {
        let result = plan(list("1.0", "1.1", .add(p("x/y/z.txt")), .add(p("empty/inner"))))
        #expect(result.downloads == [p("x/y/z.txt")])
        #expect(Set([p("x"), p("x/y"), p("empty"), p("empty/inner")]).isSubset(of: Set(result.folders)))
    }

    @Test func aPathFreedByAMoveCanBeAddedAgain() {
        let result = plan(
            list("1.0", "1.1", .move(from: p("readme.txt"), to: p("old/readme.txt"), rename: false)),
            list("1.1", "1.2", .add(p("readme.txt"))))
        #expect(result.reused.contains(reuse("old/readme.txt", "readme.txt")))
        #expect(result.downloads == [p("readme.txt")])
    }

    @Test func thePlanIdentityChangesWithWhatItBuilds() {
        let a = plan(list("1.0", "1.1", .add(p("a.txt"))))
        let same = plan(list("1.0", "1.1", .add(p("a.txt"))))
        let other = plan(list("1.0", "1.1", .add(p("b.txt"))))
        #expect(a.identity == same.identity)
        #expect(a.identity != other.identity)
    }

    /// The identity is stored with a pending plan, so a run of a newer binary must compute the
    /// same value to resume a plan an older one started: each entry's text joined, then hashed.
    @Test func thePlanIdentityIsTheHashOfEachEntrysText() {
        let result = plan(
            list(
                "1.0", "1.1", .add(p("x/y/z.txt")),
                .move(from: p("readme.txt"), to: p("docs/read me.txt"), rename: true)
            ))
        #expect(!result.folders.isEmpty && !result.reused.isEmpty && !result.downloads.isEmpty)
        var texts = ["1.0>1.1"]
        texts += result.folders.map { "d:\($0.string)" }
        texts += result.reused.map { "l:\($0.target.string)<\($0.source.string)" }
        texts += result.downloads.map { "g:\($0.string)" }
        var hasher = FNV1a64()
        for text in texts { hasher.combine(text) }
        #expect(result.identity == String(hasher.value, radix: 16))
        // Fed in pieces, a text hashes as the joined one.
        var pieces = FNV1a64()
        pieces.feed("l:")
        pieces.feed(p("a/b/c"))
        pieces.feed("<")
        pieces.feed(p("d"))
        pieces.endText()
        var joined = FNV1a64()
        joined.combine("l:a/b/c<d")
        #expect(pieces.value == joined.value)
    }
}

@Suite("The replay chain starts at the local version and stops at the actual one", .timeLimit(.minutes(3)))
struct UpdateChainTests {
    @Test func theChainFollowsFromAndToAndStopsAtActual() throws {
        let lists = [list("1.0", "1.1"), list("1.1", "1.2"), list("1.2", "1.3"), list("1.3", "1.4")]
        let chain = try #require(UpdateChain.resolve(lists, from: v("1.1"), to: v("1.3")))
        #expect(chain.map(\.to.text) == ["1.2", "1.3"])
    }

    @Test func entriesThatDoNotContinueTheChainAreSkipped() throws {
        let lists = [list("0.9", "1.0"), list("1.0", "1.5"), list("1.0", "1.1"), list("1.1", "1.2")]
        let chain = try #require(UpdateChain.resolve(lists, from: v("1.0"), to: v("1.2")))
        #expect(chain.map(\.to.text) == ["1.1", "1.2"])
    }

    @Test func aGapMeansNoChain() {
        #expect(UpdateChain.resolve([list("1.0", "1.1"), list("1.2", "1.3")], from: v("1.0"), to: v("1.3")) == nil)
    }

    @Test func versionsCompareNumericallyInTheChain() throws {
        let chain = try #require(
            UpdateChain.resolve([list("1.9", "1.10"), list("1.10", "2.0")], from: v("1.9"), to: v("2")))
        #expect(chain.count == 2)
    }

    @Test func candidatesAreChosenByFileNameWithoutFetching() throws {
        let updates = try ProtocolParsingTests.updateList(
            ["changes_1.0_1.1.json", "changes_1.1_1.2.json", "changes_1.2_1.3.json", "other.json"])
        let picked = UpdateChain.candidates(updates, local: v("1.1"), actual: v("1.2")).map(\.url.lastPathComponent)
        #expect(picked == ["changes_1.1_1.2.json", "other.json"])
    }
}
