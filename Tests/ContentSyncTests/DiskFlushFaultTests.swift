import Foundation
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// A flush the disk refuses (`syncfs` or a folder's `fsync` failing with EIO) stops the switch:
/// the previous version stays in place and recorded, the error names the flush and the folder,
/// and once the disk answers again the next run finishes the job. The faults are injected at
/// `DiskFlush` (the one place every flush goes through), each for one test's own folder.
@Suite("a flush the disk refuses never records a version as switched", .timeLimit(.minutes(3)))
struct DiskFlushFaultTests {
    /// Runs `body` with `operation` failing (EIO) at `folder`, and clears the fault after.
    @discardableResult
    func withFault<T>(
        _ operation: DiskFlush.Operation, at folder: String, below: Bool = true, _ body: () async throws -> T
    ) async rethrows -> T {
        DiskFlush.faults.inject(operation, at: folder, below: below, errno: EIO)
        defer { DiskFlush.faults.clear(under: folder) }
        return try await body()
    }

    func expectFlushFailure(
        _ error: any Error, _ syscall: String, naming path: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let error = error as? SyncError
        #expect(error?.code == .fileSystem, "\(String(describing: error))", sourceLocation: sourceLocation)
        let text = error.map { "\($0)" } ?? ""
        #expect(text.contains("(\(syscall): Input/output error, errno 5)"), "\(text)", sourceLocation: sourceLocation)
        #expect(text.contains(path), "\(text)", sourceLocation: sourceLocation)
        #expect(!text.contains("/proc/self/fd"), "named by its path: \(text)", sourceLocation: sourceLocation)
        #expect(text.contains("check it (`dmesg`"), "\(text)", sourceLocation: sourceLocation)
    }

