import ContentSync
import Foundation
import StorageServer
import Testing

/// The README's library section (ReadmeExample.swift and the pause/resume lines below), run
/// against a loopback host serving ExampleStorage.
@Suite("The README's library example compiles and does what it says", .timeLimit(.minutes(3)))
struct ReadmeExampleTests {
    @Test func theLibraryExampleRestoresThenReplaysAndReadsARecipe() async throws {
        try await withExampleHost(serving: "1.0") { host in
            let folder = host.appSupport + "/content"
            let stateFile = host.appSupport + "/state.sqlite"
            let recipe = try await updateRecipes(from: host.storageURL, into: folder, stateFile: stateFile)
            #expect(recipe.name == "Bread" && recipe.serves == 8)
            ExampleStorage.expectTree(folder, is: "1.0")

            host.publish("1.1")
            _ = try await updateRecipes(from: host.storageURL, into: folder, stateFile: stateFile)
            ExampleStorage.expectTree(folder, is: "1.1")
            let status = try await SyncStatus.read(statePath: stateFile, contentDirectory: folder)
            #expect(status.version == "1.1")
            #expect(status.history.map(\.kind) == [.replay, .restore])
        }
    }

    @Test func pausingWhileAnUpdateDownloadsKeepsFinishedFilesForTheResume() async throws {
        try await withExampleHost(serving: "1.2") { host in
            let manager = try CacheManager(
                configuration: SyncConfiguration(
                    baseURL: host.storageURL, contentDirectory: host.appSupport + "/content",
                    stateDatabasePath: host.appSupport + "/state.sqlite"))
            try await manager.checkForUpdates()
            publishVersionThatStalls(host)
            let log = await EventLog.recording(manager)
            let update = Task { try await manager.checkForUpdates() }
            try await log.waitForDownloadedFiles(3)

            // snippet:begin readme-pause-resume
            await manager.suspend() // stops the update and returns once it has stopped
            // The task awaiting checkForUpdates() now throws a SyncError with code .cancelled; the
            // folder still holds the old version, and the files downloaded so far are kept.
            let report = try await manager.resume() // runs the update again, skipping finished downloads
            print(report.filesAlreadyDownloaded, "files were already downloaded")
            // snippet:end readme-pause-resume

            let error = await #expect(throws: SyncError.self) { try await update.value }
            #expect(error?.code == .cancelled)
            #expect(report.outcome == .replayed && report.toVersion.text == "1.4")
            #expect(report.filesAlreadyDownloaded == 3 && report.filesDownloaded == 3)
            ExampleStorage.expectTree(host.appSupport + "/content", is: "1.4")
            // Each finished file was fetched once; only the stalled ones were asked for again.
            let downloads = host.contentDownloads()
            #expect(
                downloads.filter { !$0.hasPrefix("styles/") }.sorted() == [
                    "assets/images/banner.png", "data/blob.bin", "docs/intro.md",
                ])
            #expect(downloads.filter { $0.hasPrefix("styles/") }.count == 6)
            try await log.waitFor("the finished event") { if case .finished = $0 { true } else { false } }
            #expect(
                log.outcomes == [
                    "stateChanged(succeeded)", "stateChanged(working)", "stateChanged(suspended)", "suspended",
                    "stateChanged(working)", "stateChanged(succeeded)", "finished(1.4)",
                ])
            await manager.shutdown()
        }
    }
}
