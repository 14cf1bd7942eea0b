import Archive
import Foundation
import StorageServer
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// Trees as deep as the path rules allow (4,095 bytes below the content folder), below a content
/// folder whose own path is long, so that absolute paths exceed what the kernel takes in one
/// piece (`PATH_MAX`, 4,096 bytes).
@Suite("Deep trees sync, verify and delete whatever the path length", .timeLimit(.minutes(3)))
struct DeepTreeTests {
    /// 30 folders of 99 bytes below the content folder: 3,000 bytes, which the publisher's
    /// snapshot copy and the client both handle (Foundation's `copyItem` failed past 1,024).
    static let deepFolders = (0..<30).map { String(format: "%02d", $0) + String(repeating: "f", count: 97) }

    /// Creates `components` one level at a time (relative to the open parent, as a deep tree
    /// must be made) with a file at the bottom.
    static func makeChain(_ components: [String], under root: String, leaf: String, contents: String) throws {
        var folder = open(root, O_RDONLY | O_DIRECTORY)
        #expect(folder >= 0)
        for name in components {
            if mkdirat(folder, name, 0o755) != 0 && errno != EEXIST {
                throw POSIXError(POSIXErrorCode(rawValue: errno)!)
            }
            let next = openat(folder, name, O_RDONLY | O_DIRECTORY)
            close(folder)
            folder = next
        }
        let file = openat(folder, leaf, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        _ = contents.withCString { write(file, $0, strlen($0)) }
        close(file)
        close(folder)
    }

    func publish(_ content: String, version: String, storage: String, initialize: Bool) throws {
        var options = PublishOptions(
            storage: storage, content: content, version: v(version), baseURL: PublishFixture.base)
        options.initialize = initialize
        _ = try Publisher.publish(options)
    }

    /// `quiet`: the system holds little dirty data, and a switch flushes with one `syncfs`;
    /// otherwise it flushes what it wrote one path at a time, each opened below its folders.
    @Test(arguments: [true, false])
    func aMirrorWhosePathsExceedPATHMAXSyncsReplaysVerifiesRepairsAndResets(quiet: Bool) async throws {
        try await withTemporaryDirectory { scratch in
            DiskFlush.faults.pretendDirty(quiet ? 0 : DiskFlush.quietDirtyLimit + 1, at: scratch)
            defer { DiskFlush.faults.clear(under: scratch) }
            // Version 1.0: the deep chain with a file at the bottom, and a file on top.
            let v1 = scratch + "/v1"
            try FileManager.default.createDirectory(atPath: v1, withIntermediateDirectories: true)
            try Self.makeChain(Self.deepFolders, under: v1, leaf: "leaf.txt", contents: "deep one")
            try "top".write(toFile: v1 + "/top.txt", atomically: false, encoding: .utf8)
            let storage = scratch + "/storage"
            try publish(v1, version: "1.0", storage: storage, initialize: true)

            // The client's folder is 1,200 bytes deep itself, so paths below it pass PATH_MAX.
            let parent =
                scratch + "/" + (0..<5).map { "p\($0)" + String(repeating: "q", count: 238) }.joined(separator: "/")
            try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
            let content = parent + "/content"
            let deepest = content + "/" + Self.deepFolders.joined(separator: "/") + "/leaf.txt"
            #expect(deepest.utf8.count > 4096, "the test needs absolute paths over PATH_MAX")

            try await withStorageServer(root: URL(fileURLWithPath: storage)) { server in
                var configuration = SyncConfiguration(
                    baseURL: server.baseURL!, contentDirectory: content,
                    stateDatabasePath: scratch + "/state.sqlite")
                configuration.maxConcurrentDownloads = 4
                let manager = try CacheManager(configuration: configuration)
                #expect(try await manager.checkForUpdates().outcome == .restored)
                #expect(try ContentTree.scanLocal(content).tree == ContentTree.scan(v1))

                // 1.1 moves the chain under a new folder and edits the leaf: links, folders and
                // an unnamed download all at paths over PATH_MAX.
                let v2 = scratch + "/v2"
                try FileManager.default.createDirectory(atPath: v2 + "/moved", withIntermediateDirectories: true)
                try Self.makeChain(Self.deepFolders, under: v2 + "/moved", leaf: "leaf.txt", contents: "deep two")
                try Self.makeChain(
                    Array(Self.deepFolders.prefix(20)), under: v2 + "/moved", leaf: "also.txt", contents: "kept bytes")
                try "top".write(toFile: v2 + "/top.txt", atomically: false, encoding: .utf8)
                try publish(v2, version: "1.1", storage: storage, initialize: false)
                #expect(try await manager.checkForUpdates().outcome == .replayed)
                let expected = try ContentTree.scan(v2)
                #expect(try ContentTree.scanLocal(content).tree == expected)
                #expect(try await manager.verify().matches)

                // Drift at the bottom, repaired through the same long paths.
                try TreeRemoval.remove(content + "/moved/" + Self.deepFolders.joined(separator: "/") + "/leaf.txt")
                let check = try await manager.verify()
                #expect(
                    check.differences == ["missing file moved/" + Self.deepFolders.joined(separator: "/") + "/leaf.txt"]
                )
                #expect(try await manager.verify(repair: true).matches)
                #expect(try ContentTree.scanLocal(content).tree == expected)

                try await manager.reset()
                #expect(!FileManager.default.fileExists(atPath: content))
                #expect(!FileManager.default.fileExists(atPath: StagingArea(contentDirectory: content).root))
            }
        }
    }

    @Test func walkingAndDeletingAnEighteenHundredLevelTree() async throws {
        try await withTemporaryDirectory { scratch in
            let root = scratch + "/tree"
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            try Self.makeChain(Array(repeating: "d", count: 1_800), under: root, leaf: "bottom.txt", contents: "x")
            var folders = 0
            var deepestFile: SafeRelativePath?
            try DirectoryWalker.walk(root) { entry in
                switch entry {
                case .folder: folders += 1
                case .file(let path, _): deepestFile = path
                default: Issue.record("unexpected \(entry)")
                }
            }
            #expect(folders == 1_800)
            #expect(deepestFile?.components.count == 1_801)
            try TreeRemoval.remove(root)
            #expect(!FileManager.default.fileExists(atPath: root))
        }
    }

    @Test func aDriftTreeDeeperThanAnyContentPathIsReportedAndDeletedNotEntered() async throws {
        try await withTemporaryDirectory { scratch in
            let root = scratch + "/tree"
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            // 3,000 levels of "dd/" is 8,999 bytes: no content path can name its bottom.
            try Self.makeChain(Array(repeating: "dd", count: 3_000), under: root, leaf: "bottom.txt", contents: "x")
            let (tree, intruders) = try ContentTree.scanLocal(root)
            #expect(intruders.count == 1)
            #expect(intruders.first?.kind == .unsafeName)
            #expect(tree.folders.count == 1_365, "entered while the path stays within 4,095 bytes")
            try intruders[0].remove(under: root)
            try TreeRemoval.remove(root)
            #expect(!FileManager.default.fileExists(atPath: root))
        }
    }
}
