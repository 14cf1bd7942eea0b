import Foundation
import GRDB
import StorageServer
import Testing

@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// Between full checks a replay plans from the tree index recorded at the last switch instead
/// of listing the content folder, as long as every folder's ctime is the one read right after
/// the switch: on the real filesystem, with changes by hand, hostile rows and a due full check.
@Suite("A replay plans from the tree index while no folder changed", .timeLimit(.minutes(3)))
struct IndexPlanningTests {
    /// A file that every version from 1.1 to 1.4 has with the same bytes.
    static func steadyFile() throws -> String {
        let versions = ["1.1", "1.2", "1.3", "1.4"].map(ExampleStorageFixture.manifest)
        let steady = versions[0].files.filter { path, hash in versions.allSatisfy { $0.files[path] == hash } }
        return try #require(steady.keys.sorted().first { $0.contains("/") } ?? steady.keys.sorted().first)
    }

    static func fullCheckTime(_ harness: SyncHarness) async throws -> Date? {
        try await StateStore(path: harness.state).lastFullCheck()
    }

    @Test("after a restore and after each replay, the next replay plans from the index and is exact")
    func plansFromTheIndex() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            let restoredAt = try #require(try await Self.fullCheckTime(harness), "a restore is a full check")
            #expect(try await !StateStore(path: harness.state).liveFolders().isEmpty)
            for version in ["1.1", "1.2", "1.3", "1.4"] {
                harness.serve(version)
                let report = try await harness.sync()
                #expect(report.outcome == .replayed, "\(version)")
                #expect(report.plannedFromIndex, "\(version): no folder changed, so the folder is not listed")
                #expect(report.repairedFiles == 0, "\(version)")
                try harness.expectTree(is: version)
            }
            #expect(try await Self.fullCheckTime(harness) == restoredAt, "no replay made a full check")
        }
    }

    /// The local version as the database file alone records it, without its write-ahead log.
    static func versionInDatabaseFile(_ harness: SyncHarness) throws -> String? {
        let copy = harness.root + "/main-file-only.sqlite"
        try? FileManager.default.removeItem(atPath: copy)
        try FileManager.default.copyItem(atPath: harness.state, toPath: copy)
        let database = try DatabaseQueue(path: copy)
        defer { try? database.close() }
        return try database.read { db in try String.fetchOne(db, sql: "SELECT localVersion FROM syncState") }
    }

    @Test("an update leaves its writes in the database file, not in the log for the next process to copy")
    func updatesCheckpointTheirWrites() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            // One manager throughout: its database stays open, as in a process that goes on (or
            // exits without closing it), so closing cannot be what copies the log.
            let manager = try harness.manager()
            try await manager.checkForUpdates()
            #expect(try Self.versionInDatabaseFile(harness) == "1.0", "after the restore")
            for version in ["1.1", "1.2"] {
                harness.serve(version)
                try await manager.checkForUpdates()
                #expect(try Self.versionInDatabaseFile(harness) == version, "after the replay to \(version)")
                // And the log was emptied: the next process to open the database reads what is
                // left of it whole (what the manager wrote after the update: a page or two).
                let log = try FileManager.default.attributesOfItem(atPath: harness.state + "-wal")[.size] as? Int
                #expect((log ?? 0) <= 4 * 4_128, "the log holds \(log ?? 0) bytes after the replay to \(version)")
            }
            withExtendedLifetime(manager) {}
        }
    }

    @Test("the index's folders are read through their own index, not by scanning every entry")
    func foldersComeFromTheirIndex() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            let folders = try #require(try await StateStore(path: harness.state).indexedFolders())
            #expect(!folders.isEmpty)
            let database = try DatabaseQueue(path: harness.state)
            defer { try? database.close() }
            let plan = try await database.read { db in
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + StateStore.indexedFoldersQuery)
                    .map { $0["detail"] as String }.joined(separator: "; ")
            }
            #expect(plan.contains("INDEX treeEntryFolders"), "plan: \(plan)")
        }
    }

    @Test(
        "a file added, removed or renamed by hand moves its folder's ctime: the replay lists the folder and the version is exact",
        arguments: ["added", "removed", "renamed", "folder added"])
    func structuralChangeBringsTheListing(change: String) async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await TwinTreeTests.syncThrough(harness, "1.1")
            let steady = harness.content + "/" + (try Self.steadyFile())
            let folder = (steady as NSString).deletingLastPathComponent
            switch change {
            case "added": try Data("stray".utf8).write(to: URL(fileURLWithPath: folder + "/stray.bin"))
            case "removed": try FileManager.default.removeItem(atPath: steady)
            case "renamed": try FileManager.default.moveItem(atPath: steady, toPath: folder + "/renamed.bin")
            default:
                try FileManager.default.createDirectory(atPath: folder + "/stray", withIntermediateDirectories: false)
            }
            harness.serve("1.2")
            let report = try await harness.sync()
            #expect(report.outcome == .replayed)
            #expect(!report.plannedFromIndex, "a folder changed: the content folder is listed")
            try harness.expectTree(is: "1.2")
            // The listing is recorded again: the next replay trusts the index once more.
            harness.serve("1.3")
            let next = try await harness.sync()
            #expect(next.plannedFromIndex)
            try harness.expectTree(is: "1.3")
        }
    }

    /// A storage that publishes nothing new still gets its full check when one is due: the
    /// check piggybacked on replays only, so a damaged mirror of a quiet storage stayed damaged
    /// ("up to date") for good. Between checks a no-change update walks nothing.
    @Test func aNoChangeUpdateRunsTheDueFullCheckAndRepairs() async throws {
        try await withSyncHarness(serving: "1.2") { harness in
            try await harness.sync()
            let checked = try #require(try await Self.fullCheckTime(harness))
            let steadyPath = try Self.steadyFile()
            try FileManager.default.removeItem(atPath: harness.content + "/" + steadyPath)
            try Data("stray".utf8).write(to: URL(fileURLWithPath: harness.content + "/stray.bin"))

            let quiet = try await harness.sync()
            #expect(quiet.outcome == .upToDate && quiet.repairedFiles == 0)
            #expect(try await Self.fullCheckTime(harness) == checked, "not due: nothing is listed")
            #expect(!FileManager.default.fileExists(atPath: harness.content + "/" + steadyPath))

            let full = try await harness.sync(fullCheckInterval: .zero)
            #expect(full.outcome == .upToDate)
            #expect(full.repairedFiles == 2, "\(full.warnings)")
            #expect(full.warnings.contains { $0.contains("full check found 2 difference(s)") }, "\(full.warnings)")
            try harness.expectTree(is: "1.2")
            #expect(try #require(try await Self.fullCheckTime(harness)) > checked)

            let clean = try await harness.sync(fullCheckInterval: .zero)
            #expect(clean.outcome == .upToDate && clean.repairedFiles == 0 && clean.warnings.isEmpty)
        }
    }

    @Test("a file edited in place is not seen by a replay between full checks, and is repaired by the next full check")
    func inPlaceEditWaitsForTheFullCheck() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await TwinTreeTests.syncThrough(harness, "1.1")
            let steadyPath = try Self.steadyFile()
            let steady = harness.content + "/" + steadyPath
            let checkedBefore = try #require(try await Self.fullCheckTime(harness))
            // Same inode, new bytes: the folder's ctime does not move.
            let handle = try #require(FileHandle(forWritingAtPath: steady))
            try handle.truncate(atOffset: 0)
            try handle.write(contentsOf: Data("edited in place".utf8))
            try handle.close()
            harness.serve("1.2")
            let quick = try await harness.sync()
            #expect(quick.plannedFromIndex)
            #expect(try harness.tree().files[steadyPath] != ExampleStorageFixture.manifest("1.2").files[steadyPath])
            #expect(try await Self.fullCheckTime(harness) == checkedBefore)
            // A due full check (here: every update) lists the folder, finds the file and repairs it.
            harness.serve("1.3")
            let full = try await harness.sync(fullCheckInterval: .zero)
            #expect(!full.plannedFromIndex)
            #expect(full.repairedFiles == 1, "\(full.warnings)")
            try harness.expectTree(is: "1.3")
            #expect(try #require(try await Self.fullCheckTime(harness)) > checkedBefore)
        }
    }

    @Test(
        "hostile or damaged rows of the live folders or the tree index: the folder is listed, the version is exact",
        arguments: [
            "INSERT INTO liveFolder (path, ctime) VALUES ('../victim', 1)",
            "UPDATE liveFolder SET ctime = 'soon' WHERE path = ''",
            "DELETE FROM liveFolder WHERE path <> ''",
            "INSERT INTO treeEntry (parent, name, isFolder, size, hash) VALUES ('', 'a/../../victim', 0, 1, '')",
            "INSERT INTO treeEntry (parent, name, isFolder, size, hash) VALUES ('docs/', '../../victim', 1, 0, '')",
            "INSERT INTO treeEntry (parent, name, isFolder, size, hash) VALUES ('', '..', 1, 0, '')",
            "UPDATE treeEntry SET isFolder = 'yes' WHERE name <> ''",
            "UPDATE treeEntry SET isFolder = 1 WHERE parent = '' AND name = 'README.txt'",
            "UPDATE fullCheck SET checkedAt = 1e300",
            // Ages past any `Duration`: a full check, not a trap.
            "UPDATE fullCheck SET checkedAt = -1e300",
            "UPDATE fullCheck SET checkedAt = -9e999",
        ])
    func hostileRows(sql: String) async throws {
        try await Self.replay(after: sql, plansFromIndex: false)
    }

    @Test(
        "values of the wrong type anywhere the engine reads (GRDB's subscripts would stop the process): the version is exact",
        arguments: [
            "UPDATE twin SET device = 'x', inode = X'00'",
            "UPDATE treeIndex SET version = 7, shape = X'01'",
            // Counts no tree has, which sums of them would overflow.
            "UPDATE treeIndex SET shape = '9223372036854775807:9223372036854775807:0'",
            "UPDATE treeIndex SET shape = '4611686018427387904:4611686018427387904:ff'",
            "UPDATE treeEntry SET size = 'big', hash = 12",
            "UPDATE fileFingerprint SET size = 'big', sha256 = 1",
            // Entries the content folder does not have: listed (or, without a parent, never
            // listed), then caught by the tree check before the switch.
            "INSERT INTO treeEntry (parent, name, isFolder, size, hash) VALUES ('', 'stray.bin', 0, 1, '')",
            "INSERT INTO treeEntry (parent, name, isFolder, size, hash) VALUES ('', 'stray.bin', 0, 7, '\(String(repeating: "ab", count: 32))')",
            "INSERT INTO treeEntry (parent, name, isFolder, size, hash) VALUES ('nowhere/', 'stray.bin', 0, 1, '')",
            "DELETE FROM treeEntry WHERE parent = '' AND name = 'README.txt'",
            "UPDATE treeEntry SET name = X'41' WHERE parent = '' AND name = 'README.txt'",
        ])
    func wrongTypes(sql: String) async throws {
        try await Self.replay(after: sql, plansFromIndex: nil)
    }

    /// A file of the mirror given a modification time past 2262 (`touch -d 2400-01-01`: its
    /// nanoseconds do not fit an `Int64`) and another past what ext4 keeps: a replay that checks
    /// every file (a full check, as `fullCheckInterval` zero makes every replay) reads their
    /// identities (new ones: not the recorded files) without a trap, and the version is exact.
    @Test(arguments: [true, false])
    func filesWithTimesFarInTheFutureAreReadAsChangedFiles(fullCheck: Bool) async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await TwinTreeTests.syncThrough(harness, "1.1")
            let files = try FileManager.default.subpathsOfDirectory(atPath: harness.content).filter {
                var isFolder: ObjCBool = false
                return FileManager.default.fileExists(atPath: harness.content + "/" + $0, isDirectory: &isFolder)
                    && !isFolder.boolValue
            }.sorted()
            try #require(files.count >= 2)
            for (file, seconds) in zip(files, [13_569_465_600, 9_000_000_000_000_000_000]) {
                var times = [timespec(tv_sec: seconds, tv_nsec: 7), timespec(tv_sec: seconds, tv_nsec: 7)]
                #expect(utimensat(AT_FDCWD, harness.content + "/" + file, &times, 0) == 0)
            }
            harness.serve("1.2")
            let report = try await harness.sync(fullCheckInterval: fullCheck ? .zero : nil)
            #expect(report.outcome == .replayed)
            try harness.expectTree(is: "1.2")
        }
    }

    @Test("a trust pin of the wrong types: a clear refusal naming the pinned keys, no crash, 1.1 kept")
    func wrongTypeTrustPin() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await TwinTreeTests.syncThrough(harness, "1.1")
            let database = try DatabaseQueue(path: harness.state)
            try await database.write { db in
                try db.execute(sql: "INSERT INTO trustPin (keyID, publicKey, pinnedAt) VALUES (1, X'02', 'x')")
            }
            try database.close()
            harness.serve("1.2")
            let error = await #expect(throws: SyncError.self) { try await harness.sync() }
            #expect(error?.message.contains("trusted signing key(s) 1") == true, "\(String(describing: error))")
            try harness.expectTree(is: "1.1")
        }
    }

    /// Syncs to 1.1, runs `sql` on the state database, then replays to 1.2 and checks the tree
    /// (and, unless nil, whether the replay planned from the index).
    static func replay(after sql: String, plansFromIndex: Bool?) async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await TwinTreeTests.syncThrough(harness, "1.1")
            let database = try DatabaseQueue(path: harness.state)
            try await database.write { db in try db.execute(sql: sql) }
            try database.close()
            harness.serve("1.2")
            let report = try await harness.sync()
            #expect(report.outcome == .replayed)
            if let plansFromIndex { #expect(report.plannedFromIndex == plansFromIndex, "\(sql)") }
            try harness.expectTree(is: "1.2")
        }
    }

    /// The tree index as a state database before "v15" held it: rows keyed by path, with their
    /// folder's key beside (NULL for the root), and one hostile row of each kind that layout allowed.
    static let treeIndexBeforeV15 = """
        CREATE TABLE oldEntry (path TEXT PRIMARY KEY, isFolder INTEGER NOT NULL, size INTEGER NOT NULL,
            hash TEXT NOT NULL, parent TEXT) WITHOUT ROWID;
        INSERT INTO oldEntry SELECT CASE WHEN name = '' THEN '' ELSE parent || name END, isFolder, size, hash,
            CASE WHEN name = '' THEN NULL ELSE parent END FROM treeEntry;
        DROP TABLE treeEntry;
        ALTER TABLE oldEntry RENAME TO treeEntry;
        CREATE INDEX treeEntryByParent ON treeEntry(parent);
        CREATE INDEX treeEntryFolders ON treeEntry(path) WHERE isFolder = 1;
        DELETE FROM grdb_migrations WHERE identifier LIKE 'v15%';
        """

    @Test(
        "a tree index written before it was keyed by folder and name is carried over: the next replay plans from it",
        arguments: [
            "", "INSERT INTO treeEntry (path, isFolder, size, hash, parent) VALUES ('orphan.bin', 0, 1, '', NULL)",
        ])
    func theOldIndexLayoutIsMigrated(hostile: String) async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await TwinTreeTests.syncThrough(harness, "1.1")
            let before = try await Self.indexRows(harness.state)
            let database = try DatabaseQueue(path: harness.state)
            try await database.write { db in
                try db.execute(sql: Self.treeIndexBeforeV15)
                try db.execute(sql: hostile.isEmpty ? "SELECT 1" : hostile)
            }
            try database.close()
            // Opening the store migrates: the same rows, keyed by folder and name.
            #expect(try await Self.indexRows(harness.state) == before)
            harness.serve("1.2")
            let report = try await harness.sync()
            #expect(report.plannedFromIndex, "the carried-over index and folder times are trusted")
            #expect(report.checkedIncrementally)
            try harness.expectTree(is: "1.2")
        }
    }

    @Test("planning keeps the folders it lists, whole, for the tree check; a folder with a damaged entry is not kept")
    func planningKeepsWholeListings() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await TwinTreeTests.syncThrough(harness, "1.1")
            let store = try StateStore(path: harness.state)
            let folders = try #require(try await store.indexedFolders()).sorted()
            let (clean, damaged) = (SafeRelativePath.root, try #require(folders.first))
            let database = try DatabaseQueue(path: harness.state)
            try await database.write { db in
                try db.execute(
                    sql: "UPDATE treeEntry SET hash = 'not hex' WHERE parent = ? AND isFolder = 0",
                    arguments: [damaged.string + "/"])
            }
            try database.close()
            let listings = IndexListings()
            let kinds = try #require(store.indexedEntries(of: clean, keeping: listings))
            #expect(try #require(store.indexedEntries(of: damaged, keeping: listings)).count > 0)
            // The clean folder's whole entries, as the check would read them; the damaged one's not kept.
            let kept = try #require(listings.entries(of: clean))
            #expect(kept.map(\.name) == kinds.map(\.name))
            #expect(
                kept.allSatisfy { if case .folder = $0.entry { true } else { false } } == kinds.allSatisfy(\.isFolder))
            #expect(listings.entries(of: damaged) == nil)
        }
    }

    /// Every tree-index row, as `parent|name|isFolder|size|hash`, after opening the store.
    static func indexRows(_ state: String) async throws -> [String] {
        let store = try StateStore(path: state)
        return try await store.pool.read { db in
            try String.fetchAll(
                db,
                sql:
                    "SELECT parent || '|' || name || '|' || isFolder || '|' || size || '|' || hash FROM treeEntry ORDER BY 1"
            )
        }
    }

    @Test("a zero interval makes every replay a full check, as before")
    func zeroIntervalListsEveryTime() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync(fullCheckInterval: .zero)
            for version in ["1.1", "1.2"] {
                harness.serve(version)
                let report = try await harness.sync(fullCheckInterval: .zero)
                #expect(!report.plannedFromIndex, "\(version)")
                try harness.expectTree(is: version)
            }
        }
    }
}

