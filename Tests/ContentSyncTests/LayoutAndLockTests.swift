import Foundation
import StorageServer
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// Layouts that would let an update destroy its own state are refused before anything is
/// written, and one content folder has one updater, whatever state file each run names.
@Suite("Bad layouts are refused and one folder has one updater", .timeLimit(.minutes(3)))
struct LayoutAndLockTests {
    func configuration(_ content: String, state: String) -> SyncConfiguration {
        SyncConfiguration(
            baseURL: URL(string: "http://127.0.0.1:9/")!, contentDirectory: content, stateDatabasePath: state)
    }

    func expectRefused(
        _ configuration: SyncConfiguration, mentioning text: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(sourceLocation: sourceLocation) {
            _ = try CacheManager(configuration: configuration)
        } throws: { error in
            let error = error as! SyncError
            return error.code == .configuration && error.message.contains(text)
        }
    }

    @Test func aStateDatabaseInsideTheContentFolderIsRefusedBeforeAnythingIsWritten() async throws {
        try await withTemporaryDirectory { root in
            let content = root + "/content"
            try FileManager.default.createDirectory(atPath: content, withIntermediateDirectories: true)
            expectRefused(
                configuration(content, state: content + "/state.sqlite"), mentioning: "inside the content folder")
            expectRefused(
                configuration(content, state: content + "/deeper/state.sqlite"), mentioning: "inside the content folder"
            )
            expectRefused(configuration(content, state: content), mentioning: "inside the content folder")
            #expect(try FileManager.default.contentsOfDirectory(atPath: content).isEmpty, "nothing was created")
        }
    }

    @Test func aStateDatabaseInsideTheStagingFolderIsRefused() async throws {
        try await withTemporaryDirectory { root in
            let content = root + "/content"
            expectRefused(
                configuration(content, state: root + "/.content.content-sync/state.sqlite"),
                mentioning: "staging folder")
            #expect(!FileManager.default.fileExists(atPath: root + "/.content.content-sync"))
        }
    }

    @Test func pointingTheContentFolderAtTheStateFolderIsRefused() async throws {
        try await withTemporaryDirectory { root in
            // `--dir ~/.local/state/content-sync --force` would otherwise replace every mirror's state.
            let stateFolder = root + "/state/content-sync"
            try FileManager.default.createDirectory(atPath: stateFolder, withIntermediateDirectories: true)
            try Data("other mirror".utf8).write(to: URL(fileURLWithPath: stateFolder + "/other-1234.sqlite"))
            var configuration = configuration(
                stateFolder,
                state: SyncConfiguration.defaultStatePath(
                    for: stateFolder, environment: ["XDG_STATE_HOME": root + "/state"]))
            configuration.allowReplacingUnknownContent = true
            expectRefused(configuration, mentioning: "inside the content folder")
            #expect(FileManager.default.fileExists(atPath: stateFolder + "/other-1234.sqlite"))
        }
    }

