import Archive
import Foundation
import Testing
import ToolSupport

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

@Suite("The change differ publishes the smallest list that replays to the new tree", .timeLimit(.minutes(3)))
struct ChangeDifferTests {
    // MARK: - Table

    @Test("Each table case replays to the new tree with the expected changes", arguments: DifferCase.all)
    func eachCaseReplaysToTheNewTreeWithTheExpectedChanges(_ example: DifferCase) throws {
        let result = try DifferReplay(old: example.old, new: example.new)
        #expect(result.problems.isEmpty, "\(result.problems.joined(separator: "\n"))")
        #expect(result.changes == example.changes)
        if let downloads = example.downloads {
            #expect(result.plan.downloads == downloads.map(dp))
        }
        try expectScopeChangesNothing(example.old, example.new)
    }

    // MARK: - Scope

    @Test func theDeltaNamesTheFoldersAlongEachDifferenceAndNothingElse() {
        let old = differTree("a/x/1.txt=1", "a/x/2.txt=2", "a/y/3.txt=3", "b/4.txt=4", "c/", "d/e/")
        // Equal trees: nothing differs.
        #expect(TreeDelta(from: old, to: old).differing.isEmpty)
        // New bytes deep down: the file's folder and its ancestors.
        var edited = old
        edited.files[dp("a/x/2.txt")] = differFingerprint("2b")
        #expect(TreeDelta(from: old, to: edited).differing == [.root, dp("a"), dp("a/x")])
        // A removed file, an added empty folder, a file become a folder.
        var mixed = old
        mixed.files[dp("b/4.txt")] = nil
        mixed.folders.insert(dp("d/e/f"))
        mixed.files[dp("a/y/3.txt")] = nil
        mixed.folders.insert(dp("a/y/3.txt"))
        #expect(
            TreeDelta(from: old, to: mixed).differing
                == [.root, dp("b"), dp("d"), dp("d/e"), dp("d/e/f"), dp("a"), dp("a/y"), dp("a/y/3.txt")])
        // A removed empty folder differs itself, like an added one.
        var removed = old
        removed.folders.remove(dp("c"))
        #expect(TreeDelta(from: old, to: removed).differing == [.root, dp("c")])
        #expect(TreeDelta(from: removed, to: old).differing == [.root, dp("c")])
    }

    @Test func theScopeKeepsTheDifferingFoldersAndAnEmptyStandInForEachTopmostSharedOne() {
        let old = differTree("a/x/1.txt=1", "a/x/2.txt=2", "a/y/3.txt=3", "b/4.txt=4", "c/", "top.txt=t")
        var new = old
        new.files[dp("a/x/2.txt")] = differFingerprint("2b")
        let scope = DiffScope(old: old, new: new, delta: TreeDelta(from: old, to: new))
        #expect(scope.old.files.keys.sorted() == [dp("a/x/1.txt"), dp("a/x/2.txt"), dp("top.txt")])
        #expect(scope.new.files[dp("a/x/2.txt")] == differFingerprint("2b"))
        #expect(scope.old.folders == [dp("a"), dp("a/x"), dp("a/y"), dp("b"), dp("c")])
        #expect(scope.new.folders == scope.old.folders)
        // `c` is shared but empty: it holds nothing a folder redownload could skip.
        #expect(scope.untouched == [dp("a/y"), dp("b")])
    }

    @Test func aFolderWithAnUnchangedEmptySubfolderAndEveryFileEditedIsStillOneFolderRedownload() throws {
        let old = differTree("g/1.txt=1", "g/2.txt=2", "g/empty/", "h/5.txt=5")
        let new = differTree("g/1.txt=1b", "g/2.txt=2b", "g/empty/", "h/5.txt=5")
        let result = try DifferReplay(old: old, new: new)
        #expect(result.problems.isEmpty, "\(result.problems)")
        #expect(result.changes == [.deepRedownload(dp("g"))])
        // A shared subfolder with a file keeps its files from being downloaded again.
        let withFile = differTree("g/1.txt=1", "g/2.txt=2", "g/kept/3.txt=3")
        let edited = differTree("g/1.txt=1b", "g/2.txt=2b", "g/kept/3.txt=3")
        #expect(
            try ChangeDiffer.diff(from: withFile, to: edited)
                == [
                    .redownload(from: dp("g/1.txt"), to: dp("g/1.txt")),
                    .redownload(from: dp("g/2.txt"), to: dp("g/2.txt")),
                ])
        try expectScopeChangesNothing(old, new)
        try expectScopeChangesNothing(withFile, edited)
    }

    @Test func aRenamedFolderOfAThousandFilesIsOneMoveAndNoDownload() throws {
        var files: [String] = (0..<1000).map { "photos/\($0 % 10)/img\($0).jpg=P\($0)" }
        files.append("readme.txt=R")
        let old = differTree(files)
        let new = differTree(files.map { $0.hasPrefix("photos/") ? "pictures/" + $0.dropFirst("photos/".count) : $0 })
        let result = try DifferReplay(old: old, new: new)
        #expect(result.problems.isEmpty, "\(result.problems.joined(separator: "\n"))")
        #expect(result.changes == [.move(from: dp("photos"), to: dp("pictures"), rename: true)])
        #expect(result.plan.downloads.isEmpty)
        #expect(result.plan.reused.count == 1001)
    }

    @Test func aRenamedFolderOfAThousandFilesThatGainedOneIsAMoveAndAnAdd() throws {
        let files: [String] = (0..<1000).map { "photos/\($0 % 10)/img\($0).jpg=P\($0)" } + ["readme.txt=R"]
        let old = differTree(files)
        let new = differTree(
            files.map { $0.hasPrefix("photos/") ? "pictures/" + $0.dropFirst("photos/".count) : $0 }
                + ["pictures/3/new.jpg=N"])
        let result = try DifferReplay(old: old, new: new)
        #expect(result.problems.isEmpty, "\(result.problems.joined(separator: "\n"))")
        #expect(
            result.changes == [
                .move(from: dp("photos"), to: dp("pictures"), rename: true), .add(dp("pictures/3/new.jpg")),
            ])
        #expect(result.plan.downloads == [dp("pictures/3/new.jpg")])
    }

    @Test func aNewFileWithoutExtensionIsRefusedWithItsName() {
        let old = differTree("readme.txt=R")
        let new = differTree("readme.txt=R", "docs/LICENSE=L")
        let error = #expect(throws: ChangeDifferError.self) { try ChangeDiffer.diff(from: old, to: new) }
        #expect(error?.code == .fileWithoutExtension)
        #expect(error?.paths == [dp("docs/LICENSE")])
        #expect(error?.message.contains("'docs/LICENSE'") == true && error?.message.contains("extension") == true)
    }

    /// A new file without extension comes by a redownload from an old file this version
    /// removes: the client moves that file to the new name and downloads the new bytes over it.
    /// Two such files need two removed files; with one, the list is refused as before.
    @Test func aNewFileWithoutExtensionComesFromARemovedFile() throws {
        let old = differTree("readme.txt=R", "old.txt=O", "notes/draft.md=D", "notes/keep.md=K")
        let new = differTree("readme.txt=R", "notes/keep.md=K", "docs/LICENSE=L", "Makefile=M")
        let result = try DifferReplay(old: old, new: new)
        #expect(result.problems.isEmpty, "\(result.problems.joined(separator: "\n"))")
        var sources: Set<SafeRelativePath> = []
        var targets: Set<SafeRelativePath> = []
        for change in result.changes {
            guard case .redownload(let from, let to) = change else {
                Issue.record("only the two redownloads: \(result.changes)")
                continue
            }
            sources.insert(from)
            targets.insert(to)
        }
        #expect(sources == [dp("old.txt"), dp("notes/draft.md")])
        #expect(targets == [dp("docs/LICENSE"), dp("Makefile")])
        #expect(Set(result.plan.downloads) == [dp("docs/LICENSE"), dp("Makefile")])

        let one = differTree("readme.txt=R", "old.txt=O")
        let error = #expect(throws: ChangeDifferError.self) { try ChangeDiffer.diff(from: one, to: new) }
        #expect(error?.code == .fileWithoutExtension)
    }

    @Test func aNewEmptyFolderWithAnExtensionIsRefusedWithItsName() {
        let old = differTree("readme.txt=R")
        let new = differTree("readme.txt=R", "assets/bundle.app/")
        let error = #expect(throws: ChangeDifferError.self) { try ChangeDiffer.diff(from: old, to: new) }
        #expect(error?.code == .emptyFolderWithExtension)
        #expect(error?.paths == [dp("assets/bundle.app")])
        #expect(error?.message.contains("'assets/bundle.app'") == true)
    }

    @Test func aFileWithoutExtensionThatOnlyMovesOrChangesIsFine() throws {
        let old = differTree("LICENSE=L", "Makefile=M")
        let new = differTree("legal/LICENSE=L", "Makefile=M2")
        let result = try DifferReplay(old: old, new: new)
        #expect(result.problems.isEmpty, "\(result.problems.joined(separator: "\n"))")
        #expect(
            result.changes == [
                .move(from: dp("LICENSE"), to: dp("legal/LICENSE"), rename: false),
                .redownload(from: dp("Makefile"), to: dp("Makefile")),
            ])
    }

    @Test func aPathThatIsBothAFileAndAFolderIsRefused() {
        let broken = ContentTree(folders: [dp("a.txt")], files: [dp("a.txt"): differFingerprint("A")])
        let error = #expect(throws: ChangeDifferError.self) { try ChangeDiffer.diff(from: differTree(), to: broken) }
        #expect(error?.code == .invalidTree)
        #expect(error?.paths == [dp("a.txt")])
    }

    @Test func foldersImpliedByFilesNeedNotBeListed() throws {
        let old = ContentTree(folders: [], files: [dp("a/b/c.txt"): differFingerprint("C")])
        let new = ContentTree(folders: [], files: [dp("x/b/c.txt"): differFingerprint("C")])
        #expect(try ChangeDiffer.diff(from: old, to: new) == [.move(from: dp("a"), to: dp("x"), rename: true)])
    }

    // MARK: - Randomized

    @Test func randomTreesAndMutationsReplayExactlyWithNoMoreChangesThanANaiveDiff() throws {
        var failures: [String] = []
        // What the 300 lists exercised, so that a generator gone bland fails the test.
        var totals = (
            changes: 0, naive: 0, moves: 0, movesOntoOldPaths: 0, refills: 0, redownloads: 0, movedRedownloads: 0,
            folderRedownloads: 0, shortenedByFolderMoves: 0, scoped: 0
        )
        for seed in UInt64(1)...300 {
            var generator = RandomTrees(seed: seed)
            let (old, new) = generator.makePair()
            do {
                let result = try DifferReplay(old: old, new: new)
                let naive = naiveChangeCount(old: old, new: new)
                var problems = result.problems
                if result.changes.count > naive {
                    problems.append("\(result.changes.count) changes, more than the naive diff's \(naive)")
                }
                // The same trees built in another order give the same list.
                let again = try ChangeDiffer.diff(from: rebuilt(old), to: rebuilt(new))
                if again != result.changes { problems.append("a second run gave another list: \(again)") }
                // Diffing only the differing folders gives the list of the whole trees, and the
                // digest that reuses the old tree's shared folders is the whole tree's.
                let delta = TreeDelta(from: old, to: new)
                let whole = try ChangeDiffer.diff(from: old, to: new, delta: delta, scoped: false)
                if whole != result.changes { problems.append("the whole trees give another list: \(whole)") }
                if TreeDigest.digest(of: new, reusing: TreeDigest.folderDigests(of: old), delta: delta)
                    != TreeDigest.digest(of: new)
                {
                    problems.append("the digest reusing the old tree's folders differs")
                }
                if DiffScope(old: old, new: new, delta: delta).old.files.count < old.files.count {
                    totals.scoped += 1
                }
                if !problems.isEmpty {
                    failures.append(
                        "seed \(seed): \(problems.joined(separator: "; "))\n  old: \(describe(old))\n  new: \(describe(new))\n  changes: \(result.changes)"
                    )
                }
                let withoutFolderMoves = try ChangeDiffer.diffTrees(
                    DiffTree(old, role: "old"), DiffTree(new, role: "new")
                ).kinds
                if result.changes.count < withoutFolderMoves.count { totals.shortenedByFolderMoves += 1 }
                totals.changes += result.changes.count
                totals.naive += naive
                for change in result.changes {
                    switch change {
                    case .move(_, let to, _):
                        totals.moves += 1
                        // A move onto, or under, a path that held something else in the old tree.
                        if old.folders.contains(to) || old.files[to] != nil
                            || to.ancestors.contains(where: { old.files[$0] != nil })
                        {
                            totals.movesOntoOldPaths += 1
                        }
                    case .add(let path) where old.files[path] != nil:
                        totals.refills += 1
                    case .redownload(let from, let to):
                        totals.redownloads += 1
                        if from != to { totals.movedRedownloads += 1 }
                    case .deepRedownload:
                        totals.folderRedownloads += 1
                    default:
                        break
                    }
                }
            } catch {
                failures.append("seed \(seed): \(error)\n  old: \(describe(old))\n  new: \(describe(new))")
            }
        }
        #expect(failures.isEmpty, "\(failures.count) seeds failed:\n\(failures.prefix(5).joined(separator: "\n"))")
        #expect(
            totals.moves > 200 && totals.movesOntoOldPaths > 50 && totals.refills > 20 && totals.redownloads > 50
                && totals.movedRedownloads > 20 && totals.folderRedownloads > 5 && totals.shortenedByFolderMoves > 5
                && totals.scoped > 50,
            "the generator no longer exercises moves, collisions, swaps, edits, moved edits or folder edits: \(totals)")
        print("differ random totals: \(totals)")
        #expect(totals.changes < totals.naive)
    }
}

