import Archive
import Foundation
import StorageServer
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// Local drift of every kind and name: what a user, a backup tool or a crash leaves in a mirror.
/// A replay never gets stuck on it; `verify` reports all of it and `--repair` removes it.
@Suite("Local drift of any kind or name is repaired, never a wedge", .timeLimit(.minutes(3)))
struct LocalDriftTests {
    // MARK: - Replays

    /// A client synced to 1.2 whose folder then drifts; the storage moves to 1.4.
    func withClientAt12(
        integrity: Bool = true, _ drift: (String) throws -> Void, _ body: (SyncHarness) async throws -> Void
    ) async throws {
        try await withTemporaryDirectory { scratch in
            let storage12 = try copySnapshot("1.2", to: scratch + "/s12")
            let storage14 = try copySnapshot("1.4", to: scratch + "/s14")
            if !integrity {
                try StorageEditing.stripIntegrity(storage12.path)
                try StorageEditing.stripIntegrity(storage14.path)
            }
            try await withSyncHarness(storageRoot: storage12) { harness in
                try await harness.sync()
                try harness.expectTree(is: "1.2")
                try drift(harness.content)
                harness.server.setRoot(storage14)
                harness.server.resetLog()
                try await body(harness)
            }
        }
    }

    @Test func aStrayFileWithANonUTF8NameDoesNotStopAReplay() async throws {
        for integrity in [true, false] {
            try await withClientAt12(
                integrity: integrity,
                { content in
                    try createFile(named: Array("docs/caf".utf8) + [0xE9] + Array(".txt".utf8), in: content)
                }
            ) { harness in
                let report = try await harness.sync()
                #expect(report.outcome == .replayed)
                #expect(
                    try rawNames(in: harness.content + "/docs").allSatisfy {
                        String(validating: $0, as: UTF8.self) != nil
                    },
                    "the stray is left out of the new version")
                try harness.expectTree(is: "1.4")
                #expect(!FileManager.default.fileExists(atPath: StagingArea(contentDirectory: harness.content).root))
            }
        }
    }

    @Test func specialFilesAndUnsafeNamesInTheMirrorDoNotStopAReplay() async throws {
        try await withClientAt12({ content in
            try FileManager.default.createSymbolicLink(
                atPath: content + "/docs/link", withDestinationPath: "/etc/passwd")
            #expect(mkfifo(content + "/docs/pipe", 0o644) == 0)
            try "x".write(toFile: content + "/docs/back\\slash.txt", atomically: false, encoding: .utf8)
            try "x".write(toFile: content + "/docs/control\u{1}.txt", atomically: false, encoding: .utf8)
        }) { harness in
            #expect(try await harness.sync().outcome == .replayed)
            try harness.expectTree(is: "1.4")
        }
    }

    /// Without the restore's twin the replay links from the drifted folder and repairs it; with
    /// it, the twin never saw the drift.
    @Test(arguments: [true, false])
    func aFolderReplacedByAFileIsRepairedWithoutARestore(keepingTwin: Bool) async throws {
        try await withClientAt12({ content in
            try FileManager.default.removeItem(atPath: content + "/docs/api/v2")
            try "not a folder".write(toFile: content + "/docs/api/v2", atomically: false, encoding: .utf8)
        }) { harness in
            if !keepingTwin { try harness.removeTwinFolder() }
            let report = try await harness.sync()
            #expect(report.outcome == .replayed)
            #expect(keepingTwin ? report.repairedFiles == 0 : report.repairedFiles > 0)
            #expect(
                harness.server.bytesServed(forPathSuffix: "RXCacheContent.zip") == 0,
                "repaired file by file, no fallback to the archive")
            try harness.expectTree(is: "1.4")
        }
    }

    @Test func aFileReplacedByAFolderIsRepairedWithoutARestore() async throws {
        try await withClientAt12({ content in
            try FileManager.default.removeItem(atPath: content + "/notes/tasks.txt")
            try FileManager.default.createDirectory(
                atPath: content + "/notes/tasks.txt/inner", withIntermediateDirectories: true)
            try "x".write(toFile: content + "/notes/tasks.txt/inner/x.md", atomically: false, encoding: .utf8)
        }) { harness in
            let report = try await harness.sync()
            #expect(report.outcome == .replayed)
            #expect(
                harness.server.bytesServed(forPathSuffix: "RXCacheContent.zip") == 0,
                "repaired file by file, no fallback to the archive")
            try harness.expectTree(is: "1.4")
        }
    }

    /// The file the next versions redownload (`docs/intro.md`, changed in 1.3) replaced by a
    /// folder holding files: the redownload must fetch the file, not refresh what the folder
    /// holds (files no storage publishes, a 404 on every run).
    @Test func aFileTheReplayRedownloadsReplacedByAFolderIsFetched() async throws {
        try await withClientAt12({ content in
            try FileManager.default.removeItem(atPath: content + "/docs/intro.md")
            try FileManager.default.createDirectory(
                atPath: content + "/docs/intro.md/sub", withIntermediateDirectories: true)
            try "z".write(toFile: content + "/docs/intro.md/sub/z.txt", atomically: false, encoding: .utf8)
        }) { harness in
            let report = try await harness.sync()
            #expect(report.outcome == .replayed)
            #expect(harness.server.requests().allSatisfy { !$0.path.contains("intro.md/") })
            #expect(
                harness.server.bytesServed(forPathSuffix: "RXCacheContent.zip") == 0,
                "repaired file by file, no fallback to the archive")
            try harness.expectTree(is: "1.4")
        }
    }

    @Test func withoutIntegrityDataKindSwapsDoNotStopAReplay() async throws {
        try await withClientAt12(
            integrity: false,
            { content in
                try FileManager.default.removeItem(atPath: content + "/docs/api/v2")
                try "not a folder".write(toFile: content + "/docs/api/v2", atomically: false, encoding: .utf8)
                try FileManager.default.removeItem(atPath: content + "/notes/tasks.txt")
                try FileManager.default.createDirectory(
                    atPath: content + "/notes/tasks.txt", withIntermediateDirectories: true)
            }
        ) { harness in
            // Nothing tells this client what the folder should hold, but it must not get stuck.
            let report = try await harness.sync()
            #expect(report.outcome == .replayed)
            #expect(try await harness.manager().localVersion() == v("1.4"))
        }
    }

    /// README.txt is the same in 1.2 and 1.4, so the replay keeps the drifted copy: linked from
    /// the content folder (no twin), or the twin's link to the same file (an edit in place
    /// reaches both; the full check due finds it). Without the content manifest the tree check
    /// cannot repair it, and the update restores instead.
    @Test(arguments: [true, false])
    func aDriftedFileTheManifestCannotRepairFallsBackToTheArchive(keepingTwin: Bool) async throws {
        try await withClientAt12({ content in
            try "drifted".write(toFile: content + "/README.txt", atomically: false, encoding: .utf8)
        }) { harness in
            if !keepingTwin { try harness.removeTwinFolder() }
            let storage = harness.server.root.path
            try FileManager.default.removeItem(atPath: storage + "/RXCacheConfig/contentManifest.json")
            let report = try await harness.sync(fullCheckInterval: keepingTwin ? .zero : nil)
            #expect(report.outcome == .restored)
            let warning = try #require(report.warnings.first)
            #expect(
                warning.hasPrefix(
                    "the replayed tree did not match the published tree digest and could not be repaired file by file "
                        + "(after replaying to 1.4: its content manifest cannot be read ("), "\(warning)")
            #expect(warning.hasSuffix("); restored from the archive"), "\(warning)")
            try harness.expectTree(is: "1.4")
            let history = try await harness.manager().history()
            #expect(
                history.first?.kind == .restore && history.first?.outcome == .succeeded,
                "one attempt, a successful restore")
        }
    }

    // MARK: - verify

    /// A storage published at 1.1 and a client synced to it.
    func withVerifiedClient(_ body: (SyncHarness, CacheManager) async throws -> Void) async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            _ = try PublishFixture.publish("1.1", storage: storage, scratch: scratch, initialize: true)
            try await withSyncHarness(storageRoot: URL(fileURLWithPath: storage)) { harness in
                try await harness.sync()
                let manager = try harness.manager()
                #expect(try await manager.verify().matches)
                try await body(harness, manager)
            }
        }
    }

    @Test func verifyReportsEveryIntruderByItsRealNameAndRepairRemovesIt() async throws {
        try await withVerifiedClient { harness, manager in
            let content = harness.content
            try FileManager.default.createSymbolicLink(
                atPath: content + "/docs/link", withDestinationPath: "/etc/passwd")
            #expect(mkfifo(content + "/docs/pipe", 0o644) == 0)
            try "x".write(toFile: content + "/back\\slash.txt", atomically: false, encoding: .utf8)
            try "x".write(toFile: content + "/control\u{1}.txt", atomically: false, encoding: .utf8)
            try createFile(named: Array("docs/caf".utf8) + [0xE9] + Array(".txt".utf8), in: content)

            let check = try await manager.verify()
            #expect(!check.matches)
            #expect(
                Set(check.differences) == [
                    "extra symlink docs/link",
                    "extra fifo docs/pipe",
                    "extra entry with a name the path rules refuse back\\x5Cslash.txt",
                    "extra entry with a name the path rules refuse control\\x01.txt",
                    "extra entry whose name is not UTF-8 docs/caf\\xE9.txt",
                ])
            let repair = try await manager.verify(repair: true)
            #expect(repair.matches)
            #expect(repair.repaired == 5)
            try harness.expectTree(is: "1.1")
            #expect(try rawNames(in: content + "/docs").allSatisfy { String(validating: $0, as: UTF8.self) != nil })
            #expect(FileManager.default.fileExists(atPath: "/etc/passwd"), "the symlink's target is not touched")
            #expect(try await manager.verify().matches)
        }
    }

    @Test func verifyRepairsAFolderReplacedByAFileAndTheReverse() async throws {
        try await withVerifiedClient { harness, manager in
            let content = harness.content
            try FileManager.default.removeItem(atPath: content + "/docs")
            try "a file now".write(toFile: content + "/docs", atomically: false, encoding: .utf8)
            try FileManager.default.removeItem(atPath: content + "/README.txt")
            try FileManager.default.createDirectory(
                atPath: content + "/README.txt/deeper", withIntermediateDirectories: true)

            let check = try await manager.verify()
            #expect(check.differences.contains("a file where a folder belongs: docs"))
            #expect(check.differences.contains("a folder where a file belongs: README.txt"))
            let repair = try await manager.verify(repair: true)
            #expect(repair.matches)
            try harness.expectTree(is: "1.1")
        }
    }

    // MARK: - The repair plan (pure)

    @Test func theRepairPlanDeletesEveryWrongKindFirstAndOnlyOutermostPaths() throws {
        let fingerprint = FileFingerprint(size: 1, sha256: String(repeating: "a", count: 64))
        let other = FileFingerprint(size: 2, sha256: String(repeating: "b", count: 64))
        let staged = ContentTree(
            folders: [p("docs"), p("docs/old"), p("x.txt"), p("x.txt/in"), p("keep")],
            files: [
                p("docs/old/a.md"): fingerprint, p("README.txt"): other, p("keep/same.md"): fingerprint,
                p("x.txt/in/b.md"): fingerprint, p("folder"): fingerprint,
            ])
        let manifest = ContentTree(
            folders: [p("docs"), p("keep"), p("folder"), p("folder/sub")],
            files: [
                p("README.txt"): fingerprint, p("keep/same.md"): fingerprint, p("x.txt"): other,
                p("folder/sub/c.md"): fingerprint,
            ])
        let plan = RepairPlan(staged: staged, intruders: [], manifest: manifest)
        #expect(plan.removals == [p("x.txt"), p("folder"), p("docs/old")], "deepest first, nothing inside another")
        #expect(plan.folders == [p("folder"), p("folder/sub")], "parents first")
        #expect(plan.downloads.map(\.0) == [p("README.txt"), p("folder/sub/c.md"), p("x.txt")])
    }

    func p(_ text: String) -> SafeRelativePath { try! SafeRelativePath(validating: text) }
}

/// Creates a file whose name is the raw bytes `relative` (which may not be UTF-8) below `root`.
func createFile(named relative: [UInt8], in root: String, contents: String = "stray") throws {
    let path = Array(root.utf8) + [UInt8(ascii: "/")] + relative + [0]
    let fd = path.withUnsafeBufferPointer { buffer in
        buffer.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_WRONLY | O_CREAT | O_EXCL, 0o644) }
    }
    guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno)!) }
    _ = contents.withCString { write(fd, $0, strlen($0)) }
    close(fd)
}

/// The names in `folder` as raw bytes (FileManager would repair ones that are not UTF-8).
func rawNames(in folder: String) throws -> [[UInt8]] {
    guard let handle = opendir(folder) else { throw POSIXError(POSIXErrorCode(rawValue: errno)!) }
    defer { closedir(handle) }
    var names: [[UInt8]] = []
    while let entry = readdir(handle) {
        let name = Array(DirectoryEntryName.bytes(entry))
        if name != [0x2E] && name != [0x2E, 0x2E] { names.append(name) }
    }
    return names
}
