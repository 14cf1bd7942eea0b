import Testing

@testable import Archive
@testable import FileKit

/// The ancestor-closed folder set behind the zip writer's and the extraction plan's checks.
@Suite("A folder set holds every folder above its members and finds files above a path")
struct FolderSetTests {
    static func path(_ text: String) -> SafeRelativePath { try! SafeRelativePath(validating: text) }

    @Test(arguments: [
        (["a/b/c"], [] as [String], ["a", "a/b", "a/b/c"]),
        (["a/b/c", "a/b"], [], ["a", "a/b", "a/b/c"]),
        (["a/b", "a/x/y"], [], ["a", "a/b", "a/x", "a/x/y"]),
        ([], ["a/b/f.txt"], ["a", "a/b"]),
        (["a"], ["a/b/c/f.txt", "g.txt"], ["a", "a/b", "a/b/c"]),
        // Members added deepest first: the walk up must still reach the top.
        (["a/b/c/d"], ["a/b/e/f.txt", "z/f.txt"], ["a", "a/b", "a/b/c", "a/b/c/d", "a/b/e", "z"]),
    ])
    func membersAreClosedUnderAncestors(folders: [String], filesAbove: [String], expected: [String]) {
        var set = FolderSet()
        for folder in folders { set.insert(Self.path(folder)) }
        for file in filesAbove { set.insertAncestors(of: Self.path(file)) }
        #expect(set.members == Set(expected.map(Self.path)))
        #expect(!set.contains(.root))
    }

    @Test func theRootIsNeverAMember() {
        var set = FolderSet()
        set.insert(.root)
        set.insertAncestors(of: Self.path("top.txt"))
        #expect(set.members.isEmpty)
    }

    @Test func aFileAboveIsFoundOnlyWhereNoKnownFolderStands() {
        let files: Set<SafeRelativePath> = [Self.path("a/f"), Self.path("x")]
        var set = FolderSet()
        // Nothing known yet: every level is looked at, nearest first.
        #expect(set.fileAbove(Self.path("a/f/g/h"), isFile: files.contains) == Self.path("a/f"))
        #expect(set.fileAbove(Self.path("x/y"), isFile: files.contains) == Self.path("x"))
        #expect(set.fileAbove(Self.path("a/b/c"), isFile: files.contains) == nil)
        #expect(set.fileAbove(Self.path("a"), isFile: files.contains) == nil)
        // Once a/b is a folder, the walk from below it stops there.
        set.insert(Self.path("a/b"))
        var asked: [SafeRelativePath] = []
        #expect(
            set.fileAbove(
                Self.path("a/b/c/d"),
                isFile: {
                    asked.append($0)
                    return files.contains($0)
                }) == nil)
        #expect(asked == [Self.path("a/b/c")])
    }
}