/// The recorded folder times are written as a difference: the rows that changed, no others.
@Suite("Folder times are written where they differ", .timeLimit(.minutes(3)))
struct FolderTimesWriteTests {
    @Test("the table ends as exactly the new times; unchanged rows are not written; damaged rows make it written whole")
    func onlyDifferingRowsAreWritten() async throws {
        try await withTemporaryDirectory { folder in
            let database = try DatabaseQueue(path: folder + "/t.sqlite")
            try database.write { db in
                try db.execute(
                    sql: "CREATE TABLE liveFolder (path TEXT PRIMARY KEY, ctime INTEGER NOT NULL) WITHOUT ROWID")
            }
            func table() throws -> [String: Int64] {
                try database.read { db in
                    var rows: [String: Int64] = [:]
                    for row in try Row.fetchAll(db, sql: "SELECT path, ctime FROM liveFolder") { rows[row[0]] = row[1] }
                    return rows
                }
            }
            func write(_ times: [SafeRelativePath: Int64]?) throws -> Int {
                try database.write { db in
                    let before = db.totalChangesCount
                    try StateStore.replaceFolderTimes(in: "liveFolder", with: times, db)
                    return db.totalChangesCount - before
                }
            }
            var times: [SafeRelativePath: Int64] = [.root: 1]
            for index in 0..<500 { times[p("f\(index)")] = Int64(index) }
            #expect(try write(times) == 501)
            #expect(try table() == Dictionary(uniqueKeysWithValues: times.map { ($0.key.string, $0.value) }))
            // Two times moved, one folder gone, one new: four rows written.
            times[.root] = 2
            times[p("f7")] = 70
            times[p("f8")] = nil
            times[p("g")] = 5
            #expect(try write(times) == 4)
            #expect(try table() == Dictionary(uniqueKeysWithValues: times.map { ($0.key.string, $0.value) }))
            // A hostile row with a path no version has is removed with the rest of the difference.
            try database.write { db in try db.execute(sql: "INSERT INTO liveFolder VALUES ('../victim', 9)") }
            #expect(try write(times) == 1)
            #expect(try table()["../victim"] == nil)
            // A row that does not read as a path and a time: written whole.
            try database.write { db in try db.execute(sql: "INSERT INTO liveFolder VALUES (X'00ff', 'soon')") }
            // Every row deleted (502) and inserted again (501).
            #expect(try write(times) == 502 + 501)
            #expect(try table() == Dictionary(uniqueKeysWithValues: times.map { ($0.key.string, $0.value) }))
            #expect(try write(nil) == 501)
            #expect(try table().isEmpty)
        }
    }
}