extension ChangeDifferTests {
    // MARK: - Cases

    /// One table row: two trees and the exact list expected between them.
    struct DifferCase: Sendable, CustomTestStringConvertible {
        var name: String
        var old: ContentTree
        var new: ContentTree
        var changes: [Change.Kind]
        /// The plan's downloads, when the case is about them.
        var downloads: [String]?

        var testDescription: String { name }

        static let base = ["readme.txt=R", "docs/a.md=A", "docs/guide/b.md=B", "img/"]

        static func edit(_ remove: [String] = [], _ add: [String] = []) -> ContentTree {
            differTree(base.filter { entry in !remove.contains { entry.hasPrefix($0) } } + add)
        }

        static let all: [DifferCase] = [
            DifferCase(name: "nothing changed", old: differTree(base), new: differTree(base), changes: []),
            DifferCase(
                name: "a new file is one add", old: differTree(base), new: edit([], ["c.txt=C"]),
                changes: [.add(dp("c.txt"))], downloads: ["c.txt"]),
            DifferCase(
                name: "a new nested file is one add and its folders come with it", old: differTree(base),
                new: edit([], ["x/y/z.txt=Z"]), changes: [.add(dp("x/y/z.txt"))]),
            DifferCase(
                name: "a new empty folder is one add", old: differTree(base), new: edit([], ["empty/"]),
                changes: [.add(dp("empty"))]),
            DifferCase(
                name: "a new nested empty folder is one add of the deepest", old: differTree(base),
                new: edit([], ["x/y/"]), changes: [.add(dp("x/y"))]),
            DifferCase(
                name: "a removed file is one remove", old: differTree(base), new: edit(["readme.txt"]),
                changes: [.remove(dp("readme.txt"))]),
            DifferCase(
                name: "a removed folder with its contents is one remove", old: differTree(base), new: edit(["docs"]),
                changes: [.remove(dp("docs"))]),
            DifferCase(
                name: "a renamed file is one rename", old: differTree(base),
                new: edit(["readme.txt"], ["README.txt=R"]),
                changes: [.move(from: dp("readme.txt"), to: dp("README.txt"), rename: true)], downloads: []),
            DifferCase(
                name: "a moved file is one move", old: differTree(base),
                new: edit(["readme.txt"], ["img/readme.txt=R"]),
                changes: [.move(from: dp("readme.txt"), to: dp("img/readme.txt"), rename: false)], downloads: []),
            DifferCase(
                name: "a folder moved into a new parent is one move", old: differTree(base),
                new: edit(["docs/guide"], ["archive/2024/guide/b.md=B"]),
                changes: [.move(from: dp("docs/guide"), to: dp("archive/2024/guide"), rename: false)], downloads: []),
            DifferCase(
                name: "a renamed folder's subfolders travel with it", old: differTree("p/q/f.txt=F", "p/q/e/"),
                new: differTree("r/q/f.txt=F", "r/q/e/"), changes: [.move(from: dp("p"), to: dp("r"), rename: true)]),
            DifferCase(
                name: "an edited file is one redownload", old: differTree(base),
                new: edit(["readme.txt"], ["readme.txt=R2"]),
                changes: [.redownload(from: dp("readme.txt"), to: dp("readme.txt"))], downloads: ["readme.txt"]),
            DifferCase(
                name: "a rename with an edit is a remove and an add", old: differTree(base),
                new: edit(["readme.txt"], ["README.txt=R2"]),
                changes: [.remove(dp("readme.txt")), .add(dp("README.txt"))], downloads: ["README.txt"]),
            DifferCase(
                name: "two swapped names are a move and an add", old: differTree("a.txt=A", "b.txt=B"),
                new: differTree("a.txt=B", "b.txt=A"),
                changes: [.move(from: dp("a.txt"), to: dp("b.txt"), rename: true), .add(dp("a.txt"))],
                downloads: ["a.txt"]),
            DifferCase(
                name: "two swapped names without extension are two redownloads",
                old: differTree("LICENSE=L", "NOTICE=N", "readme.txt=R"),
                new: differTree("LICENSE=N", "NOTICE=L", "readme.txt=R"),
                changes: [
                    .redownload(from: dp("LICENSE"), to: dp("LICENSE")),
                    .redownload(from: dp("NOTICE"), to: dp("NOTICE")),
                ]),
            DifferCase(
                name: "three rotated names are two moves and an add", old: differTree("a.txt=A", "b.txt=B", "c.txt=C"),
                new: differTree("a.txt=C", "b.txt=A", "c.txt=B"),
                changes: [
                    .move(from: dp("b.txt"), to: dp("c.txt"), rename: true),
                    .move(from: dp("a.txt"), to: dp("b.txt"), rename: true), .add(dp("a.txt")),
                ], downloads: ["a.txt"]),
            DifferCase(
                name: "a chain of renames moves the last one first", old: differTree("a.txt=A", "b.txt=B"),
                new: differTree("b.txt=A", "c.txt=B"),
                changes: [
                    .move(from: dp("b.txt"), to: dp("c.txt"), rename: true),
                    .move(from: dp("a.txt"), to: dp("b.txt"), rename: true),
                ], downloads: []),
            DifferCase(
                name: "duplicate bytes pair in path order and extra copies are added",
                old: differTree("a.txt=X", "b.txt=X"), new: differTree("c.txt=X", "d.txt=X", "e.txt=X"),
                changes: [
                    .move(from: dp("a.txt"), to: dp("c.txt"), rename: true),
                    .move(from: dp("b.txt"), to: dp("d.txt"), rename: true), .add(dp("e.txt")),
                ], downloads: ["e.txt"]),
            DifferCase(
                name: "a copy of a file that stays is downloaded", old: differTree("a.txt=X"),
                new: differTree("a.txt=X", "copy/a.txt=X"), changes: [.add(dp("copy/a.txt"))]),
            DifferCase(
                name: "an edited file whose old bytes moved away is added again", old: differTree("a.txt=A"),
                new: differTree("a.txt=Z", "b.txt=A"),
                changes: [.move(from: dp("a.txt"), to: dp("b.txt"), rename: true), .add(dp("a.txt"))],
                downloads: ["a.txt"]),
            DifferCase(
                name: "a folder removed and its name reused for a file is removed first",
                old: differTree("data.v1/a.txt=A", "keep.txt=K"), new: differTree("data.v1=N", "keep.txt=K"),
                changes: [.remove(dp("data.v1")), .add(dp("data.v1"))]),
            DifferCase(
                name: "a folder replaced by a file moved out of it is one move",
                old: differTree("notes/keep.md=K", "notes/x.txt=X"), new: differTree("notes=K"),
                changes: [.move(from: dp("notes/keep.md"), to: dp("notes"), rename: false)], downloads: []),
            DifferCase(
                name: "a folder replaced by a file after another file moved out of it",
                old: differTree("notes/keep.md=K", "notes/other.md=O"), new: differTree("notes=K", "other.md=O"),
                changes: [
                    .move(from: dp("notes/other.md"), to: dp("other.md"), rename: false),
                    .move(from: dp("notes/keep.md"), to: dp("notes"), rename: false),
                ], downloads: []),
            DifferCase(
                name: "a folder renamed onto the name of a removed file replaces the file in one move",
                old: differTree("docs/a.md=A", "docs/b.md=B", "manual=M"),
                new: differTree("manual/a.md=A", "manual/b.md=B"),
                changes: [.move(from: dp("docs"), to: dp("manual"), rename: true)], downloads: []),
            DifferCase(
                name: "a folder renamed onto the name of a file that moves on moves that file first",
                old: differTree("docs/a.md=A", "manual=M"), new: differTree("manual/a.md=A", "old/manual=M"),
                changes: [
                    .move(from: dp("manual"), to: dp("old/manual"), rename: false),
                    .move(from: dp("docs"), to: dp("manual"), rename: true),
                ], downloads: []),
            DifferCase(
                name: "a file moved onto a removed folder's name replaces the folder in one move",
                old: differTree("notes/x.txt=X", "draft=D"), new: differTree("notes=D"),
                changes: [.move(from: dp("draft"), to: dp("notes"), rename: true)], downloads: []),
            DifferCase(
                name: "two folders that become files holding each other's bytes go through a temporary name",
                old: differTree("docs/a/b=B", "img/c/LICENSE=L"), new: differTree("img=B", "docs=L"),
                changes: [
                    .move(from: dp("img/c/LICENSE"), to: dp("~content-sync-1.tmp"), rename: false),
                    .move(from: dp("docs/a/b"), to: dp("img"), rename: false),
                    .move(from: dp("~content-sync-1.tmp"), to: dp("docs"), rename: true),
                ], downloads: []),
            DifferCase(
                name: "a folder and a file that trade places give up the folder move",
                old: differTree("a/x/", "b=B"), new: differTree("a=B", "b/"),
                changes: [.move(from: dp("b"), to: dp("a"), rename: true), .add(dp("b"))], downloads: []),
            DifferCase(
                name: "a file moved out of a folder that is then removed moves first",
                old: differTree("old/keep.txt=K", "old/junk.txt=J"), new: differTree("keep.txt=K"),
                changes: [.move(from: dp("old/keep.txt"), to: dp("keep.txt"), rename: false), .remove(dp("old"))]),
            DifferCase(
                name: "a file moved to where a removed file must become its folder removes the file first",
                old: differTree("build=B", "src/out.txt=O"), new: differTree("build/out.txt=O", "src/"),
                changes: [.remove(dp("build")), .move(from: dp("src/out.txt"), to: dp("build/out.txt"), rename: false)]),
            DifferCase(
                name:
                    "a file whose own name becomes its folder is removed and added, as the client ignores a move into itself",
                old: differTree("notes=N"), new: differTree("notes/notes.txt=N"),
                changes: [.remove(dp("notes")), .add(dp("notes/notes.txt"))]),
            DifferCase(
                name: "a file whose name becomes an empty folder is removed then added",
                old: differTree("docs=D"), new: differTree("docs/"), changes: [.remove(dp("docs")), .add(dp("docs"))]),
            DifferCase(
                name: "of two equal folders one is moved and the other removed",
                old: differTree("a/x.txt=X", "b/x.txt=X"), new: differTree("c/x.txt=X"),
                changes: [.move(from: dp("a"), to: dp("c"), rename: true), .remove(dp("b"))]),
            DifferCase(
                name: "an empty folder with an extension can still be renamed", old: differTree("x.d/"),
                new: differTree("y.d/"), changes: [.move(from: dp("x.d"), to: dp("y.d"), rename: true)]),
            DifferCase(
                name: "a folder moved while its old place gets a new file of the same name",
                old: differTree("pack.zip/a.txt=A"), new: differTree("pack/a.txt=A", "pack.zip=Z"),
                changes: [.move(from: dp("pack.zip"), to: dp("pack"), rename: true), .add(dp("pack.zip"))]),
            DifferCase(
                name: "names with spaces and non-ASCII letters are moved like any other",
                old: differTree("Ünïcode/日本 語.txt=J", "with space/a b.md=S"),
                new: differTree("Ünïcode/résumé.txt=J", "with space/a b.md=S2"),
                changes: [
                    .move(from: dp("Ünïcode/日本 語.txt"), to: dp("Ünïcode/résumé.txt"), rename: true),
                    .redownload(from: dp("with space/a b.md"), to: dp("with space/a b.md")),
                ]),
            DifferCase(
                name: "a folder whose every file changed is one deep folder redownload",
                old: differTree(base), new: edit(["docs/"], ["docs/a.md=A2", "docs/guide/b.md=B2"]),
                changes: [.deepRedownload(dp("docs"))], downloads: ["docs/a.md", "docs/guide/b.md"]),
            DifferCase(
                name: "a deep folder redownload keeps the folder's empty folders",
                old: differTree("site/a.css=A", "site/b.css=B", "site/empty/", "keep.txt=K"),
                new: differTree("site/a.css=A2", "site/b.css=B2", "site/empty/", "keep.txt=K"),
                changes: [.deepRedownload(dp("site"))], downloads: ["site/a.css", "site/b.css"]),
            DifferCase(
                name: "every file of the content changed is one deep redownload of the root",
                old: differTree("a.txt=A", "b/c.txt=C"), new: differTree("a.txt=A2", "b/c.txt=C2"),
                changes: [.deepRedownload(.root)], downloads: ["a.txt", "b/c.txt"]),
            DifferCase(
                name: "a folder with one unchanged file keeps one redownload per changed file",
                old: differTree("docs/a.md=A", "docs/b.md=B", "docs/c.md=C"),
                new: differTree("docs/a.md=A2", "docs/b.md=B2", "docs/c.md=C"),
                changes: [
                    .redownload(from: dp("docs/a.md"), to: dp("docs/a.md")),
                    .redownload(from: dp("docs/b.md"), to: dp("docs/b.md")),
                ], downloads: ["docs/a.md", "docs/b.md"]),
            DifferCase(
                name: "a folder whose files all changed but that gained a file is not refreshed whole",
                old: differTree("docs/a.md=A", "docs/b.md=B", "x.txt=X"),
                new: differTree("docs/a.md=A2", "docs/b.md=B2", "docs/new.md=N", "x.txt=X"),
                changes: [
                    .redownload(from: dp("docs/a.md"), to: dp("docs/a.md")),
                    .redownload(from: dp("docs/b.md"), to: dp("docs/b.md")), .add(dp("docs/new.md")),
                ]),
            DifferCase(
                name: "a changed file whose bytes moved away is not part of a deep redownload",
                old: differTree("docs/a.md=A", "docs/b.md=B", "x.txt=X"),
                new: differTree("docs/a.md=A2", "docs/b.md=B2", "old-a.md=A", "x.txt=X"),
                changes: [
                    .move(from: dp("docs/a.md"), to: dp("old-a.md"), rename: false),
                    .redownload(from: dp("docs/b.md"), to: dp("docs/b.md")), .add(dp("docs/a.md")),
                ]),
            DifferCase(
                name: "a file moved and changed is one redownload to its new place",
                old: differTree(base), new: edit(["docs/a.md"], ["archive/a.md=A2"]),
                changes: [.redownload(from: dp("docs/a.md"), to: dp("archive/a.md"))], downloads: ["archive/a.md"]),
            DifferCase(
                name: "moved and changed files pair with the old file in the closest folder",
                old: differTree("x/1/index.md=A", "x/1/k.txt=K", "y/index.md=B", "y/k.txt=L"),
                new: differTree("x/2/index.md=A2", "x/1/k.txt=K", "z/index.md=B2", "y/k.txt=L"),
                changes: [
                    .redownload(from: dp("x/1/index.md"), to: dp("x/2/index.md")),
                    .redownload(from: dp("y/index.md"), to: dp("z/index.md")),
                ]),
            DifferCase(
                name: "a changed file leaving a folder that is removed is a remove and an add",
                old: differTree("old/a.md=A", "keep.txt=K"), new: differTree("new/a.md=A2", "keep.txt=K"),
                changes: [.remove(dp("old")), .add(dp("new/a.md"))]),
            DifferCase(
                name: "a folder moved to a new parent that gains a file is a move and an add",
                old: differTree("images/logo.png=L", "images/icons/star.png=S", "readme.txt=R"),
                new: differTree(
                    "assets/images/logo.png=L", "assets/images/icons/star.png=S", "assets/images/banner.png=B",
                    "readme.txt=R"),
                changes: [
                    .move(from: dp("images"), to: dp("assets/images"), rename: false),
                    .add(dp("assets/images/banner.png")),
                ],
                downloads: ["assets/images/banner.png"]),
            DifferCase(
                name: "a renamed folder with one file changed and one removed is a move, a remove and a redownload",
                old: differTree("photos/a.jpg=A", "photos/b.jpg=B", "photos/c.jpg=C", "photos/d.jpg=D"),
                new: differTree("pictures/a.jpg=A", "pictures/b.jpg=B", "pictures/c.jpg=C2"),
                changes: [
                    .move(from: dp("photos"), to: dp("pictures"), rename: true), .remove(dp("pictures/d.jpg")),
                    .redownload(from: dp("pictures/c.jpg"), to: dp("pictures/c.jpg")),
                ], downloads: ["pictures/c.jpg"]),
            DifferCase(
                name: "a file without extension that moved and changed is one redownload",
                old: differTree("LICENSE=L", "keep.txt=K"), new: differTree("legal/LICENSE=L2", "keep.txt=K"),
                changes: [.redownload(from: dp("LICENSE"), to: dp("legal/LICENSE"))]),
        ]
    }

