import Foundation
import GRDB
import Testing

@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// A restore checks its tree in one streamed walk (``TreeDigest/stream(_:_:)``) that holds only
/// the folders being walked, and hands the index to the switch through the state database's
/// staged tables. The walk must find exactly what the in-memory scan finds, on real folders.
@Suite("A restore's streamed tree check finds what the whole scan finds", .timeLimit(.minutes(3)))
struct StreamedTreeCheckTests {
    /// A random tree of folders (some empty, some deep) and small files, written under `root`.
    static func writeRandomTree(_ root: String, seed: UInt64) throws {
        var random = TwinPatchTests.Generator(state: seed)
        // Names whose UTF-8 order differs from other orders, and one that is a prefix of another.
        let names = ["a", "B", "z", "Z", "\u{E9}", "ab", "a.b", "a-b", "10", "9", "x y", "\u{4E2D}"]
        var folders = [""]
        for _ in 0..<Int.random(in: 3...14, using: &random) {
            let parent = folders.randomElement(using: &random)!
            let name = names.randomElement(using: &random)! + "d"
            let folder = parent.isEmpty ? name : parent + "/" + name
            if !folders.contains(folder) { folders.append(folder) }
            try FileManager.default.createDirectory(atPath: root + "/" + folder, withIntermediateDirectories: true)
        }
        for index in 0..<Int.random(in: 0...40, using: &random) {
            let folder = folders.randomElement(using: &random)!
            let name = names.randomElement(using: &random)! + ".f"
            let path = root + "/" + (folder.isEmpty ? name : folder + "/" + name)
            try Data("\(index) \(random.next())".utf8).write(to: URL(fileURLWithPath: path))
        }
    }

    /// The stream's findings, collected.
    struct Collected {
        var streamed: TreeDigest.Streamed?
        var files: [SafeRelativePath: FileFingerprint] = [:]
        var identities: [SafeRelativePath: FileIdentity] = [:]
        var folders: [SafeRelativePath: String] = [:]
        var times: [SafeRelativePath: Int64] = [:]
        /// Paths in the order they were handed over.
        var order: [SafeRelativePath] = []
    }

    static func collect(_ root: String) throws -> Collected {
        var collected = Collected()
        collected.streamed = try TreeDigest.stream(root) { entry in
            switch entry {
            case .file(let path, let fingerprint, let identity):
                #expect(collected.files.updateValue(fingerprint, forKey: path) == nil, "\(path) handed over twice")
                collected.identities[path] = identity
                collected.order.append(path)
            case .folder(let path, let digest, let changed):
                #expect(collected.folders.updateValue(digest, forKey: path) == nil, "\(path) handed over twice")
                if let changed { collected.times[path] = changed }
                #expect((changed == nil) == path.isRoot, "only the root comes without its ctime")
                collected.order.append(path)
            }
        }
        return collected
    }

