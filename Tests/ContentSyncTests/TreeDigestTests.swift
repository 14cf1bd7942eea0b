import Archive
import Foundation
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

@Suite("The tree digest changes exactly when the tree does", .timeLimit(.minutes(3)))
struct TreeDigestTests {
    static func fingerprint(_ text: String) -> FileFingerprint {
        FileFingerprint(size: Int64(text.utf8.count), sha256: FileDigest.sha256(Data(text.utf8)))
    }

    static let tree = ContentTree(
        folders: [p("a"), p("a/b"), p("empty")],
        files: [p("a/x.txt"): fingerprint("x"), p("a/b/y.txt"): fingerprint("y"), p("top.txt"): fingerprint("t")])

    @Test func equalTreesHaveEqualDigestsWhateverTheirConstructionOrder() {
        let reordered = ContentTree(
            folders: [p("empty"), p("a/b"), p("a")],
            files: [
                p("top.txt"): Self.fingerprint("t"), p("a/b/y.txt"): Self.fingerprint("y"),
                p("a/x.txt"): Self.fingerprint("x"),
            ])
        #expect(TreeDigest.digest(of: Self.tree) == TreeDigest.digest(of: reordered))
        #expect(TreeDigest.digest(of: Self.tree).count == 64)
    }

    @Test(arguments: [
        "drop the empty folder", "rename a file", "change a file's bytes", "move a file to another folder",
        "add an empty folder",
    ])
    func anyChangeToTheTreeChangesTheDigest(change: String) {
        var other = Self.tree
        switch change {
        case "drop the empty folder": other.folders.remove(p("empty"))
        case "rename a file": other.files[p("a/z.txt")] = other.files.removeValue(forKey: p("a/x.txt"))
        case "change a file's bytes": other.files[p("a/x.txt")] = Self.fingerprint("X")
        case "move a file to another folder":
            other.files[p("a/b/x.txt")] = other.files.removeValue(forKey: p("a/x.txt"))
        default: other.folders.insert(p("new"))
        }
        #expect(TreeDigest.digest(of: other) != TreeDigest.digest(of: Self.tree))
    }

    @Test func aScannedFolderDigestsLikeTheTreeItHolds() async throws {
        try await withTemporaryDirectory { root in
            try FileManager.default.createDirectory(atPath: root + "/a/b", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: root + "/empty", withIntermediateDirectories: true)
            try "x".write(toFile: root + "/a/x.txt", atomically: true, encoding: .utf8)
            try "y".write(toFile: root + "/a/b/y.txt", atomically: true, encoding: .utf8)
            try "t".write(toFile: root + "/top.txt", atomically: true, encoding: .utf8)
            let scanned = try ContentTree.scan(root)
            #expect(scanned == Self.tree)
            #expect(TreeDigest.digest(of: scanned) == TreeDigest.digest(of: Self.tree))
        }
    }

    /// A known answer from an independent implementation of docs/protocol.md's formula (Python's
    /// hashlib, sorting names by their UTF-8 bytes), with names whose byte order differs from
    /// Swift's String order: "Z" < "a" < "z" < "é".
    @Test func theDigestMatchesTheDocumentedFormulaComputedIndependently() {
        let tree = ContentTree(
            folders: [p("a"), p("a/b"), p("empty")],
            files: [
                p("a/x.txt"): Self.fingerprint("x"), p("a/b/y.txt"): Self.fingerprint("y"),
                p("top.txt"): Self.fingerprint("t"),
                p("a/\u{E9}.txt"): Self.fingerprint("e-acute"), p("a/z.txt"): Self.fingerprint("z"),
                p("a/Z.txt"): Self.fingerprint("Z"),
            ])
        #expect(TreeDigest.digest(of: tree) == "c1ac7aeda08ffc59384060195cd0efbc09953d25951f5ab3fd99a084d469432c")
    }
}

@Suite("Names equal only up to Unicode normalization")
struct NormalizationCollisionTests {
    /// Found while writing the digest's known-answer test: Swift's String equality is canonical
    /// equivalence, so a tree keyed by path silently kept one of two such files.
    @Test func aFolderWithTwoCanonicallyEquivalentNamesIsRefusedNotHalfPublished() async throws {
        try await withTemporaryDirectory { root in
            try "precomposed".write(toFile: root + "/caf\u{E9}.txt", atomically: false, encoding: .utf8)
            try "decomposed".write(toFile: root + "/cafe\u{301}.txt", atomically: false, encoding: .utf8)
            #expect(try FileManager.default.contentsOfDirectory(atPath: root).count == 2)
            let error = #expect(throws: PublishError.self) { try ContentTree.scan(root) }
            #expect(error?.code == .configuration, "exit 6, as docs/protocol.md §8.5 says")
            #expect(error?.message.contains("Unicode normalization") == true)
        }
    }

    @Test func distinctNamesThatLookAlikeButAreNotEquivalentAreKept() async throws {
        try await withTemporaryDirectory { root in
            try "a".write(toFile: root + "/caf\u{E9}.txt", atomically: false, encoding: .utf8)
            try "b".write(toFile: root + "/cafe.txt", atomically: false, encoding: .utf8)
            #expect(try ContentTree.scan(root).files.count == 2)
        }
    }

    /// A published name respelled in another normalization (NFC → NFD) is refused, writing
    /// nothing: the differ saw no change (the names are equal to Swift), published an empty list
    /// and a tree digest of the new bytes, and every later publish was refused for good.
    @Test func aPublishedNameRespelledInAnotherNormalizationIsRefused() async throws {
        try await withTemporaryDirectory { root in
            for folder in ["c1/d\u{E9}j\u{E0}", "c2/de\u{301}j\u{E0}", "c3/d\u{E9}j\u{E0}"] {
                try FileManager.default.createDirectory(atPath: root + "/" + folder, withIntermediateDirectories: true)
            }
            try "hello".write(toFile: root + "/c1/caf\u{E9}.txt", atomically: false, encoding: .utf8)
            try "hello".write(toFile: root + "/c2/caf\u{E9}.txt", atomically: false, encoding: .utf8)
            try "hello".write(toFile: root + "/c3/cafe\u{301}.txt", atomically: false, encoding: .utf8)
            let base = URL(string: "https://publish.invalid/store/")!
            var first = PublishOptions(storage: root + "/st", content: root + "/c1", version: v("1.0"), baseURL: base)
            first.initialize = true
            _ = try Publisher.publish(first)
            let before = try storageSnapshot(root + "/st")
            for (content, version) in [("c2", "1.1"), ("c3", "1.1")] {
                let options = PublishOptions(
                    storage: root + "/st", content: root + "/" + content, version: v(version), baseURL: base)
                let error = #expect(throws: PublishError.self) { try Publisher.publish(options) }
                #expect(
                    error?.code == .configuration && error?.message.contains("another Unicode normalization") == true,
                    "\(String(describing: error))")
                #expect(try storageSnapshot(root + "/st") == before, "nothing is written")
            }
        }
    }
}
