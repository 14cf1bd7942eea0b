import Foundation
import Testing

@testable import ContentSync
@testable import SyncDaemon

/// ``FolderKeeper``: one watcher per folder whatever its state database, and no run of another
/// state database over a kept folder (an outside audit: a second `watch --force` with its own
/// state took a watched folder over between the first one's checks).
@Suite("A watched folder is kept from runs of other state databases")
struct FolderKeeperTests {
    @Test func aSecondKeeperOfOneFolderIsRefusedNamingTheProcess() throws {
        let folder = "/tmp/keeper-\(UUID().uuidString)/content"
        let first = try FolderKeeper(directory: folder)
        #expect(FolderKeeper.holder(of: folder) == .process(getpid()))
        #expect {
            try FolderKeeper(directory: folder)
        } throws: { error in
            let message = (error as? SyncError)?.message ?? ""
            return message.contains("kept by process \(getpid())") && message.contains(folder)
        }
        // Another folder is its own; the same folder spelled with a trailing dot segment is not.
        _ = try FolderKeeper(directory: folder + "-other")
        #expect(throws: SyncError.self) { try FolderKeeper(directory: folder + "/.") }
        first.release()
        #expect(FolderKeeper.holder(of: folder) == .none)
        _ = try FolderKeeper(directory: folder)
    }

    @Test func aRunGoesAheadOnlyWithTheWatchersOwnStateDatabase() throws {
        try withTemporaryFolder { scratch in
            let folder = scratch + "/content"
            let watched = scratch + "/watched.sqlite"
            let other = scratch + "/other.sqlite"
            // Nobody keeps it: any state goes.
            try FolderKeeper.refuseIfKeptByAnother(directory: folder, statePath: other)
            let keeper = try FolderKeeper(directory: folder)
            let settings = StorageSettings(
                name: "a", baseURL: try #require(URL(string: "http://h/a/")), directory: folder, statePath: watched)
            let lock = try StorageWatcher.takeWatchLock(settings)
            // The watcher's own state: the update lock keeps the two runs apart.
            try FolderKeeper.refuseIfKeptByAnother(directory: folder, statePath: watched)
            #expect {
                try FolderKeeper.refuseIfKeptByAnother(directory: folder, statePath: other)
            } throws: { error in
                let error = error as? SyncError
                return error?.code == .configuration && error?.message.contains("another state database") == true
            }
            #expect(!FileManager.default.fileExists(atPath: other + ".lock"), "the check creates nothing")
            lock.unlock(slot: StorageWatcher.watchLockSlot)
            keeper.release()
            try FolderKeeper.refuseIfKeptByAnother(directory: folder, statePath: other)
        }
    }
}

/// Runs `body` with a new folder under /tmp, removed afterwards.
private func withTemporaryFolder(_ body: (String) throws -> Void) throws {
    let folder = "/tmp/keeper-tests-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: folder) }
    try body(folder)
}
