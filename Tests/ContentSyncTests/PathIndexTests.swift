import Archive
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// The path-component tree the diff scheduler files its steps in.
@Suite("Steps filed by path are found at, above and below a path")
struct PathIndexTests {
    static func path(_ text: String) -> SafeRelativePath {
        text.isEmpty ? .root : try! SafeRelativePath(validating: text)
    }

    static let filed: [(Int, String)] = [
        (0, "a"), (1, "a/b"), (2, "a/b/c.txt"), (3, "a/bb"), (4, "x/y"), (5, "a/b"), (6, "a/b/d/e"),
    ]

    static var index: PathIndex {
        var index = PathIndex()
        for (step, text) in filed { index.insert(step, at: Self.path(text)) }
        return index
    }

    @Test(arguments: [
        ("a/b", [1, 5], [0], [2, 6]),
        ("a", [0], [], [1, 2, 3, 5, 6]),
        ("a/b/c.txt", [2], [0, 1, 5], []),
        ("a/b/d", [], [0, 1, 5], [6]),
        ("a/bb/z", [], [0, 3], []),
        ("x", [], [], [4]),
        ("q/r", [], [], []),
        ("", [], [], [0, 1, 2, 3, 4, 5, 6]),
    ])
    func atAboveAndBelowMatchTheirDefinitions(query: String, at: [Int], above: [Int], below: [Int]) {
        let index = Self.index
        let target = Self.path(query)
        #expect(index.at(target).sorted() == at)
        #expect(index.above(target).flatMap(\.steps).sorted() == above)
        #expect(index.below(target) == below, "below is in step order")
        // The same answers by brute force over the filed paths.
        let bruteAbove = Self.filed.filter { target.isWithin(Self.path($0.1)) && Self.path($0.1) != target }.map(\.0)
            .sorted()
        let bruteBelow = Self.filed.filter { Self.path($0.1).isWithin(target) && Self.path($0.1) != target }.map(\.0)
            .sorted()
        #expect(above == bruteAbove && below == bruteBelow)
    }

    @Test func aboveNamesThePathEachStepWasFiledAt() {
        let found = Self.index.above(Self.path("a/b/d/e"))
        #expect(found.map(\.path) == [Self.path("a"), Self.path("a/b")])
    }
}