    /// The state folder is refused as a content folder even when this run's own database is
    /// elsewhere (`--state /tmp/x.sqlite --dir ~/.local/state/content-sync --force`), and so is
    /// a folder that holds it; systemd's `STATE_DIRECTORY` counts as the state folder too.
    @Test func theStateFolderIsNoContentFolderWhateverTheStateDatabase() async throws {
        try await withTemporaryDirectory { root in
            let stateHome = root + "/state"
            let stateFolder = stateHome + "/content-sync"
            try FileManager.default.createDirectory(atPath: stateFolder, withIntermediateDirectories: true)
            for (content, environment) in [
                (stateFolder, ["XDG_STATE_HOME": stateHome]),
                (stateHome, ["XDG_STATE_HOME": stateHome]),
                (root + "/service", ["STATE_DIRECTORY": root + "/service/state"]),
            ] {
                var configuration = configuration(content, state: root + "/elsewhere.sqlite")
                configuration.allowReplacingUnknownContent = true
                let error = #expect(throws: SyncError.self) {
                    try configuration.validateLayout(environment: environment)
                }
                #expect(error?.code == .configuration)
                #expect(error?.setting == .contentDirectory)
                #expect(error?.message.contains("state databases") == true, "\(String(describing: error))")
            }
            // A content folder beside the state folder is fine.
            var fine = configuration(root + "/mirror", state: root + "/elsewhere.sqlite")
            fine.allowReplacingUnknownContent = true
            try fine.validateLayout(environment: ["XDG_STATE_HOME": stateHome])
        }
    }

    /// A symlink planted where the state database goes (the default path under
    /// $XDG_STATE_HOME, say), to a file or dangling, is refused: SQLite would follow it and
    /// create or write the database and its -wal elsewhere.
    @Test func aSymlinkAtTheStateDatabasePathIsRefusedAndNothingIsWrittenThrough() async throws {
        try await withTemporaryDirectory { root in
            let victim = root + "/victim"
            try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: true)
            try Data("precious".utf8).write(to: URL(fileURLWithPath: victim + "/precious.db"))
            let state = SyncConfiguration.defaultStatePath(
                for: root + "/content", environment: ["XDG_STATE_HOME": root + "/state"])
            try FileManager.default.createDirectory(
                atPath: (state as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            for target in [victim + "/precious.db", victim + "/none.db"] {
                unlink(state)
                #expect(symlink(target, state) == 0)
                let error = #expect(throws: SyncError.self) { try StateStore(path: state) }
                #expect(error?.code == .configuration && error?.message.contains("is a symlink") == true)
                #expect(try FileManager.default.contentsOfDirectory(atPath: victim) == ["precious.db"])
            }
            #expect(try String(contentsOfFile: victim + "/precious.db", encoding: .utf8) == "precious")
        }
    }

    @Test func symlinksDoNotHideAStateDatabaseInsideTheContentFolder() async throws {
        try await withTemporaryDirectory { root in
            try FileManager.default.createDirectory(atPath: root + "/real/content", withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(
                atPath: root + "/alias", withDestinationPath: root + "/real/content")
            expectRefused(
                configuration(root + "/real/content", state: root + "/alias/state.sqlite"),
                mentioning: "inside the content folder")
        }
    }

    /// A content folder that is a symlink when a run takes the update lock (swapped in after
    /// the configuration resolved the path, or dangling, which nothing resolves) is refused by
    /// every run that takes it (sync, verify, reset) before the lock is made: the lock's folder
    /// would go beside the link. A file where that folder goes tells: the old order refused
    /// with "in the way" instead.
    @Test func aLinkedContentFolderIsRefusedBeforeTheLockIsMade() async throws {
        try await withTemporaryDirectory { root in
            try FileManager.default.createDirectory(atPath: root + "/real", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: root + "/content", withIntermediateDirectories: true)
            try Data("mine".utf8).write(to: URL(fileURLWithPath: root + "/real/keep.txt"))
            try Data("not a folder".utf8).write(to: URL(fileURLWithPath: root + "/.content.content-sync"))
            let layout = configuration(root + "/content", state: root + "/state.sqlite")
            func expectLinkRefused(
                _ error: SyncError?, _ what: String, sourceLocation: SourceLocation = #_sourceLocation
            ) {
                #expect(
                    error?.code == .configuration
                        && error?.message.contains("is a symlink; pass the real folder's path") == true,
                    "\(what): \(String(describing: error))", sourceLocation: sourceLocation)
            }
            let manager = try CacheManager(configuration: layout)
            // Swapped for a link since the manager was made.
            #expect(rmdir(root + "/content") == 0 && symlink(root + "/real", root + "/content") == 0)
            expectLinkRefused(await #expect(throws: SyncError.self) { try await manager.checkForUpdates() }, "sync")
            expectLinkRefused(await #expect(throws: SyncError.self) { try await manager.verify() }, "verify")
            expectLinkRefused(await #expect(throws: SyncError.self) { try await manager.reset() }, "reset")
            // Dangling: the path stays as given.
            #expect(unlink(root + "/content") == 0 && symlink(root + "/none", root + "/content") == 0)
            expectLinkRefused(
                await #expect(throws: SyncError.self) {
                    try await CacheManager.reset(
                        contentDirectory: layout.contentDirectory, stateDatabasePath: layout.stateDatabasePath)
                }, "static reset")
            #expect(try String(contentsOfFile: root + "/.content.content-sync", encoding: .utf8) == "not a folder")
            #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/real") == ["keep.txt"])
            #expect(try String(contentsOfFile: root + "/real/keep.txt", encoding: .utf8) == "mine")
            #expect(!FileManager.default.fileExists(atPath: root + "/.real.content-sync"))
            #expect(!FileManager.default.fileExists(atPath: root + "/none"))
        }
    }

    @Test func theRootAndTheHomeFolderAreNeverContentFolders() async throws {
        try await withTemporaryDirectory { root in
            expectRefused(configuration("/", state: root + "/state.sqlite"), mentioning: "the root folder")
            expectRefused(configuration(NSHomeDirectory(), state: root + "/state.sqlite"), mentioning: "home folder")
            if NSHomeDirectory() != "/" {
                let parent = (NSHomeDirectory() as NSString).deletingLastPathComponent
                expectRefused(
                    configuration(parent, state: root + "/state.sqlite"),
                    mentioning: parent == "/" ? "the root folder" : "home folder")
            }
        }
    }

    /// `$HOME` is a home folder too (`~` and the shell use it): with HOME=/app in a container,
    /// or sudo keeping HOME, `--dir ~ --force` must not replace it.
    @Test func theHomeFolderOfTheEnvironmentIsNeverAContentFolder() async throws {
        try await withTemporaryDirectory { root in
            let home = root + "/fakehome"
            try FileManager.default.createDirectory(atPath: home + "/.ssh", withIntermediateDirectories: true)
            for content in [home, root] {
                let error = #expect(throws: SyncError.self) {
                    try configuration(content, state: root + "/elsewhere/state.sqlite")
                        .validateLayout(environment: ["HOME": home])
                }
                #expect(error?.message.contains("home folder") == true, "\(content)")
            }
            try configuration(home + "/mirror", state: root + "/state.sqlite").validateLayout(environment: [
                "HOME": home
            ])
        }
    }

    /// A mount point (a container's volume) cannot be swapped by rename: every update failed at
    /// its end with EBUSY. It is refused up front, naming a folder inside it.
    @Test func aMountPointIsNeverAContentFolder() async throws {
        try await withTemporaryDirectory { root in
            #expect(FileSystem.isMountPoint("/proc"))
            #expect(!FileSystem.isMountPoint(root))
            let error = #expect(throws: SyncError.self) {
                try configuration("/proc", state: root + "/state.sqlite").validateLayout(environment: [:])
            }
            #expect(
                error?.message.contains("is a mount point") == true && error?.message.contains("/proc/mirror") == true)
        }
    }

    @Test func aStateDatabaseBesideTheContentFolderIsFine() async throws {
        try await withTemporaryDirectory { root in
            _ = try CacheManager(configuration: configuration(root + "/content", state: root + "/content.sqlite"))
            #expect(FileManager.default.fileExists(atPath: root + "/content.sqlite"))
        }
    }

    @Test(arguments: [
        (["XDG_STATE_HOME": "relative/state", "HOME": "/home/u"], "/home/u/.local/state/content-sync/"),
        (["XDG_STATE_HOME": "", "HOME": "/home/u"], "/home/u/.local/state/content-sync/"),
        (["XDG_STATE_HOME": "/var/state", "HOME": "/home/u"], "/var/state/content-sync/"),
        // systemd's StateDirectory= wins (its first entry); a relative one is ignored.
        (
            ["STATE_DIRECTORY": "/var/lib/sync-agent:/var/lib/other", "XDG_STATE_HOME": "/var/state"],
            "/var/lib/sync-agent/mirror-"
        ),
        (["STATE_DIRECTORY": "lib/sync-agent", "XDG_STATE_HOME": "/var/state"], "/var/state/content-sync/"),
    ])
    func aRelativeXDGStateHomeIsIgnored(environment: [String: String], prefix: String) {
        let path = SyncConfiguration.defaultStatePath(for: "/data/mirror", environment: environment)
        #expect(path.hasPrefix(prefix), "\(path)")
        #expect(path.hasSuffix(".sqlite") && path.contains("/mirror-"))
    }

    @Test func aRelativeHomeIsIgnoredToo() {
        let path = SyncConfiguration.defaultStatePath(for: "/data/mirror", environment: ["HOME": "."])
        #expect(path.hasPrefix("/"), "\(path)")
    }

    // MARK: - One updater per folder

    /// A file planted where the staging folder goes stops every update before it starts; the
    /// failure is recorded, so that `status --check` fails too (outside audit: it said
    /// "succeeded" while every sync failed). Another update running is not recorded as one.
    @Test func whatStopsEveryUpdateFromStartingIsRecorded() async throws {
        try await withSyncHarness(serving: "1.2") { harness in
            try await harness.sync()
            let staging = StagingArea(contentDirectory: harness.content)
            try? FileManager.default.removeItem(atPath: staging.location)
            try "planted".write(toFile: staging.location, atomically: true, encoding: .utf8)
            await #expect {
                try await harness.sync()
            } throws: { error in
                (error as! SyncError).message.contains("in the way of the staging folder")
            }
            let status = try await harness.manager().status()
            #expect(status.state == .failed)
            #expect(status.lastError?.contains("in the way of the staging folder") == true, "\(status)")
            try FileManager.default.removeItem(atPath: staging.location)

            try await harness.sync()
            var holder: UpdateLock? = try UpdateLock(
                statePath: harness.root + "/client/other.sqlite", contentDirectory: harness.content, staging: staging)
            await #expect(throws: SyncError.self) { try await harness.sync() }
            withExtendedLifetime(holder) {}
            holder = nil
            #expect(try await harness.manager().status().state == .succeeded, "a busy folder is no failure")
        }
    }

    @Test func twoRunsWithDifferentStateFilesOnOneFolderAreKeptApart() async throws {
        try await withSyncHarness(serving: "1.2") { harness in
            let staging = StagingArea(contentDirectory: harness.content)
            // The first run holds the folder (as a `sync` with its own --state would).
            var holder: UpdateLock? = try UpdateLock(
                statePath: harness.root + "/client/other.sqlite",
                contentDirectory: harness.content, staging: staging)
            await #expect {
                try await harness.sync()
            } throws: { error in
                let error = error as! SyncError
                return error.code == .busy && error.message.contains("another update of \(harness.content) is running")
                    && error.message.contains(staging.location)
            }
            #expect(!FileManager.default.fileExists(atPath: harness.content), "the loser touched nothing")
            #expect(harness.server.requests().isEmpty, "and asked the storage nothing, so it cannot blame it")
            withExtendedLifetime(holder) {}
            holder = nil
            #expect(
                !FileManager.default.fileExists(atPath: staging.location),
                "released: the empty staging folder goes with the lock")
            try await harness.sync()
            try harness.expectTree(is: "1.2")
            #expect(harness.stagingEntries() == ["retired"], "the restore's twin, and nothing else")
        }
    }

    @Test func aLockOnAFolderItsHolderRemovedIsNotALock() async throws {
        try await withTemporaryDirectory { root in
            let content = root + "/content"
            let staging = StagingArea(contentDirectory: content).location
            // A run that opened the staging folder just before its holder removed it must lock
            // the new one, or two runs would each hold "the" lock.
            let first = try UpdateLock(
                statePath: root + "/a.sqlite", contentDirectory: content,
                staging: StagingArea(contentDirectory: content))
            let stale = open(staging, O_RDONLY | O_DIRECTORY)
            #expect(stale >= 0)
            withExtendedLifetime(first) {}
            _ = consume first
            #expect(flock(stale, LOCK_EX | LOCK_NB) == 0, "the old folder is free once removed")
            let second = try UpdateLock(
                statePath: root + "/b.sqlite", contentDirectory: content,
                staging: StagingArea(contentDirectory: content))
            #expect(throws: SyncError.self) {
                _ = try UpdateLock(
                    statePath: root + "/c.sqlite", contentDirectory: content,
                    staging: StagingArea(contentDirectory: content))
            }
            withExtendedLifetime(second) {}
            close(stale)
        }
    }
}