    // MARK: - Round trip through the client's planner

    /// A diff replayed with the client's own planner, and everything wrong with the result.
    struct DifferReplay {
        var changes: [Change.Kind]
        var plan: SyncPlan
        var problems: [String] = []

        init(old: ContentTree, new: ContentTree) throws {
            changes = try ChangeDiffer.diff(from: old, to: new)
            let list = ChangeList(
                from: dv("1.0"), to: dv("1.1"),
                changes: changes.enumerated().map { Change(kind: $1, index: $0) },
                url: URL(string: "https://h.example/s/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json")!)
            plan = NetPlanner.plan(
                local: LocalTree(folders: old.folders, files: Set(old.files.keys)),
                from: dv("1.0"), to: dv("1.1"), lists: [list])
            problems += plan.warnings.map { "warning: \($0)" }
            if Set(plan.folders) != new.folders {
                problems.append(
                    "folders differ: extra \(Set(plan.folders).subtracting(new.folders).sorted()), missing \(new.folders.subtracting(plan.folders).sorted())"
                )
            }
            let built = plan.reused.map(\.target) + plan.downloads
            if built.count != Set(built).count || Set(built) != Set(new.files.keys) {
                problems.append("files differ: built \(built.sorted()), wanted \(new.files.keys.sorted())")
            }
            let sources = plan.reused.map(\.source)
            if sources.count != Set(sources).count {
                problems.append("an old file is reused twice: \(sources.sorted())")
            }
            for reuse in plan.reused
            where old.files[reuse.source] == nil || old.files[reuse.source] != new.files[reuse.target] {
                problems.append("'\(reuse.target)' gets the bytes of old '\(reuse.source)', which differ")
            }
            // A download is justified when its bytes are new, when the file changed in place, or when
            // every old file with those bytes is reused or could not be moved without a cycle: a
            // file changed in place (its path must be refilled; swaps make that impossible for one
            // of them), a file inside a folder that becomes a file, or the download's own parent
            // path (the client ignores a move into the moved item).
            let reusedSources = Set(sources)
            var oldByBytes: [FileFingerprint: [SafeRelativePath]] = [:]
            for (path, bytes) in old.files { oldByBytes[bytes, default: []].append(path) }
            for download in plan.downloads {
                guard let bytes = new.files[download], let holders = oldByBytes[bytes] else { continue }
                if let before = old.files[download], before != bytes { continue }
                let wasted = holders.filter { holder in
                    !reusedSources.contains(holder) && !download.isWithin(holder)
                        && !(new.files[holder] != nil && new.files[holder] != old.files[holder])
                        && !holder.ancestors.contains { old.folders.contains($0) && new.files[$0] != nil }
                }
                if !wasted.isEmpty {
                    problems.append(
                        "'\(download)' is downloaded although old \(wasted.sorted()) has its bytes and is not reused")
                }
            }
        }
    }

