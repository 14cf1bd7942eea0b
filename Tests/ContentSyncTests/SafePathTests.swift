import Archive
import Foundation
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

@Suite("Paths from storages cannot leave the content folder", .timeLimit(.minutes(3)))
struct SafePathTests {
    @Test(arguments: ["a", "a/b.txt", "a/b/", "crème/Guide Notes.md", "a..b", "...x", ".hidden"])
    func ordinaryRelativePathsAreAccepted(raw: String) throws {
        let path = try SafeRelativePath(validating: raw)
        #expect(!path.components.isEmpty)
        #expect(!path.components.contains(".."))
    }

    @Test(arguments: [
        ("../etc/passwd", SafePathError.Reason.dotComponent), ("a/../../b", .dotComponent), ("./a", .dotComponent),
        ("/etc/passwd", .absolute), ("a\\..\\b", .backslash), ("a\0b", .nul), ("a//b", .emptyComponent),
        ("a/\u{7}", .controlCharacter), (String(repeating: "x", count: 256), .tooLong),
    ])
    func hostilePathsAreRefusedWithTheReason(raw: String, reason: SafePathError.Reason) {
        #expect {
            try SafeRelativePath(validating: raw)
        } throws: { error in
            (error as? SafePathError)?.reason == reason
        }
    }

    /// One component is judged as ``SafeRelativePath/init(validating:)`` judges a path of one
    /// component: the same verdict, and ``SafeRelativePath/appending(component:)`` the same reason.
    @Test(arguments: [
        "a", "crème", "a..b", ".hidden", "...", "é\u{301}", String(repeating: "x", count: 255), "", ".", "..", "a\0b",
        "a\\b", "a\u{7}", "a\u{7F}", "\u{1F}x", String(repeating: "x", count: 256), "\u{85}", "\0..", "..\u{7}",
        String(repeating: "é", count: 128),
    ])
    func aComponentIsJudgedAsAPathOfOneComponent(name: String) {
        let asPath = Result { () throws(SafePathError) in try SafeRelativePath(validating: name) }
        let oneComponent = (try? asPath.get())?.components.count == 1
        #expect(SafeRelativePath.isSafeComponent(name) == oneComponent)
        let appended = Result { () throws(SafePathError) in try SafeRelativePath.root.appending(component: name) }
        switch (asPath, appended) {
        case (.failure(let whole), .failure(let one)): #expect(whole.reason == one.reason)
        case (.success(let path), .success(let other)): #expect(path == other)
        case (.success, .failure(let one)): #expect(name.isEmpty && one.reason == .emptyComponent) // "" is the root
        case (.failure, .success): Issue.record("\(name.debugDescription) appends but is refused as a path")
        }
    }

    /// A tree-index row names an entry of the folder it is listed under only by one safe
    /// component: a hostile database cannot list `../x` or `a/b` as a child.
    @Test(
        arguments: [
            ("b.txt", "a/", "b.txt"), ("b.txt", "", "b.txt"), ("c", "a/b/", "c"), ("b/c", "a/", nil),
            ("../x", "a/", nil), ("..", "a/", nil), (".", "a/", nil), ("", "a/", nil), ("", "", nil),
            ("x\u{7}", "a/", nil), ("x\0", "a/", nil), ("x/y", "", nil), ("/x", "", nil),
            (String(repeating: "x", count: 256), "a/", nil), ("x\\y", "a/", nil),
        ] as [(String, String, String?)])
    func aRowIsAChildOfItsFolderOnlyByOneSafeComponent(stored: String, key: String, name: String?) {
        #expect(StateStore.childName(stored, under: key) == name)
    }

    /// Paths equal but for letter case are found, the first pair in path order, whatever their
    /// order given; a path given twice, or paths that only look alike, are not a pair.
    @Test(
        arguments: [
            (["a/b.txt", "c/d.txt"], nil), (["Docs/Read.md", "docs/read.md"], ("Docs/Read.md", "docs/read.md")),
            (["docs/read.md", "x", "Docs/Read.md"], ("Docs/Read.md", "docs/read.md")), (["a", "a"], nil),
            (["é", "É"], ("É", "é")), (["e\u{301}", "É"], ("É", "e\u{301}")),
            (["a/b", "a/c", "A/B", "A/C"], ("A/B", "a/b")),
            (["ß", "ss"], nil), (["i", "İ"], nil),
            // Final sigma: lowercasing alone keeps it apart; NTFS's upcase table does not.
            (["Σ.txt", "ς.txt"], ("Σ.txt", "ς.txt")), (["σ/a", "ς/a"], ("ς/a", "σ/a")),
            (["\u{212A}.md", "k.md"], ("\u{212A}.md", "k.md")),
        ] as [([String], (String, String)?)])
    func caseCollisionsAreFound(raw: [String], expected: (String, String)?) throws {
        let paths = try raw.map { try SafeRelativePath(validating: $0) }
        let found = SafeRelativePath.caseCollision(in: paths)
        #expect(found.map { [$0.0.string, $0.1.string] } == expected.map { [$0.0, $0.1] })
    }

    @Test func aRowLongerThanAPathIsNoChild() {
        let folder = Array(repeating: String(repeating: "d", count: 200), count: 20).joined(separator: "/") + "/"
        #expect(StateStore.childName("x", under: folder) == "x")
        #expect(StateStore.childName(String(repeating: "x", count: 100), under: folder) == nil)
    }

    static let base = URL(string: "https://raw.example.com/owner/repo/main/")!
    static let document = URL(
        string: "https://raw.example.com/owner/repo/main/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json")!

    @Test(arguments: [
        ("https://raw.example.com/owner/repo/main/RXCacheContent/a/b.txt", "a/b.txt"),
        ("https://RAW.example.com:443/owner/repo/main/RXCacheContent/Guide%20Notes.md", "Guide Notes.md"),
        ("https://raw.example.com/owner/repo/main/RXCacheContent/cr%C3%A8me.json", "crème.json"),
        ("https://raw.example.com/owner/repo/main/RXCacheContent/folder/", "folder"),
        ("../../RXCacheContent/rel.txt", "rel.txt"),
        ("https://raw.example.com/owner/repo/main/RXCacheContent/q.txt?token=1", "q.txt"),
        // A stray '%' is read as a literal '%', as browsers do: a harmless name.
        ("https://raw.example.com/owner/repo/main/RXCacheContent/100%ZZ.txt", "100%ZZ.txt"),
    ])
    func changeURLsMapToContentPaths(url: String, expected: String) throws {
        let layout = try StorageLayout(baseURL: Self.base)
        #expect(try layout.contentPath(ofURL: url, in: Self.document).string == expected)
    }

    @Test(arguments: [
        "https://raw.example.com/owner/repo/main/RXCacheContent/../secret.txt",
        "https://raw.example.com/owner/repo/main/RXCacheContent/%2e%2e/%2e%2e/etc/passwd",
        "https://raw.example.com/owner/repo/main/RXCacheContent/a%2F..%2F..%2Fb",
        "https://raw.example.com/owner/repo/main/RXCacheContent/a%5C..%5Cb",
        "https://raw.example.com/owner/repo/main/RXCacheContent/a%00b",
        "https://evil.example.com/owner/repo/main/RXCacheContent/a.txt",
        "https://raw.example.com/owner/repo/main/RXCacheConfig/cacheStatus.json",
        "https://raw.example.com/owner/repo/main/RXCacheContentX/a.txt",
        "file:///etc/passwd",
    ])
    func urlsOutsideTheContentFolderAreRefused(url: String) throws {
        let layout = try StorageLayout(baseURL: Self.base)
        let error = #expect(throws: SafePathError.self) { try layout.contentPath(ofURL: url, in: Self.document) }
        // An escaped '/' is named as such, not as bad encoding.
        #expect((error?.reason == .encodedSlash) == url.contains("%2F"), "\(String(describing: error))")
    }

    /// Found by the fuzzer: a first component with a colon read as a URL scheme and crashed.
    @Test(arguments: [
        "10:30 notes.txt", "a:b/c:d.md", "{\"a\":1}", "100%.txt", "q?.txt", "#1.txt", "日本語.txt", "é.txt", "\u{FEFF}{}",
        "a/\u{FEFF}b.txt", "\u{200B}x.txt", " lead.txt", "trail .txt",
    ])
    func everySafePathHasAContentURLThatMapsBack(name: String) throws {
        let layout = try StorageLayout(baseURL: Self.base)
        let path = try SafeRelativePath(validating: name)
        let url = layout.contentURL(for: path)
        #expect(url.absoluteString.hasPrefix(layout.contentRootURL.absoluteString))
        #expect(try layout.contentPath(ofURL: url.absoluteString, in: Self.document) == path)
    }

    /// Change paths in the publisher's own form skip URL parsing (`plainRemainder`); anything
    /// else goes the general way. Both must give the same path or the same refusal, for random
    /// texts built from the characters that matter (escapes, dots, slashes, `?`, `#`, `:`, `;`,
    /// spaces, non-ASCII), with and without a published base to rebase from.
    @Test func thePlainFastPathAgreesWithTheGeneralWay() throws {
        var plain = try StorageLayout(baseURL: Self.base)
        var rebased = try StorageLayout(baseURL: URL(string: "http://127.0.0.1:8080/mirror/")!)
        rebased.inferPublishedBase(
            fromUpdateListURL: URL(
                string: "https://raw.example.com/owner/repo/main/RXCacheConfig/listOfURLsToUpdatesByVersion.json")!)
        plain.publishedBase = nil
        let pieces = [
            "a", "B", "7", ".", "..", "/", "//", "%2", "%20", "%2F", "%2e", "%C3%A9", "%zz", "%", "?", "#", ":", ";",
            " ", "é",
            "~", "-", "_", "!", "$", "&", "'", "(", ")", "*", "+", ",", "=", "@", "\\", "\u{FEFF}",
        ]
        let prefixes = [
            "https://raw.example.com/owner/repo/main/RXCacheContent/",
            "HTTPS://Raw.Example.com/owner/repo/main/RXCacheContent/",
            "https://raw.example.com:443/owner/repo/main/RXCacheContent/",
            "https://raw.example.com/owner/repo/main/RXCacheContent",
            "https://raw.example.com/owner/repo/main/RXCacheConfig/", "../../RXCacheContent/", "",
        ]
        var generator = SystemRandomNumberGenerator()
        var fast = 0
        for round in 0..<4000 {
            var text = prefixes[round % prefixes.count]
            for _ in 0..<Int.random(in: 0...8, using: &generator) { text += pieces.randomElement(using: &generator)! }
            for layout in [plain, rebased] {
                let general = Result { () throws(SafePathError) in
                    try layout.contentPath(ofURL: text, in: Self.document, plainFastPath: false)
                }
                let quick = Result { () throws(SafePathError) in
                    try layout.contentPath(ofURL: text, in: Self.document, plainFastPath: true)
                }
                switch (general, quick) {
                case (.success(let a), .success(let b)): #expect(a == b, "\(text)")
                case (.failure(let a), .failure(let b)): #expect(a.reason == b.reason, "\(text)")
                default: Issue.record("\(text): general \(general), fast \(quick)")
                }
                if case .success = quick { fast += 1 }
            }
        }
        #expect(fast > 1000) // the comparison covered many accepted paths, not only refusals
    }

    /// Found by the fuzzer: "/" followed by a combining mark is one Character, so splitting on
    /// Characters left a slash inside a component (and missed a leading one), while the
    /// filesystem splits there. Slashes are found in the bytes.
    @Test func aSlashBeforeACombiningMarkStillSeparates() throws {
        #expect(try SafeRelativePath(validating: "a/\u{301}b").components == ["a", "\u{301}b"])
        #expect(try SafeRelativePath(validating: "a/\u{301}").components == ["a", "\u{301}"])
        #expect(try SafeRelativePath(validating: "a\u{301}/").components == ["a\u{301}"])
        #expect(throws: SafePathError.self) { try SafeRelativePath(validating: "/\u{301}etc") }
        #expect(throws: SafePathError.self) { try SafeRelativePath(validating: "a//\u{301}") }
        let layout = try StorageLayout(baseURL: Self.base)
        let fuzzed = "https://raw.example.com/owner/repo/main/RXCacheContent/%2e%2c/R/\u{301}\u{FFFD}{%2e%2e/x"
        let path = try layout.contentPath(ofURL: fuzzed, in: Self.document)
        #expect(path.components.allSatisfy { !$0.utf8.contains(UInt8(ascii: "/")) })
        #expect(try layout.contentPath(ofURL: layout.contentURL(for: path).absoluteString, in: Self.document) == path)
    }

    @Test func theContentRootHasTheContentFolderURL() throws {
        let layout = try StorageLayout(baseURL: Self.base)
        #expect(layout.contentURL(for: .root) == layout.contentRootURL)
    }

    @Test func urlsOfTheStoragesPublishedBaseAreRebasedOntoTheServingBase() throws {
        var layout = try StorageLayout(baseURL: URL(string: "http://127.0.0.1:8080/mirror")!)
        layout.inferPublishedBase(
            fromUpdateListURL: URL(
                string: "https://content-sync.invalid/ExampleStorage/RXCacheConfig/listOfURLsToUpdatesByVersion.json")!)
        let path = try layout.contentPath(
            ofURL: "https://content-sync.invalid/ExampleStorage/RXCacheContent/a%20b/c.txt", in: Self.document)
        #expect(path.string == "a b/c.txt")
        #expect(
            layout.contentURL(for: path).absoluteString == "http://127.0.0.1:8080/mirror/RXCacheContent/a%20b/c.txt")
        #expect(
            layout.rebase(URL(string: "https://content-sync.invalid/ExampleStorage/RXCacheContent.zip")!).absoluteString
                == "http://127.0.0.1:8080/mirror/RXCacheContent.zip")
        // Another host is not rebased, so it stays outside the content folder.
        #expect(throws: SafePathError.self) {
            try layout.contentPath(
                ofURL: "https://other.invalid/ExampleStorage/RXCacheContent/a.txt", in: Self.document)
        }
    }

    @Test(arguments: ["ftp://host/x/", "not a url", "https://host/x?q=1"])
    func badBaseURLsAreRefused(text: String) {
        let url = URL(string: text) ?? URL(fileURLWithPath: "/x")
        #expect(throws: StorageFormatError.self) { try StorageLayout(baseURL: url) }
    }
}
