import Foundation
import GRDB
import StorageServer
import Testing

@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// The previous version stays in the staging area as a twin, and the next replay catches it up
/// path by path instead of linking every file again: on the real filesystem, over successive
/// versions, with drift, planted entries, hostile rows and an abandoned catch-up.
@Suite("The twin tree: a replay catches the previous version up", .timeLimit(.minutes(3)))
struct TwinTreeTests {
    static func staging(_ harness: SyncHarness) -> StagingArea { StagingArea(contentDirectory: harness.content) }

    /// Restores the served 1.0, then replays each of `versions` in turn: from the second
    /// version on, the client keeps the previous one as its twin.
    static func syncThrough(_ harness: SyncHarness, _ versions: String...) async throws {
        try await harness.sync()
        for version in versions {
            harness.serve(version)
            try await harness.sync()
        }
    }

    /// Brings the client to 1.1 (1.0 its twin), then fails its catch-up to 1.2 part-way (one file
    /// refused): the twin is left in next/, half caught up.
    static func stopCatchUpPartWay(_ harness: SyncHarness) async throws {
        try await syncThrough(harness, "1.1")
        harness.serve("1.2")
        harness.server.injectFault(.status(404), forPath: "/RXCacheContent/docs/api/v2/errors.md")
        await #expect(throws: SyncError.self) { try await harness.sync(concurrency: 1) }
        harness.server.clearFaults()
    }

    static func twin(_ harness: SyncHarness) async throws -> TwinState? {
        try await StateStore(path: harness.state).twin()
    }