    // MARK: - Random trees

    /// A tree under edit, with the replacing semantics of a file system: putting something at a path
    /// replaces what stood there and any file standing where a parent folder must go.
    struct TreeModel {
        var folders: Set<SafeRelativePath> = []
        var files: [SafeRelativePath: FileFingerprint] = [:]

        var content: ContentTree { ContentTree(folders: folders, files: files) }

        mutating func delete(_ path: SafeRelativePath) {
            files = files.filter { !$0.key.isWithin(path) }
            folders = folders.filter { !$0.isWithin(path) }
        }

        mutating func makeParents(of path: SafeRelativePath) {
            for ancestor in path.ancestors {
                files[ancestor] = nil
                folders.insert(ancestor)
            }
        }

        mutating func put(_ path: SafeRelativePath, _ bytes: FileFingerprint) {
            delete(path)
            makeParents(of: path)
            files[path] = bytes
        }

        mutating func putFolder(_ path: SafeRelativePath) {
            guard !folders.contains(path) else { return }
            delete(path)
            makeParents(of: path)
            folders.insert(path)
        }

        mutating func move(_ from: SafeRelativePath, to: SafeRelativePath) {
            guard from != to, !to.isWithin(from) else { return }
            let movedFiles = files.filter { $0.key.isWithin(from) }
            let movedFolders = folders.filter { $0.isWithin(from) }
            delete(from)
            delete(to)
            makeParents(of: to)
            for folder in movedFolders { folders.insert(folder.rebased(from: from, onto: to)) }
            for (path, bytes) in movedFiles { files[path.rebased(from: from, onto: to)] = bytes }
        }
    }