    /// One sync with the content folder's parent refusing its fsync: it fails, naming the flush.
    func expectSyncRefusedByTheParentsFsync(
        _ harness: SyncHarness, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        let parent = (harness.content as NSString).deletingLastPathComponent
        await withFault(.fsync, at: parent, below: false) {
            await #expect(sourceLocation: sourceLocation) {
                try await harness.sync()
            } throws: { error in
                expectFlushFailure(error, "fsync", naming: "the folder \(parent)", sourceLocation: sourceLocation)
                return true
            }
        }
    }

    /// The replay flushes what it staged one of two ways, chosen by the system's dirty data
    /// (``DiskFlush/written(_:holding:)``): the test pins each, so that its outcome never depends
    /// on how busy the machine running it is (a busy CI machine once took the other way).
    @Test(
        "a refused flush of the staged tree, quiet (syncfs) or busy (an fsync per path), leaves N in place and the next run switches",
        arguments: [(Int64(0), DiskFlush.Operation.syncfs), (DiskFlush.quietDirtyLimit + 1, .fsync)])
    func aRefusedFlushBeforeTheSwitchLeavesNInPlaceAndTheNextRunSwitches(
        dirty: Int64, taken: DiskFlush.Operation
    ) async throws {
        try await withSyncHarness(serving: "1.2") { harness in
            try await harness.sync()
            let before = try harness.tree()
            harness.serve("1.4")
            let staging = StagingArea(contentDirectory: harness.content)
            DiskFlush.faults.pretendDirty(dirty, at: staging.root)
            defer { DiskFlush.faults.clear(under: staging.root) }
            await withFault(taken, at: staging.root) {
                await #expect {
                    try await harness.sync()
                } throws: { error in
                    expectFlushFailure(error, taken.rawValue, naming: staging.next)
                    return true
                }
            }
            #expect(try harness.tree() == before)
            let status = try await SyncStatus.read(statePath: harness.state, contentDirectory: harness.content)
            #expect(status.version == "1.2")
            #expect(status.state == .failed && status.lastErrorCode == .fileSystem)

            try await harness.sync()
            try harness.expectTree(is: "1.4")
            let after = try await SyncStatus.read(statePath: harness.state, contentDirectory: harness.content)
            #expect(after.version == "1.4")
        }
    }

    @Test func aRefusedFsyncAfterTheSwapPutsNBackAndTheNextRunFinishesTheSwitch() async throws {
        try await withSyncHarness(serving: "1.2") { harness in
            try await harness.sync()
            let before = try harness.tree()
            let beforeInode = try #require(FileSystem.identity(of: harness.content))
            harness.serve("1.4")
            await expectSyncRefusedByTheParentsFsync(harness)
            // The swap was undone: the same folder (inode) as before, with the same tree.
            #expect(try harness.tree() == before)
            #expect(FileSystem.identity(of: harness.content).map { $0 == beforeInode } == true)
            let status = try await SyncStatus.read(statePath: harness.state, contentDirectory: harness.content)
            #expect(status.version == "1.2")
            #expect(status.state == .failed && status.lastErrorCode == .fileSystem)

            harness.server.resetLog()
            try await harness.sync()
            try harness.expectTree(is: "1.4")
            #expect(harness.contentDownloads().isEmpty, "the staged tree was switched in, not downloaded again")
            let after = try await SyncStatus.read(statePath: harness.state, contentDirectory: harness.content)
            #expect(after.version == "1.4")
        }
    }

    @Test func aRefusedFsyncAfterAFirstRestoreLeavesNoContentFolderAndTheNextRunRestores() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            await expectSyncRefusedByTheParentsFsync(harness)
            #expect(!FileManager.default.fileExists(atPath: harness.content))
            let status = try await SyncStatus.read(statePath: harness.state, contentDirectory: harness.content)
            #expect(status.version == nil)

            try await harness.sync()
            try harness.expectTree(is: "1.0")
        }
    }

    @Test func aDurableAtomicWriteReportsARefusedFolderFsync() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let path = scratch + "/file.json"
            DiskFlush.faults.inject(.fsync, at: scratch, below: false, errno: EIO)
            defer { DiskFlush.faults.clear(under: scratch) }
            #expect {
                try AtomicFile.write(Data("new".utf8), to: path, durability: .full)
            } throws: { error in
                let error = error as? FileSystemError
                return error?.syscall == "fsync" && error?.errno == EIO && error?.path == scratch
            }
            // Without durability nothing is flushed, so nothing can be refused.
            try AtomicFile.write(Data("newer".utf8), to: path, durability: .none)
            #expect(try String(contentsOfFile: path, encoding: .utf8) == "newer")
        }
    }

    @Test func aRealFlushSucceedsAndAMissingFolderIsNamed() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            try DiskFlush.filesystem(holding: scratch)
            try DiskFlush.folder(scratch)
            #expect {
                try DiskFlush.folder(scratch + "/missing")
            } throws: { error in
                let error = error as? FileSystemError
                return error?.syscall == "open" && error?.code == .notFound
                    && "\(error!)".contains(scratch + "/missing")
            }
        }
    }

    @Test func aPublishWhoseSyncfsIsRefusedLeavesTheStorageAtItsVersion() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let storage = scratch + "/storage"
            try setup.makeBase(at: storage)
            let before = try storageSnapshot(storage)
            DiskFlush.faults.inject(.syncfs, at: storage, errno: EIO)
            #expect {
                try setup.publish(storage: storage)
            } throws: { error in
                let text = "\(error)"
                return (error as? PublishError)?.code == .fileSystem && text.contains("(syncfs: Input/output error")
                    && text.contains(storage)
            }
            DiskFlush.faults.clear(under: storage)
            #expect(try storageSnapshot(storage) == before, "the refused publish changed the storage")
            try setup.publish(storage: storage)
            #expect(try storageSnapshot(storage) != before)
        }
    }

    @Test func aPublishWhoseFolderFsyncIsRefusedRollsBackOrIsFinishedByTheNextPublish() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let storage = scratch + "/storage"
            try setup.makeBase(at: storage)
            let before = try storageSnapshot(storage)
            DiskFlush.faults.inject(.fsync, at: storage, below: false, errno: EIO)
            #expect {
                try setup.publish(storage: storage)
            } throws: { error in
                let text = "\(error)"
                return (error as? PublishError)?.code == .fileSystem && text.contains("(fsync: Input/output error")
                    && text.contains("rolling back failed too")
            }
            DiskFlush.faults.clear(under: storage)
            // The roll-back could not be flushed either (same fault): the next publish finishes it,
            // then publishes.
            try setup.publish(storage: storage)
            let after = try storageSnapshot(storage)
            #expect(after != before)
            let status = try Data(contentsOf: URL(fileURLWithPath: storage + "/" + StorageLayout.statusPath))
            #expect(String(decoding: status, as: UTF8.self).contains("\"1.1\""))
        }
    }
}

