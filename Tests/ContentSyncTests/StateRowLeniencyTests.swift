import Foundation
import GRDB
import StorageServer
import Testing

@testable import ContentSync
@testable import StorageFormat

/// protocol.md §6: a row a damaged or hostile state database holds is read as missing, never
/// trusted and never an error that stops every command. One bad date in `syncState` made
/// `sync`, `verify`, `status` and even `reset` fail for good.
@Suite("Damaged rows of the state database are read as missing")
struct StateRowLeniencyTests {
    @Test(
        arguments: [
            "UPDATE syncState SET lastCheck = 'notadate'",
            "UPDATE syncState SET consecutiveFailures = 'many', state = X'00', highestAcceptedVersion = 7",
            "UPDATE updateHistory SET startedAt = 'garbage'",
            "UPDATE updateHistory SET kind = 'weird', outcome = 5",
            """
            INSERT OR REPLACE INTO pendingPlan (id, identity, kind, fromVersion, toVersion, phase, createdAt)
            VALUES (1, 'x', 'restore', NULL, '1.1', 'weird', 'garbage')
            """,
        ])
    func aDamagedRowStopsNoCommand(sql: String) async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            let database = try DatabaseQueue(path: harness.state)
            try await database.write { db in
                // Some rows are refused by the schema's own checks: what gets in is what counts.
                try? db.execute(sql: sql)
            }
            try database.close()
            let manager = try harness.manager()
            let status = try await manager.status()
            #expect(status.version == "1.0")
            harness.serve("1.2")
            let report = try await manager.checkForUpdates()
            #expect(report.toVersion.text == "1.2")
            try harness.expectTree(is: "1.2")
            _ = try await manager.status(historyLimit: 50)
            try await manager.shutdown()
        }
    }

    /// A recorded version that is no version (a damaged row) of this folder's own state: verify
    /// says so, and a sync restores the folder over it, with a warning. It was refused as someone
    /// else's files, with advice to force it.
    @Test(arguments: ["'../../x'", "'999999999999999999999999999'", "X'00'"])
    func aDamagedRecordedVersionIsRestoredOver(value: String) async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            let database = try DatabaseQueue(path: harness.state)
            try await database.write { db in try db.execute(sql: "UPDATE syncState SET localVersion = \(value)") }
            try database.close()
            let manager = try harness.manager()
            await #expect {
                _ = try await manager.verify()
            } throws: { error in
                (error as? SyncError)?.message.contains("not one (a damaged row); run sync") == true
            }
            harness.serve("1.2")
            let report = try await manager.checkForUpdates()
            #expect(report.outcome == .restored)
            #expect(report.warnings.contains { $0.contains("a damaged row") })
            try harness.expectTree(is: "1.2")
            try await manager.shutdown()
        }
    }

    /// A damaged version in a row that names a folder with no staging area beside it (never
    /// updated here: a hostile row could name any folder) does not make the folder this agent's:
    /// the sync refuses, as for any folder no state knows, and the folder is left as it was.
    /// A neighbour may plant a staging area beside it: an empty file there, or an update's
    /// folders made by another user, do not count.
    @Test(arguments: ["none", "file", "another user's folders"])
    func aDamagedVersionNamingAFolderNeverUpdatedHereReplacesNothing(planted: String) async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            let mine = harness.root + "/mine"
            let staging = harness.root + "/.mine.content-sync"
            switch planted {
            case "file":
                try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
                try Data().write(to: URL(fileURLWithPath: staging + "/x"))
            case "another user's folders":
                guard geteuid() == 0 else { return } // only root can make another user's folders
                for folder in [staging, staging + "/retired", staging + "/partial"] {
                    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                    chown(folder, 65534, 65534)
                }
            default:
                break
            }
            try FileManager.default.createDirectory(atPath: mine, withIntermediateDirectories: true)
            try Data("mine".utf8).write(to: URL(fileURLWithPath: mine + "/notes.txt"))
            let database = try DatabaseQueue(path: harness.state)
            try await database.write { db in
                try db.execute(
                    sql: "UPDATE syncState SET contentDirectory = ?, localVersion = 'garbage'", arguments: [mine])
            }
            try database.close()
            var configuration = harness.configuration()
            configuration.contentDirectory = mine
            let manager = try CacheManager(configuration: configuration)
            await #expect {
                _ = try await manager.checkForUpdates()
            } throws: { error in
                (error as? SyncError)?.code == .configuration
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: mine) == ["notes.txt"])
            try await manager.shutdown()
        }
    }

    /// A reset killed after its first step (the version forgotten, the files still there): a
    /// second reset still owns the folder and removes it, and a sync instead restores over it.
    /// It used to empty the state first, leaving files no state knew: `reset` said "nothing
    /// removed" and `sync` refused them without `--force`.
    @Test(arguments: [true, false])
    func aResetKilledAfterItsFirstStepCanBeFinished(resetAgain: Bool) async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            try await StateStore(path: harness.state).forgetVersion()
            if resetAgain {
                #expect(
                    try await CacheManager.reset(contentDirectory: harness.content, stateDatabasePath: harness.state))
                #expect(!FileManager.default.fileExists(atPath: harness.content))
            } else {
                harness.serve("1.2")
                #expect(try await harness.sync().toVersion.text == "1.2")
                try harness.expectTree(is: "1.2")
            }
        }
    }

    /// A damaged schema (a table dropped or renamed, the migrations' record emptied) or a file
    /// that is no database is named as damaged, with the way out, when the update meets it, and
    /// a reset of the folder gets past it: it deletes the database, the folder and its staging
    /// area, and the next sync restores.
    @Test(arguments: [
        "DROP TABLE syncState", "ALTER TABLE treeEntry RENAME TO other", "DROP TABLE fileFingerprint",
        "DELETE FROM grdb_migrations", "not a database",
    ])
    func aDamagedSchemaIsNamedAndAResetStartsOver(damage: String) async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            if damage == "not a database" {
                // An SQLite file whose pages are garbage: this agent's database, damaged.
                for suffix in ["-wal", "-shm"] { unlink(harness.state + suffix) }
                try (Data("SQLite format 3\0".utf8) + Data(repeating: 0x5A, count: 8176)).write(
                    to: URL(fileURLWithPath: harness.state))
            } else {
                let database = try DatabaseQueue(path: harness.state)
                try await database.write { db in try db.execute(sql: damage) }
                try database.close()
            }
            harness.serve("1.2")
            await #expect {
                let manager = try harness.manager()
                defer { Task { try? await manager.shutdown() } }
                _ = try await manager.checkForUpdates()
            } throws: { error in
                let message = (error as? SyncError)?.message ?? ""
                return (error as? SyncError)?.code == .stateStore && message.contains("damaged")
                    && message.contains("reset the folder")
            }
            try harness.expectTree(is: "1.0")
            #expect(try await CacheManager.reset(contentDirectory: harness.content, stateDatabasePath: harness.state))
            #expect(!FileManager.default.fileExists(atPath: harness.content))
            let manager = try harness.manager()
            let report = try await manager.checkForUpdates()
            #expect(report.outcome == .restored)
            try harness.expectTree(is: "1.2")
            try await manager.shutdown()
        }
    }

    /// A manager that opened its database before the damage (a table dropped, pages
    /// overwritten) resets past it: the database is emptied in place under the manager's own
    /// connections, and the next check restores. Its reset used to fail with the damage, so
    /// only a new process could start over.
    @Test(arguments: ["DROP TABLE syncState", "DROP TABLE treeEntry", "overwrite pages"])
    func aManagerResetsPastDamageMetAfterItOpened(damage: String) async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            let manager = try harness.manager()
            if damage == "overwrite pages" {
                let database = try DatabaseQueue(path: harness.state)
                try await database.writeWithoutTransaction { db in
                    try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
                }
                try database.close()
                // Every page but the first (the header and the schema's root) turned to garbage.
                let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: harness.state))
                let size = try handle.seekToEnd()
                try handle.seek(toOffset: 4096)
                try handle.write(contentsOf: Data(repeating: 0xA5, count: Int(size) - 4096))
                try handle.close()
            } else {
                let database = try DatabaseQueue(path: harness.state)
                try await database.write { db in try db.execute(sql: damage) }
                try database.close()
            }
            harness.serve("1.2")
            await #expect(throws: SyncError.self) { try await manager.checkForUpdates() }
            try harness.expectTree(is: "1.0")
            try await manager.reset()
            #expect(!FileManager.default.fileExists(atPath: harness.content))
            let report = try await manager.checkForUpdates()
            #expect(report.outcome == .restored)
            try harness.expectTree(is: "1.2")
            #expect(try await manager.localVersion()?.description == "1.2")
            try await manager.shutdown()
            // The database reads again in a new process, too.
            let again = try harness.manager()
            #expect(try await again.localVersion()?.description == "1.2")
            try await again.shutdown()
        }
    }

    /// A file that is no SQLite database at all (notes, a photo) given as the state database is
    /// someone's other file: named as such, and never deleted as a damaged database, even by a
    /// reset of a folder that does not exist (an outside audit: `reset --state ~/notes.txt`
    /// replaced the notes with an empty database).
    @Test func aFileThatIsNoDatabaseIsNeverDeletedAsDamaged() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            let notes = harness.root + "/notes.txt"
            let text = Data(String(repeating: "my notes\n", count: 200).utf8)
            try text.write(to: URL(fileURLWithPath: notes))
            let missing = harness.root + "/never-synced"
            await #expect {
                try await CacheManager.reset(contentDirectory: missing, stateDatabasePath: notes)
            } throws: { error in
                (error as? SyncError)?.code == .stateStore
                    && (error as? SyncError)?.message.contains("not a state database") == true
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: notes)) == text)
            #expect(throws: SyncError.self) { _ = try StateStore(path: notes) }
            #expect(try Data(contentsOf: URL(fileURLWithPath: notes)) == text)
        }
    }

    /// Another program's SQLite database given as the state database is refused as such, and
    /// left as it was: it used to be migrated (this agent's tables added to it).
    /// Shapes: a plain one, another GRDB app's (its own migrations' record), one with a table
    /// of this agent's name, and one in WAL mode (no `-wal` or `-shm` is made beside it).
    @Test(arguments: [
        "CREATE TABLE album (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO album VALUES (1, 'x')",
        """
        CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY); INSERT INTO grdb_migrations VALUES ('v1');
        CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)
        """,
        "CREATE TABLE syncState (id INTEGER PRIMARY KEY, cursor TEXT)",
        "wal",
    ])
    func anotherProgramsDatabaseIsRefusedAndLeftAlone(shape: String) async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            let other = harness.root + "/photos.db"
            if shape == "wal" {
                let pool = try DatabasePool(path: other)
                try await pool.write { db in try db.execute(sql: "CREATE TABLE album (id INTEGER PRIMARY KEY)") }
                try pool.close()
            } else {
                let database = try DatabaseQueue(path: other)
                try await database.write { db in try db.execute(sql: shape) }
                try database.close()
            }
            let besides = ["-wal", "-shm"].filter { FileManager.default.fileExists(atPath: other + $0) }
            let before = try Data(contentsOf: URL(fileURLWithPath: other))
            #expect {
                _ = try StateStore(path: other)
            } throws: { error in
                (error as? SyncError)?.code == .configuration
                    && (error as? SyncError)?.message.contains("another program's SQLite database") == true
            }
            await #expect(throws: SyncError.self) {
                try await CacheManager.reset(contentDirectory: harness.root + "/never-synced", stateDatabasePath: other)
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: other)) == before)
            #expect(["-wal", "-shm"].filter { FileManager.default.fileExists(atPath: other + $0) } == besides)
        }
    }

    /// A damaged database that cannot name its folder deletes no folder without a staging area
    /// beside it (one the user made), and one that names another folder deletes nothing.
    @Test func aResetOfADamagedDatabaseDeletesOnlyItsOwnFolder() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            let mine = harness.root + "/mine"
            try FileManager.default.createDirectory(atPath: mine, withIntermediateDirectories: true)
            try Data("mine".utf8).write(to: URL(fileURLWithPath: mine + "/notes.txt"))
            let garbage = harness.root + "/garbage.sqlite"
            try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: garbage))
            await #expect(throws: SyncError.self) {
                try await CacheManager.reset(contentDirectory: mine, stateDatabasePath: garbage)
            }
            #expect(FileManager.default.fileExists(atPath: mine + "/notes.txt"))
            #expect(!FileManager.default.fileExists(atPath: harness.root + "/.mine.content-sync"), "no staging made")

            // The synced folder's database, damaged but still naming its folder: not `mine`'s.
            try await harness.sync()
            let database = try DatabaseQueue(path: harness.state)
            try await database.write { db in try db.execute(sql: "DROP TABLE treeEntry") }
            try database.close()
            await #expect(throws: SyncError.self) {
                try await CacheManager.reset(contentDirectory: mine, stateDatabasePath: harness.state)
            }
            #expect(FileManager.default.fileExists(atPath: mine + "/notes.txt"))
            try harness.expectTree(is: "1.0")
        }
    }
}