    /// Random old trees (3 levels, 0–40 files, some duplicate bytes, some empty folders, names with
    /// spaces, non-ASCII letters and collisions between file and folder names) and random edits.
    struct RandomTrees {
        static let folderNames = ["docs", "img", "Ünïcode", "with space", "日本語", "a", "b"]
        static let dottedFolderNames = ["bundle.app", "b.png"]
        static let fileNames = ["a.txt", "b.png", "c d.json", "résumé.pdf", "日本.txt", "z.md"]
        static let bareFileNames = ["LICENSE", "a", "b"]

        var random: SplitMix64
        var counter = 0

        init(seed: UInt64) { random = SplitMix64(seed: seed) }

        mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &random) < percent }
        mutating func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &random)] }

        mutating func fresh() -> FileFingerprint {
            counter += 1
            return differFingerprint("c\(counter)")
        }

        mutating func folder(depth: Int, dotted: Bool) -> SafeRelativePath {
            var components: [String] = []
            for _ in 0..<depth {
                components.append(dotted && chance(15) ? pick(Self.dottedFolderNames) : pick(Self.folderNames))
            }
            return dp(components.joined(separator: "/"))
        }

        mutating func parent(in model: TreeModel, dotted: Bool = false) -> SafeRelativePath {
            if !model.folders.isEmpty && chance(60) { return pick(model.folders.sorted()) }
            return folder(depth: Int.random(in: 0...2, using: &random), dotted: dotted)
        }

        mutating func makePair() -> (ContentTree, ContentTree) {
            var model = TreeModel()
            for _ in 0..<Int.random(in: 0...40, using: &random) {
                let bare = chance(10)
                let name = bare ? pick(Self.bareFileNames) : pick(Self.fileNames)
                let parent = folder(depth: Int.random(in: 0...2, using: &random), dotted: true)
                let withExtension = model.files.filter { !Change.namesFolder($0.key) }.sorted { $0.key < $1.key }
                let bytes = !bare && !withExtension.isEmpty && chance(20) ? pick(withExtension).value : fresh()
                model.put(parent.appending(dp(name)), bytes)
            }
            for _ in 0..<Int.random(in: 0...3, using: &random) {
                model.putFolder(folder(depth: Int.random(in: 1...3, using: &random), dotted: false))
            }
            let old = model.content
            for _ in 0..<Int.random(in: 0...8, using: &random) { mutate(&model, old: old) }
            return (old, repair(model, old: old).content)
        }

        mutating func mutate(_ model: inout TreeModel, old: ContentTree) {
            let files = model.files.keys.sorted()
            let typed = files.filter { !Change.namesFolder($0) }
            let bare = files.filter { Change.namesFolder($0) }
            let folders = model.folders.sorted()
            switch Int.random(in: 0..<14, using: &random) {
            case 0, 1:
                let bytes = !typed.isEmpty && chance(30) ? model.files[pick(typed)]! : fresh()
                model.put(parent(in: model).appending(dp(pick(Self.fileNames))), bytes)
            case 2 where !files.isEmpty:
                model.delete(pick(files))
            case 3 where !folders.isEmpty:
                model.delete(pick(folders))
            case 4 where !files.isEmpty:
                let file = pick(files)
                let name =
                    chance(50)
                    ? file.lastComponent! : pick(Change.namesFolder(file) ? Self.bareFileNames : Self.fileNames)
                model.move(file, to: parent(in: model).appending(dp(name)))
            case 5 where !folders.isEmpty:
                let folder = pick(folders)
                let name = chance(50) ? folder.lastComponent! : pick(Self.folderNames)
                let target = parent(in: model).appending(dp(name))
                if target.components.count <= 4 { model.move(folder, to: target) }
            case 6 where !files.isEmpty:
                // A file without extension can only change where it stood before: a redownload.
                let file = pick(files)
                if !Change.namesFolder(file) || old.files[file] != nil { model.files[file] = fresh() }
            case 7:
                model.putFolder(folder(depth: Int.random(in: 1...3, using: &random), dotted: false))
            case 8:
                let pool = chance(70) ? typed : bare.filter { old.files[$0] != nil }
                guard pool.count >= 2 else { return }
                let first = pick(pool)
                let second = pick(pool)
                (model.files[first], model.files[second]) = (model.files[second], model.files[first])
            case 9 where !folders.isEmpty:
                // A folder replaced by a file of the same name.
                let folder = pick(folders)
                if !Change.namesFolder(folder) {
                    model.put(folder, fresh())
                } else if !bare.isEmpty {
                    model.move(pick(bare), to: folder)
                }
            case 10 where !files.isEmpty:
                // A file replaced by a folder of the same name.
                let file = pick(files)
                model.put(file.appending(dp("inner.txt")), fresh())
            case 11 where !typed.isEmpty:
                // A file moved and changed.
                let file = pick(typed)
                model.delete(file)
                model.put(parent(in: model).appending(dp(file.lastComponent!)), fresh())
            case 13 where !folders.isEmpty:
                // A folder moved, then changed inside: a file added, changed or removed.
                let folder = pick(folders)
                let target = parent(in: model).appending(dp(pick(Self.folderNames)))
                guard target.components.count <= 4, !target.isWithin(folder) else { return }
                model.move(folder, to: target)
                let inside = model.files.keys.filter { $0.isWithin(target) && !Change.namesFolder($0) }.sorted()
                switch Int.random(in: 0..<3, using: &random) {
                case 0: model.put(target.appending(dp(pick(Self.fileNames))), fresh())
                case 1 where !inside.isEmpty: model.files[pick(inside)] = fresh()
                case 2 where !inside.isEmpty: model.delete(pick(inside))
                default: break
                }
            case 12 where !folders.isEmpty:
                // Every file of a folder changed.
                let folder = pick(folders)
                for file in files where file.isWithin(folder) && (!Change.namesFolder(file) || old.files[file] != nil) {
                    model.files[file] = fresh()
                }
            default:
                break
            }
        }

        /// Makes the new tree expressible: an empty dotted folder the old tree lacks gets a file, and
        /// a file without extension whose bytes the old tree never had is dropped.
        mutating func repair(_ model: TreeModel, old: ContentTree) -> TreeModel {
            var model = model
            var holders: [FileFingerprint: [SafeRelativePath]] = [:]
            for (path, bytes) in old.files { holders[bytes, default: []].append(path) }
            // A file without extension that the old tree lacked can only arrive by a move, from an
            // old file with its bytes whose path is left empty or can be refilled by an add.
            for (path, bytes) in model.files where Change.namesFolder(path) && old.files[path] == nil {
                let movable = (holders[bytes] ?? []).contains { holder in
                    !path.isWithin(holder) && model.files[holder] != bytes
                        && (model.files[holder] == nil || !Change.namesFolder(holder))
                }
                if !movable { model.files[path] = nil }
            }
            while let folder = model.folders.sorted().first(where: { folder in
                !Change.namesFolder(folder) && !old.folders.contains(folder)
                    && !model.folders.contains { $0.parent == folder }
                    && !model.files.keys.contains { $0.parent == folder }
            }) {
                model.put(folder.appending(dp("keep.txt")), fresh())
            }
            return model
        }
    }
}

