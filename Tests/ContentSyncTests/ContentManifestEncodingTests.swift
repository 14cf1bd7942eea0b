import Foundation
import Testing
import ToolSupport

@testable import FileKit
@testable import StorageFormat

/// `ContentManifest.encode`: the manifest the publisher writes, by hand instead of through
/// `JSONSerialization` (whose sorted keys cost seconds at 100k paths).
@Suite("the content manifest encodes every tree exactly, in a fixed order")
struct ContentManifestEncodingTests {
    static let names = ["a", "B", "z9", "z10", "é", "Ω", "日本", "q\"uote", "sp ace", "dash-ed", "x.txt", "A"]

    /// A tree of `count` random files under random folders, from `names`.
    static func randomTree(count: Int, seed: UInt64) throws -> ContentTree {
        var random = SplitMix64(seed: seed)
        func pick() -> String { names[Int(random.next() % UInt64(names.count))] }
        var tree = ContentTree(folders: [], files: [:])
        for index in 0..<count {
            let depth = Int(random.next() % 3)
            var parts: [String] = []
            for _ in 0..<depth { parts.append(pick()) }
            for level in 0..<parts.count {
                tree.folders.insert(try SafeRelativePath(validating: parts[0...level].joined(separator: "/")))
            }
            parts.append("\(pick())-\(index)")
            let hash = String(repeating: String(random.next() % 16, radix: 16), count: 64)
            tree.files[try SafeRelativePath(validating: parts.joined(separator: "/"))] = FileFingerprint(
                size: Int64(random.next() % 1_000_000), sha256: hash)
        }
        return tree
    }

    /// What the publisher wrote before: the same values through `JSONSerialization`.
    static func serialized(_ tree: ContentTree, version: String, digest: String) throws -> Data {
        var files: [String: Any] = [:]
        for (path, fingerprint) in tree.files {
            files[path.string] = ["sha256": fingerprint.sha256, "size": fingerprint.size]
        }
        var data = try JSONSerialization.data(
            withJSONObject: [
                "version": version, "treeDigest": digest, "folders": tree.folders.map(\.string).sorted(),
                "files": files,
            ], options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        data.append(0x0A)
        return data
    }

    @Test(arguments: [0, 1, 7, 300] as [UInt64])
    func aTreeReadsBackAsItselfAndHoldsWhatJSONSerializationWrote(seed: UInt64) throws {
        let tree = try Self.randomTree(count: Int(seed % 5) * 40 + Int(seed), seed: seed)
        let digest = TreeDigest.digest(of: tree)
        let data = ContentManifest.encode(tree, version: "2.0", treeDigest: digest)
        #expect(try ContentManifest.parse(data, name: "manifest") == tree)
        let ours = try JSONSerialization.jsonObject(with: data) as? NSDictionary
        let theirs =
            try JSONSerialization.jsonObject(with: Self.serialized(tree, version: "2.0", digest: digest))
            as? NSDictionary
        #expect(ours != nil && ours == theirs)
        #expect(ContentManifest.encode(tree, version: "2.0", treeDigest: digest) == data, "deterministic")
    }

    /// Where the locale-aware order and the byte order agree (lower-case letters), the bytes are
    /// exactly `JSONSerialization`'s: the same layout, indentation and escaping.
    @Test func theLayoutIsJSONSerializationsPrettyPrinting() throws {
        var trees = [ContentTree(folders: [], files: [:])]
        let one = FileFingerprint(size: 12, sha256: String(repeating: "ab", count: 32))
        trees.append(ContentTree(folders: [], files: [try SafeRelativePath(validating: "only"): one]))
        trees.append(
            ContentTree(
                folders: [try SafeRelativePath(validating: "docs"), try SafeRelativePath(validating: "docs/deep")],
                files: [
                    try SafeRelativePath(validating: "docs/deep/a-b"): one,
                    try SafeRelativePath(validating: "docs/read me"): FileFingerprint(size: 0, sha256: one.sha256),
                    try SafeRelativePath(validating: "index"): one,
                ]))
        for tree in trees {
            let digest = TreeDigest.digest(of: tree)
            let ours = ContentManifest.encode(tree, version: "1.0", treeDigest: digest)
            let theirs = try Self.serialized(tree, version: "1.0", digest: digest)
            #expect(
                String(decoding: ours, as: UTF8.self) == String(decoding: theirs, as: UTF8.self))
        }
    }

    @Test func pathsAreInTheByteOrderOfTheirUTF8() throws {
        let fingerprint = FileFingerprint(size: 1, sha256: String(repeating: "0", count: 64))
        let paths = ["z9", "z10", "a", "B", "é", "a/b", "a-b", "\"q"]
        var tree = ContentTree(folders: [], files: [:])
        for path in paths { tree.files[try SafeRelativePath(validating: path)] = fingerprint }
        let text = String(decoding: ContentManifest.encode(tree, version: "1.0", treeDigest: "d"), as: UTF8.self)
        let keys = text.split(separator: "\n").filter { $0.hasSuffix(" : {") && $0.hasPrefix("    \"") }
            .map { String($0.dropFirst(4).dropLast(4)) }
        #expect(keys == [#""\"q""#, #""B""#, #""a""#, #""a-b""#, #""a/b""#, #""z10""#, #""z9""#, #""é""#])
    }
}