@Suite("a small catch-up flushes what it wrote, and a refusal stops the switch", .timeLimit(.minutes(3)))
struct TargetedFlushTests {
    /// How a catch-up's flush goes on a busy system (more dirty data than a `syncfs` may wait
    /// for) and on a quiet one; both flushes are refused under next/, so the error names the one
    /// the catch-up took, and never the other.
    @Test(
        "a 1.2 → 1.3 catch-up fsyncs what it wrote on a busy system, syncfs once on a quiet one; refused, it leaves 1.2 and the next run switches",
        arguments: [
            (DiskFlush.quietDirtyLimit + 1, "fsync", "syncfs"),
            (Int64(0), "syncfs", "fsync"),
        ])
    func refusedFlushOfACatchUp(dirty: Int64, taken: String, notTaken: String) async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await TwinTreeTests.syncThrough(harness, "1.1", "1.2")
            harness.serve("1.3")
            let staging = StagingArea(contentDirectory: harness.content)
            let before = try harness.tree()
            DiskFlush.faults.pretendDirty(dirty, at: staging.next)
            DiskFlush.faults.inject(.fsync, at: staging.next, errno: EIO)
            DiskFlush.faults.inject(.syncfs, at: staging.next, below: false, errno: EIO)
            await #expect {
                try await harness.sync()
            } throws: { error in
                let text = "\(error)"
                return (error as? SyncError)?.code == .fileSystem
                    && text.contains("(\(taken): Input/output error, errno 5)")
                    && text.contains(staging.next) && !text.contains(notTaken)
            }
            DiskFlush.faults.clear(under: staging.next)
            #expect(try harness.tree() == before, "1.2 stays in place")
            let status = try await SyncStatus.read(statePath: harness.state, contentDirectory: harness.content)
            #expect(status.version == "1.2")
            // The staged tree is switched in by the next run (the switch it had marked is redone).
            harness.server.resetLog()
            let report = try await harness.sync()
            #expect(report.toVersion.text == "1.3")
            #expect(harness.contentDownloads().isEmpty, "the staged tree was switched in, not downloaded again")
            try harness.expectTree(is: "1.3")
        }
    }

    @Test(
        "the written set of a patch: its downloads, the folders it changed and the staging folder; none past the bound")
    func writtenSet() {
        let staging = StagingArea(contentDirectory: "/srv/mirror")
        var patch = TwinPatch()
        patch.removals = [p("a/old.txt"), p("b")]
        patch.folders = [p("c"), p("c/d")]
        patch.links = [SyncPlan.Reuse(target: p("c/d/x.txt"), source: p("a/x.txt"))]
        patch.downloads = [p("a/new.txt")]
        let written = Stager.written(by: patch, staging: staging)
        #expect(
            written == [
                staging.next + "/a/new.txt", staging.next, staging.next + "/a", staging.next + "/c",
                staging.next + "/c/d",
                staging.root, staging.partial,
            ])
        patch.downloads = (0...Stager.maxFlushedOneByOne).map { p("f\($0).bin") }
        #expect(Stager.written(by: patch, staging: staging) == nil)
    }
}