/// The change count of a diff that knows no moves: one remove per vanished file or topmost
/// vanished folder, one add per new file or new empty folder, one redownload per edited file.
private func naiveChangeCount(old: ContentTree, new: ContentTree) -> Int {
    let oldOnly = old.folders.subtracting(new.folders)
    let removedFolders = oldOnly.filter { !oldOnly.contains($0.parent) }.count
    let removedFiles = old.files.keys.filter { new.files[$0] == nil && !oldOnly.contains($0.parent) }.count
    let addedFiles = new.files.keys.filter { old.files[$0] == nil }.count
    let edited = new.files.keys.filter { old.files[$0] != nil && old.files[$0] != new.files[$0] }.count
    let newFolders = new.folders.subtracting(old.folders)
    let emptyFolders = newFolders.filter { folder in
        !new.folders.contains { $0.parent == folder } && !new.files.keys.contains { $0.parent == folder }
    }.count
    return removedFolders + removedFiles + addedFiles + edited + emptyFolders
}

// MARK: - Helpers

/// The scoped diff gives the whole trees' list, and the reused digest the whole tree's.
private func expectScopeChangesNothing(
    _ old: ContentTree, _ new: ContentTree, sourceLocation: SourceLocation = #_sourceLocation
) throws {
    let delta = TreeDelta(from: old, to: new)
    #expect(
        try ChangeDiffer.diff(from: old, to: new, delta: delta, scoped: true)
            == ChangeDiffer.diff(from: old, to: new, delta: delta, scoped: false), sourceLocation: sourceLocation)
    #expect(
        TreeDigest.digest(of: new, reusing: TreeDigest.folderDigests(of: old), delta: delta)
            == TreeDigest.digest(of: new), sourceLocation: sourceLocation)
}