    @Test("1.0 → 1.4 one version at a time: the restore and each replay leave a twin, and nothing is repaired")
    func successiveReplays() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            // The restore's twin: 1.0 itself, linked, with nothing dirty and its folders' times.
            let seeded = try #require(try await Self.twin(harness), "a restore leaves a twin")
            #expect(seeded.baseVersion == "1.0" && seeded.changes.isEmpty)
            #expect(
                try await StateStore(path: harness.state).twinFolders().count == 1
                    + ExampleStorageFixture.manifest("1.0").folders.count)
            var caughtUp = 0
            for version in ["1.1", "1.2", "1.3", "1.4"] {
                let retired = FileSystem.identity(of: Self.staging(harness).retired)
                let twinBefore = try await Self.twin(harness)
                harness.serve(version)
                let report = try await harness.sync()
                #expect(report.outcome == .replayed, "\(version)")
                #expect(report.repairedFiles == 0, "\(version): \(report.warnings)")
                try harness.expectTree(is: version)
                if twinBefore != nil, let retired {
                    // The twin was caught up and swapped in: the content folder is that folder now.
                    let current = try #require(FileSystem.identity(of: harness.content))
                    #expect(current == retired, "\(version): the twin became the content folder")
                    #expect(report.checkedIncrementally, "\(version): checked from the tree index")
                    caughtUp += 1
                }
                let twin = try #require(try await Self.twin(harness), "\(version): the previous version is kept")
                #expect(twin.baseVersion == version)
                #expect(try await StateStore(path: harness.state).treeIndex()?.version == version)
                #expect(try await !StateStore(path: harness.state).twinFolders().isEmpty)
                let kept = try #require(FileSystem.identity(of: Self.staging(harness).retired))
                #expect((twin.device, twin.inode) == kept)
            }
            #expect(caughtUp == 4, "1.1 (from the restore's twin), 1.2, 1.3 and 1.4 were each caught up from the twin")
            #expect(try await Self.twin(harness)?.changes.isEmpty == false)
        }
    }

    @Test(
        "a restore vetoed at its switch, then run again: its twin is linked afresh, and the next replay catches it up")
    func restoreResumedAfterAVeto() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            var vetoing = harness.configuration()
            vetoing.beforeSwitch = { _ in throw CancellationError() }
            await #expect(throws: SyncError.self) { try await CacheManager(configuration: vetoing).checkForUpdates() }
            let staging = Self.staging(harness)
            #expect(harness.stagingEntries().contains("seed"), "linked before the switch was asked")
            #expect(try await Self.twin(harness) == nil, "and not recorded")
            // Something changes the unrecorded seed meanwhile: the next run links it afresh.
            try Data("planted".utf8).write(to: URL(fileURLWithPath: staging.seed + "/planted.txt"))
            let report = try await harness.sync()
            #expect(report.outcome == .restored)
            #expect(harness.stagingEntries() == ["retired"])
            #expect(try TreeSnapshot.read(staging.retired) == harness.tree())
            let twin = try #require(try await Self.twin(harness))
            #expect(twin.baseVersion == "1.0" && twin.changes.isEmpty)
            let retired = try #require(FileSystem.identity(of: staging.retired))
            harness.serve("1.1")
            let next = try await harness.sync()
            #expect(next.outcome == .replayed && next.repairedFiles == 0 && next.checkedIncrementally)
            try harness.expectTree(is: "1.1")
            let current = try #require(FileSystem.identity(of: harness.content))
            #expect(current == retired, "the restore's twin became the content folder")
        }
    }

    @Test("the folder times recorded at each switch are the folders' own, though the untouched ones are not read again")
    func recordedFolderTimesAreReal() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            var reused = 0
            for version in ["1.1", "1.2", "1.3", "1.4"] {
                harness.serve(version)
                let report = try await harness.sync()
                try harness.expectTree(is: version)
                let store = try StateStore(path: harness.state)
                let live = try await store.liveFolders()
                let folders = live.keys.filter { !$0.isRoot }
                #expect(!folders.isEmpty && live == Stager.folderTimes(folders, in: harness.content), "\(version)")
                let twin = try await store.twinFolders()
                let retired = Self.staging(harness).retired
                #expect(
                    twin == Stager.folderTimes(twin.keys.filter { !$0.isRoot }, in: retired),
                    "\(version): the twin's recorded folder times")
                if report.plannedFromIndex { reused += 1 }
            }
            #expect(reused >= 2, "replays planned from the index, so their times were reused")
        }
    }

    @Test("files deleted, added and changed by hand in the content folder between updates: the next version is exact")
    func driftBetweenUpdates() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await Self.syncThrough(harness, "1.1", "1.2")
            // Drift in the live folder: a kept file deleted, a stray one added, one rewritten
            // (a new file under the same name: the twin's link stays the old bytes).
            try FileManager.default.removeItem(atPath: harness.content + "/README.txt")
            try Data("stray".utf8).write(to: URL(fileURLWithPath: harness.content + "/stray.txt"))
            try FileManager.default.removeItem(atPath: harness.content + "/styles/main.css")
            try Data("body{}".utf8).write(to: URL(fileURLWithPath: harness.content + "/styles/main.css"))
            harness.serve("1.3")
            let report = try await harness.sync()
            #expect(report.outcome == .replayed)
            #expect(!report.checkedIncrementally, "the folder's shape is not the recorded one: the whole tree is read")
            try harness.expectTree(is: "1.3")
            harness.serve("1.4")
            try await harness.sync()
            try harness.expectTree(is: "1.4")
        }
    }

    @Test(
        "a kept file replaced or edited by hand (same shape), and a full check due: the whole tree is checked, and the next version is exact",
        arguments: ["replaced", "edited in place"])
    func fileDriftWithTheSameShape(how: String) async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await Self.syncThrough(harness, "1.1", "1.2")
            let path = harness.content + "/styles/main.css"
            if how == "replaced" {
                try FileManager.default.removeItem(atPath: path)
                try Data("body{color:red}".utf8).write(to: URL(fileURLWithPath: path))
            } else {
                let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
                try handle.write(contentsOf: Data("/* edited */".utf8))
                try handle.close()
            }
            // An edit in place keeps the folder's ctime: only a full check sees it (between full
            // checks, IndexPlanningTests.inPlaceEditWaitsForTheFullCheck).
            for version in ["1.3", "1.4"] {
                harness.serve(version)
                let report = try await harness.sync(fullCheckInterval: .zero)
                #expect(report.outcome == .replayed)
                try harness.expectTree(is: version)
                if version == "1.3" { #expect(!report.checkedIncrementally) }
            }
        }
    }

    @Test("a kept file deleted by hand that the next version still has: not hidden by the twin's older link")
    func deletedFileStillPublished() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await Self.syncThrough(harness, "1.1", "1.2")
            // README.txt is in every version: deleted here, the plan (built from the folder)
            // lacks it; the twin still links it; the index still records it.
            try FileManager.default.removeItem(atPath: harness.content + "/README.txt")
            for version in ["1.3", "1.4"] {
                harness.serve(version)
                let report = try await harness.sync()
                #expect(report.outcome == .replayed)
                try harness.expectTree(is: version)
            }
        }
    }

    @Test("a folder of the twin changed while it waited: that subtree is rebuilt, the check stays incremental")
    func twinFolderChangedWhileWaiting() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await Self.syncThrough(harness, "1.1", "1.2")
            // A file of the twin deleted, and one added in another folder of it.
            let retired = Self.staging(harness).retired
            try FileManager.default.removeItem(atPath: retired + "/styles/theme.css")
            try Data("stray".utf8).write(to: URL(fileURLWithPath: retired + "/images/stray.png"))
            harness.serve("1.3")
            let report = try await harness.sync()
            #expect(report.outcome == .replayed)
            #expect(report.repairedFiles == 0)
            #expect(report.checkedIncrementally)
            try harness.expectTree(is: "1.3")
        }
    }

    @Test("entries planted in the twin (a file, a symlink to a secret) never reach the content folder")
    func plantedEntriesInTheTwin() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await Self.syncThrough(harness, "1.1")
            let retired = Self.staging(harness).retired
            try Data("planted".utf8).write(to: URL(fileURLWithPath: retired + "/planted.txt"))
            try FileManager.default.createSymbolicLink(atPath: retired + "/docs/secret", withDestinationPath: "/etc")
            harness.serve("1.2")
            let report = try await harness.sync()
            #expect(report.outcome == .replayed)
            try harness.expectTree(is: "1.2")
            #expect(!FileManager.default.fileExists(atPath: harness.content + "/planted.txt"))
            #expect(FileSystem.status(of: harness.content + "/docs/secret") == nil)
            // The twin's top folder changed since it was recorded: the tree was built whole from
            // the content folder (its folders as recorded, so checked from the index), nothing
            // needed repairing, and the previous version is the twin now.
            #expect(report.repairedFiles == 0)
            #expect(report.checkedIncrementally)
            #expect(try await Self.twin(harness)?.baseVersion == "1.2")
            harness.serve("1.3")
            try await harness.sync()
            try harness.expectTree(is: "1.3")
        }
    }

    @Test("a dirty-set row that is not a safe path: the twin is not trusted, the tree is built whole")
    func hostileDirtyRow() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await Self.syncThrough(harness, "1.1")
            let database = try DatabaseQueue(path: harness.state)
            try await database.write { db in
                try db.execute(sql: "INSERT INTO twinChange (path) VALUES ('../../victim')")
            }
            try database.close()
            #expect(try await Self.twin(harness) == nil)
            harness.serve("1.2")
            let report = try await harness.sync()
            #expect(report.outcome == .replayed)
            #expect(report.repairedFiles == 0)
            try harness.expectTree(is: "1.2")
            // Built whole from the content folder (not caught up; the content's folders were as
            // recorded, so checked from the index), and a new twin recorded. (The folder's inode
            // cannot tell: a new next/ may well get the old twin's number.)
            #expect(report.checkedIncrementally)
            #expect(try await Self.twin(harness)?.baseVersion == "1.2")
        }
    }

    @Test("a replay without a twin is checked from the index and writes only the changed index rows")
    func aReplayWithoutATwinWritesTheChangesToTheIndex() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            try harness.removeTwinFolder()
            // Every row the replay writes into the index, counted by the database itself.
            let database = try DatabaseQueue(path: harness.state)
            try await database.write { db in
                try db.execute(
                    sql: """
                        CREATE TABLE indexWrite (n INTEGER);
                        CREATE TRIGGER countIndexWrites AFTER INSERT ON treeEntry BEGIN INSERT INTO indexWrite VALUES (1); END;
                        """)
            }
            harness.serve("1.1")
            let report = try await harness.sync()
            #expect(report.outcome == .replayed && report.repairedFiles == 0)
            #expect(report.checkedIncrementally, "no twin, but linked from folders as recorded")
            try harness.expectTree(is: "1.1")
            let written = try await database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM indexWrite") }
            try database.close()
            let rows = try await IndexPlanningTests.indexRows(harness.state)
            #expect(
                (written ?? 0) > 0 && (written ?? 0) < rows.count / 2, "\(written ?? 0) of \(rows.count) rows written")
            // And the index is the one a restore of 1.1 writes from its whole tree.
            try await withSyncHarness(serving: "1.1") { fresh in
                try await fresh.sync()
                #expect(try await IndexPlanningTests.indexRows(fresh.state) == rows)
            }
            // The next replay plans from it and is checked from it.
            harness.serve("1.2")
            let next = try await harness.sync()
            #expect(next.plannedFromIndex && next.checkedIncrementally)
            try harness.expectTree(is: "1.2")
        }
    }

    @Test(
        "an entry of the content replaced while a replay without a twin links from it: the staged tree is read whole",
        arguments: ["planted", "symlink"])
    func contentChangedWhileLinking(change: String) async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            try harness.removeTwinFolder()
            harness.serve("1.1")
            harness.server.resetLog()
            let (old, new) = (ExampleStorageFixture.manifest("1.0").files, ExampleStorageFixture.manifest("1.1").files)
            let kept = try #require(new.keys.sorted().first { old[$0] == new[$0] }, "1.1 keeps a file of 1.0")
            let target = harness.content + "/" + kept
            // The downloads wait (3 s: time for this test to make its change on a loaded
            // machine); the links are made meanwhile, and the content changes after the plan
            // checked its folders.
            harness.server.injectFault(.delay(seconds: 3)) { $0.hasPrefix("/RXCacheContent/") }
            async let report = harness.sync()
            for _ in 0..<1_000 where harness.server.peakConcurrentRequests == 0 || harness.server.requests().count < 3 {
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(harness.server.peakConcurrentRequests > 0, "no download started")
            if change == "planted" {
                try Data("planted".utf8).write(to: URL(fileURLWithPath: harness.content + "/planted.txt"))
            } else {
                try FileManager.default.removeItem(atPath: target)
                try FileManager.default.createSymbolicLink(atPath: target, withDestinationPath: "/etc/hostname")
            }
            let done = try await report
            #expect(done.outcome == .replayed)
            #expect(!done.checkedIncrementally, "a folder changed while linking: the whole tree was read")
            // Whichever the link took (the file, or the symlink itself, never followed), the
            // whole check leaves the version exact.
            try harness.expectTree(is: "1.1")
            #expect(FileSystem.status(of: target).map { $0.st_mode & S_IFMT == S_IFREG } == true)
        }
    }

    @Test("a no-change poll keeps the twin by its folder alone, without reading its dirty set")
    func aNoChangePollReadsOnlyTheTwinsFolder() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await Self.syncThrough(harness, "1.1")
            let retired = harness.root + "/client/.content.content-sync/retired"
            let before = try #require(FileSystem.identity(of: retired), "the twin is kept after the replay")
            // A dirty set no replay may trust: a poll with nothing to do does not read it, so the
            // twin stays where it is (reading it made the twin a leftover to delete).
            let database = try DatabaseQueue(path: harness.state)
            try await database.write { db in
                try db.execute(sql: "INSERT INTO twinChange (path) VALUES ('../../victim')")
            }
            try database.close()
            #expect(try await harness.sync().outcome == .upToDate)
            let after = try #require(FileSystem.identity(of: retired), "the poll kept the twin")
            #expect(after == before)
            // The next replay does not trust it, and builds whole from the content folder.
            harness.serve("1.2")
            let report = try await harness.sync()
            #expect(report.repairedFiles == 0 && report.checkedIncrementally)
            try harness.expectTree(is: "1.2")
        }
    }

    @Test("a folder of a half caught-up twin swapped for a symlink to someone's files: nothing there is touched")
    func plantedSymlinkInAHalfCaughtUpTwin() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await Self.stopCatchUpPartWay(harness)
            // The twin is in next/ now, caught up part-way. Its docs/ becomes a symlink to a
            // victim folder holding files at the paths the catch-up touches.
            let next = Self.staging(harness).next
            let victim = harness.root + "/victim"
            for file in ["faq.md", "api/v1/reference/errors.md", "api/v2/errors.md"] {
                let path = victim + "/" + file
                try FileManager.default.createDirectory(
                    atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                try Data("victim".utf8).write(to: URL(fileURLWithPath: path))
            }
            try FileManager.default.removeItem(atPath: next + "/docs")
            try FileManager.default.createSymbolicLink(atPath: next + "/docs", withDestinationPath: victim)
            let report = try await harness.sync()
            #expect(report.outcome == .replayed)
            try harness.expectTree(is: "1.2")
            for file in ["faq.md", "api/v1/reference/errors.md", "api/v2/errors.md"] {
                #expect(
                    FileManager.default.contents(atPath: victim + "/" + file) == Data("victim".utf8),
                    "\(file) outside the staging area is untouched")
            }
            #expect(try FileManager.default.subpathsOfDirectory(atPath: victim).count == 7)
        }
    }

    @Test("a catch-up that fails part-way, then a newer version: the twin's dirty set still covers it")
    func abandonedCatchUp() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await Self.stopCatchUpPartWay(harness)
            try harness.expectTree(is: "1.1")
            harness.serve("1.3")
            let report = try await harness.sync()
            #expect(report.outcome == .replayed)
            #expect(report.repairedFiles == 0, "\(report.warnings)")
            try harness.expectTree(is: "1.3")
            harness.serve("1.4")
            let last = try await harness.sync()
            #expect(last.repairedFiles == 0, "\(last.warnings)")
            try harness.expectTree(is: "1.4")
        }
    }
}
