import Foundation
import Testing

@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// A restore links the twin its first replay catches up while its streamed tree check reads the
/// tree (``TwinSeed``): on real folders, the seed must be the checked files themselves, or no
/// seed at all.
@Suite("A restore's twin is linked beside its tree check", .timeLimit(.minutes(3)))
struct TwinSeedTests {
    /// Streams `source` into a seed at `target`, as the restore's check does; `meanwhile` sees
    /// each entry first, and may change the disk or the entry.
    static func seed(
        _ source: String, into target: String,
        meanwhile: (TreeDigest.StreamedEntry) -> TreeDigest.StreamedEntry = { $0 }
    ) throws -> TwinSeed {
        let seed = try #require(TwinSeed(from: source, into: target))
        _ = try TreeDigest.stream(source) { entry in seed.add(meanwhile(entry)) }
        return seed
    }

    @Test(
        "random trees (empty and deep folders): the seed holds the very files, and its folders' own times",
        arguments: [false, true])
    func seedIsTheCheckedTree(threaded: Bool) async throws {
        for treeSeed: UInt64 in 1...12 {
            try await withTemporaryDirectory { scratch in
                let (source, target) = (scratch + "/next", scratch + "/seed")
                try FileManager.default.createDirectory(atPath: source, withIntermediateDirectories: true)
                try StreamedTreeCheckTests.writeRandomTree(source, seed: treeSeed)
                // Something left by an earlier run goes first.
                try FileManager.default.createDirectory(atPath: target + "/stale", withIntermediateDirectories: true)
                let seed: TwinSeed
                if threaded {
                    // As the restore's check runs it: on its own thread, behind a bounded queue.
                    seed = try #require(TwinSeed(from: source, into: target))
                    let thread = TwinSeedThread(seed)
                    _ = try TreeDigest.stream(source) { entry in thread.add(entry) }
                    let times = thread.finish()
                    #expect(times == seed.folderTimes && thread.finish() == times, "the same, however often asked")
                } else {
                    seed = try Self.seed(source, into: target)
                }
                #expect(seed.isComplete, "tree \(treeSeed)")
                #expect(try TreeSnapshot.read(target) == TreeSnapshot.read(source), "tree \(treeSeed)")
                let (tree, _) = try ContentTree.scanLocal(source)
                for path in tree.files.keys {
                    let linked = try #require(FileIdentity(path: path.absolute(in: target)))
                    #expect(linked == FileIdentity(path: path.absolute(in: source)), "\(path)")
                }
                #expect(Set(seed.folderTimes.keys) == Set(tree.folders), "tree \(treeSeed)")
                for (folder, time) in seed.folderTimes {
                    let info = try #require(FileSystem.status(of: folder.absolute(in: target)))
                    #expect(FileSystem.changeTime(info) == time, "\(folder): the time the folder has now")
                }
            }
        }
    }

    @Test(
        "a file replaced between its hash and its link, one written while read, or a link that fails: no seed",
        arguments: ["replaced", "written while read", "link in the way"])
    func anythingAmissGivesNoSeed(how: String) async throws {
        try await withTemporaryDirectory { scratch in
            let (source, target) = (scratch + "/next", scratch + "/seed")
            try FileManager.default.createDirectory(atPath: source + "/docs/api", withIntermediateDirectories: true)
            for name in ["a.txt", "docs/b.txt", "docs/api/c.txt", "docs/api/d.txt"] {
                try Data("file \(name)".utf8).write(to: URL(fileURLWithPath: source + "/" + name))
            }
            var done = false
            let seed = try Self.seed(source, into: target) { entry in
                guard !done, case .file(let path, let fingerprint, _) = entry, path.string == "docs/api/c.txt" else {
                    return entry
                }
                done = true
                let file = path.absolute(in: source)
                switch how {
                case "replaced":
                    // Same bytes, another file: the link would not be the file the check read.
                    try? FileManager.default.removeItem(atPath: file)
                    try? Data("file docs/api/c.txt".utf8).write(to: URL(fileURLWithPath: file))
                    return entry
                case "written while read":
                    return .file(path, fingerprint, nil)
                default:
                    let obstacle = path.absolute(in: target)
                    try? FileManager.default.createDirectory(
                        atPath: (obstacle as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                    #expect(FileManager.default.createFile(atPath: obstacle, contents: Data("in the way".utf8)))
                    return entry
                }
            }
            #expect(done)
            #expect(!seed.isComplete && seed.folderTimes.isEmpty, "\(how)")
            #expect(!FileManager.default.fileExists(atPath: target), "\(how): what it linked is removed at once")
        }
    }

    @Test("more entries than the seed's queue holds: the walk waits for the seed's thread, and the seed is whole")
    func aFullQueueMakesTheWalkWait() async throws {
        try await withTemporaryDirectory { scratch in
            let (source, target) = (scratch + "/next", scratch + "/seed")
            let files = 3 * TwinSeedThread.bound / 2
            for index in 0..<files {
                let folder = source + "/f\(index % 40)"
                if index < 40 {
                    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                }
                #expect(FileManager.default.createFile(atPath: folder + "/\(index)", contents: Data("\(index)".utf8)))
            }
            let seed = try #require(TwinSeed(from: source, into: target))
            let thread = TwinSeedThread(seed)
            _ = try TreeDigest.stream(source) { entry in thread.add(entry) }
            let times = try #require(thread.finish())
            #expect(times.count == 40)
            let (tree, _) = try ContentTree.scanLocal(target)
            #expect(tree.files.count == files)
            for index in [0, files / 2, files - 1] {
                let sample = try SafeRelativePath(validating: "f\(index % 40)/\(index)")
                let linked = try #require(FileIdentity(path: sample.absolute(in: target)))
                #expect(linked == FileIdentity(path: sample.absolute(in: source)), "\(sample)")
            }
        }
    }

    @Test("a tree 1,000 folders deep, on the seed's own thread: every folder made, the file linked")
    func aDeepTree() async throws {
        try await withTemporaryDirectory { scratch in
            let (source, target) = (scratch + "/next", scratch + "/seed")
            let deep = Array(repeating: "d", count: 1_000).joined(separator: "/")
            try FileManager.default.createDirectory(atPath: source + "/" + deep, withIntermediateDirectories: true)
            #expect(FileManager.default.createFile(atPath: source + "/" + deep + "/f", contents: Data("f".utf8)))
            let seed = try #require(TwinSeed(from: source, into: target))
            let thread = TwinSeedThread(seed)
            _ = try TreeDigest.stream(source) { entry in thread.add(entry) }
            #expect(thread.finish()?.count == 1_000)
            let file = try SafeRelativePath(validating: deep + "/f")
            let linked = try #require(FileIdentity(path: file.absolute(in: target)))
            #expect(linked == FileIdentity(path: file.absolute(in: source)))
        }
    }

    @Test("a filesystem without room to spare gets no seed; the default reserve is 64 MiB or 1 %")
    func noSeedWithoutRoom() async throws {
        try await withTemporaryDirectory { scratch in
            try FileManager.default.createDirectory(atPath: scratch + "/next", withIntermediateDirectories: true)
            #expect(TwinSeed(from: scratch + "/next", into: scratch + "/seed", reserve: .max) == nil)
            #expect(!FileManager.default.fileExists(atPath: scratch + "/seed"))
            #expect(TwinSeed(from: scratch + "/next", into: scratch + "/seed", reserve: 0) != nil)
        }
        #expect(TwinSeed.defaultReserve(capacity: 1 << 30) == 64 << 20)
        #expect(TwinSeed.defaultReserve(capacity: 1 << 40) == (1 << 40) / 100)
    }
}