private func dp(_ text: String) -> SafeRelativePath { try! SafeRelativePath(validating: text) }
private func dv(_ text: String) -> CacheVersion { try! CacheVersion(text) }
private func differFingerprint(_ label: String) -> FileFingerprint {
    FileFingerprint(size: Int64(label.utf8.count), sha256: label)
}

/// A tree from entries: `"path=label"` is a file whose bytes are `label`; `"path/"` is a folder.
/// Every parent folder is included.
private func differTree(_ entries: String...) -> ContentTree { differTree(entries) }

private func differTree(_ entries: [String]) -> ContentTree {
    var tree = ContentTree(folders: [], files: [:])
    for entry in entries {
        if let equals = entry.firstIndex(of: "=") {
            let path = dp(String(entry[..<equals]))
            tree.files[path] = differFingerprint(String(entry[entry.index(after: equals)...]))
            tree.folders.formUnion(path.ancestors)
        } else {
            let path = dp(entry)
            tree.folders.insert(path)
            tree.folders.formUnion(path.ancestors)
        }
    }
    return tree
}

/// The same tree, its sets and dictionaries filled in reverse order.
private func rebuilt(_ tree: ContentTree) -> ContentTree {
    var copy = ContentTree(folders: [], files: [:])
    for folder in tree.folders.sorted().reversed() { copy.folders.insert(folder) }
    for path in tree.files.keys.sorted().reversed() { copy.files[path] = tree.files[path] }
    return copy
}

private func describe(_ tree: ContentTree) -> String {
    let files = tree.files.map { "\($0.key)=\($0.value.sha256)" }
    let empty = tree.folders.filter { folder in
        !tree.folders.contains { $0.parent == folder } && !tree.files.keys.contains { $0.parent == folder }
    }
    return (files + empty.map { "\($0)/" }).sorted().joined(separator: ", ")
}