    @Test("on random trees, the streamed walk gives the scan's digest, folder digests, files and shape")
    func theStreamIsTheScan() async throws {
        for seed in UInt64(1)...40 {
            try await withTemporaryDirectory { root in
                try Self.writeRandomTree(root, seed: seed)
                let (tree, intruders) = try ContentTree.scanLocal(root)
                #expect(intruders.isEmpty)
                let collected = try Self.collect(root)
                let streamed = try #require(collected.streamed, "seed \(seed)")
                #expect(streamed.digest == TreeDigest.digest(of: tree), "seed \(seed)")
                #expect(streamed.shape == TreeShape(folders: tree.folders, files: tree.files.keys), "seed \(seed)")
                #expect(collected.folders == TreeDigest.folderDigests(of: tree), "seed \(seed)")
                #expect(collected.files == tree.files, "seed \(seed)")
                // Each folder comes after everything below it (its digest needs theirs).
                for (position, path) in collected.order.enumerated() where collected.folders[path] != nil {
                    let later = collected.order[(position + 1)...]
                    #expect(
                        !later.contains { $0 != path && $0.isWithin(path) }, "\(path) before its content")
                }
                // Times and identities are the ones the filesystem gives now (nothing changed).
                for folder in tree.folders {
                    let info = try #require(FileSystem.status(of: folder.absolute(in: root)))
                    #expect(collected.times[folder] == FileSystem.changeTime(info), "\(folder)")
                }
                for (path, identity) in collected.identities {
                    let info = try #require(FileSystem.status(of: path.absolute(in: root)))
                    #expect(identity == FileIdentity(info), "\(path)")
                }
            }
        }
    }

    @Test("a sorted walk visits each folder's entries in byte order and leaves each folder after its content")
    func theWalkIsSortedAndLeavesBottomUp() async throws {
        try await withTemporaryDirectory { root in
            try Self.writeRandomTree(root, seed: 11)
            var visited: [SafeRelativePath] = []
            var left: [SafeRelativePath] = []
            try DirectoryWalker.walkStamped(root, sorted: true, leaving: { left.append($0) }) { entry, stamp, _ in
                switch entry {
                case .folder(let path):
                    visited.append(path)
                    #expect(stamp != nil, "a folder comes with its stamp")
                case .file(let path, _): visited.append(path)
                default: Issue.record("unexpected \(entry)")
                }
                #expect(!left.contains { visited.last!.isWithin($0) }, "visited inside a folder already left")
            }
            let (tree, _) = try ContentTree.scanLocal(root)
            #expect(Set(left) == tree.folders.union([.root]), "every folder is left once")
            #expect(left.count == tree.folders.count + 1)
            #expect(left.last == .root)
            // Siblings in the byte order of their names.
            for folder in tree.folders.union([.root]) {
                let names = visited.filter { !$0.isRoot && $0.parent == folder }.map { Array($0.lastComponent!.utf8) }
                #expect(names == names.sorted { $0.lexicographicallyPrecedes($1) }, "\(folder)")
            }
        }
    }

    @Test(
        "anything content cannot hold ends the walk with no digest, for the full check to name and repair",
        arguments: ["symlink", "fifo", "normalization twins", "backslash", "undecodable name"])
    func intrudersStopTheStream(kind: String) async throws {
        try await withTemporaryDirectory { root in
            try FileManager.default.createDirectory(atPath: root + "/deep/er", withIntermediateDirectories: true)
            try Data("kept".utf8).write(to: URL(fileURLWithPath: root + "/deep/kept.txt"))
            let folder = root + "/deep/er"
            switch kind {
            case "symlink": #expect(symlink("/etc/passwd", folder + "/link") == 0)
            case "fifo": #expect(mkfifo(folder + "/pipe", 0o600) == 0)
            case "normalization twins":
                try Data("1".utf8).write(to: URL(fileURLWithPath: folder + "/caf\u{E9}"))
                try Data("2".utf8).write(to: URL(fileURLWithPath: folder + "/cafe\u{301}"))
            case "backslash": try Data("1".utf8).write(to: URL(fileURLWithPath: folder + "/a\\b"))
            default:
                let fd = open(folder + "/\u{FF}", O_CREAT | O_WRONLY, 0o600)
                #expect(fd >= 0)
                close(fd)
                // Foundation's path encoding may have written U+00FF as UTF-8; make the name
                // raw bytes that are not UTF-8.
                if fd >= 0 {
                    let bytes: [UInt8] = Array(folder.utf8) + [UInt8(ascii: "/"), 0xFF, 0]
                    let old: [UInt8] = Array((folder + "/\u{FF}").utf8) + [0]
                    #expect(rename(old.map { CChar(bitPattern: $0) }, bytes.map { CChar(bitPattern: $0) }) == 0)
                }
            }
            let (_, intruders) = try ContentTree.scanLocal(root)
            #expect(!intruders.isEmpty, "the scan names it")
            var handedOver = 0
            let streamed = try TreeDigest.stream(root) { _ in handedOver += 1 }
            #expect(streamed == nil)
            #expect(handedOver < 4, "the walk stopped at the intruder's folder, before the root was done")
            #expect(FileManager.default.fileExists(atPath: root + "/deep/kept.txt"), "it only reads")
        }
    }

    @Test("a failure to hand an entry over ends the walk and is thrown as it is")
    func anEmitFailureIsThrown() async throws {
        struct Full: Error {}
        try await withTemporaryDirectory { root in
            try Self.writeRandomTree(root, seed: 7)
            try Data("x".utf8).write(to: URL(fileURLWithPath: root + "/one.txt"))
            var calls = 0
            #expect(throws: Full.self) {
                _ = try TreeDigest.stream(root) { _ in
                    calls += 1
                    throw Full()
                }
            }
            #expect(calls == 1, "nothing is handed over after a failure")
        }
    }

    // MARK: - Through a restore

    /// The rows of `table` in the state database at `path`, as text.
    static func rows(_ table: String, _ columns: String, in path: String) throws -> Set<String> {
        let database = try DatabaseQueue(path: path)
        defer { try? database.close() }
        return try database.read { db in
            Set(try String.fetchAll(db, sql: "SELECT \(columns) FROM \(table)"))
        }
    }

    /// Every table's and index's columns, keys and definitions (less their names' case), to
    /// compare a schema before and after the switch renames the staged tables.
    static func schema(_ path: String) throws -> [String] {
        let database = try DatabaseQueue(path: path)
        defer { try? database.close() }
        return try database.read { db in
            var lines: [String] = []
            for table in try String.fetchAll(
                db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            {
                for row in try Row.fetchAll(db, sql: "PRAGMA table_xinfo(\(table))") {
                    lines.append("\(table): \(row)")
                }
                for row in try Row.fetchAll(db, sql: "PRAGMA index_list(\(table))") {
                    lines.append("\(table) index: \(row)")
                }
            }
            return lines
        }
    }

    @Test("a restore records the index, fingerprints and folder times a whole check would, and no staged rows stay")
    func aRestoreAdoptsTheStagedIndex() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            // Rows a stopped run (or a hostile writer) left in the staged tables before this restore.
            do {
                let store = try StateStore(path: harness.state)
                try store.stage([
                    .file(try SafeRelativePath(validating: "planted.txt"), FileFingerprint(size: 1, sha256: "00"), nil),
                    .folder(try SafeRelativePath(validating: "planted"), digest: "11", changedNanoseconds: 5),
                ])
            }
            let before = try Self.schema(harness.state)
            let report = try await harness.sync()
            #expect(report.outcome == .restored)
            try harness.expectTree(is: "1.0")
            let (tree, intruders) = try ContentTree.scanLocal(harness.content)
            #expect(intruders.isEmpty)
            var expected = Set(tree.files.map { path, found in "\(path.string)|0|\(found.size)|\(found.sha256)" })
            for (path, digest) in TreeDigest.folderDigests(of: tree) {
                expected.insert("\(path.string)|1|0|\(digest)")
            }
            let recorded = try Self.rows(
                "treeEntry", "parent || name || '|' || isFolder || '|' || size || '|' || hash", in: harness.state)
            #expect(recorded == expected)
            var times = Set<String>()
            for folder in Array(tree.folders) + [.root] {
                let info = try #require(FileSystem.status(of: folder.absolute(in: harness.content)))
                times.insert("\(folder.string)|\(FileSystem.changeTime(info))")
            }
            #expect(try Self.rows("liveFolder", "path || '|' || ctime", in: harness.state) == times)
            var identities = Set<String>()
            for (path, found) in tree.files {
                let info = try #require(FileSystem.status(of: path.absolute(in: harness.content)))
                let identity = FileIdentity(info)
                identities.insert("\(Int64(bitPattern: identity.inode))|\(identity.size)|\(found.sha256)")
            }
            #expect(
                try Self.rows("fileFingerprint", "inode || '|' || size || '|' || sha256", in: harness.state)
                    == identities)
            for table in ["stagedTreeEntry", "stagedFingerprint", "stagedLiveFolder"] {
                #expect(try Self.rows(table, "1", in: harness.state).isEmpty, "\(table) is emptied by the switch")
            }
            #expect(try Self.schema(harness.state) == before, "the renamed tables are the ones they replace")
            // A second restore over the first (its content folder gone) stages and adopts again.
            try FileManager.default.removeItem(atPath: harness.content)
            #expect(try await harness.sync().outcome == .restored)
            #expect(
                try Self.rows(
                    "treeEntry", "parent || name || '|' || isFolder || '|' || size || '|' || hash", in: harness.state)
                    == recorded)
            #expect(try Self.rows("fileFingerprint", "inode", in: harness.state).count == tree.files.count)
            // And the next replay plans from that index, exactly.
            harness.serve("1.1")
            let next = try await harness.sync()
            #expect(next.outcome == .replayed)
            #expect(next.plannedFromIndex)
            try harness.expectTree(is: "1.1")
        }
    }
}
