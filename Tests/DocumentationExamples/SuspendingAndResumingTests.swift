import ContentSync
import Foundation
import StorageServer
import Testing

// snippet:begin network-monitor
/// The app's view of the network, kept up to date by its network monitor.
actor Network {
    private(set) var isMetered = false

    func update(isMetered: Bool) { self.isMetered = isMetered }
}

/// The app's dialog, "Continue the update over a metered connection?" (here the user says yes).
func userAgreesToUseMeteredData() async -> Bool { true }
// snippet:end network-monitor

// snippet:begin play-pause-button
/// The app's play/pause button.
func playPauseTapped(_ manager: CacheManager) async -> CacheManagerState {
    // Pauses a running update, resumes a suspended one, and starts a check from any other state.
    // It returns the new state at once, without waiting; events() tells how the update ends.
    await manager.togglePlayPause()
}
// snippet:end play-pause-button

/// The "Suspending and resuming" article (Sources/ContentSync/ContentSync.docc/SuspendingAndResuming.md).
@Suite("The guide's suspend, resume and connection policy examples work", .timeLimit(.minutes(3)))
struct SuspendingAndResumingExamples {
    /// A manager of a fresh folder in `host`'s scratch space, synced to what the host serves.
    func syncedManager(_ host: ExampleHost, policy: ConnectionPolicy = .always) async throws -> CacheManager {
        var configuration = SyncConfiguration(
            baseURL: host.storageURL, contentDirectory: host.appSupport + "/content",
            stateDatabasePath: host.appSupport + "/state.sqlite")
        configuration.connectionPolicy = policy
        let manager = try CacheManager(configuration: configuration)
        try await manager.checkForUpdates()
        return manager
    }

    @Test func suspendStopsTheUpdateAndItsCallerIsToldWhileResumeFinishesIt() async throws {
        try await withExampleHost(serving: "1.2") { host in
            let manager = try await syncedManager(host)
            publishVersionThatStalls(host)
            let log = await EventLog.recording(manager)
            // snippet:begin start-update
            let update = Task { try await manager.checkForUpdates() }
            // snippet:end start-update
            try await log.waitForDownloadedFiles(3)
            await manager.suspend()
            let stopped = await manager.state
            ExampleStorage.expectTree(host.appSupport + "/content", is: "1.2")
            // snippet:begin suspended-caller
            do {
                let report = try await update.value
                print("finished before the pause took effect: now at", report.toVersion)
            } catch let error as SyncError where error.code == .cancelled {
                print("paused; the folder keeps its version until resume() finishes the update")
            }
            // snippet:end suspended-caller
            let report = try await manager.resume()
            #expect(stopped == .suspended)
            #expect(report.filesAlreadyDownloaded == 3 && report.toVersion.text == "1.4")
            ExampleStorage.expectTree(host.appSupport + "/content", is: "1.4")
            #expect(try await manager.history(limit: 2).map(\.outcome) == [.succeeded, .cancelled])
            await manager.shutdown()
        }
    }

    @Test func thePlayPauseButtonStartsPausesAndResumes() async throws {
        try await withExampleHost(serving: "1.2") { host in
            let manager = try await syncedManager(host)
            publishVersionThatStalls(host)
            let log = await EventLog.recording(manager)
            #expect(await playPauseTapped(manager) == .working) // succeeded: starts a check
            try await log.waitForDownloadedFiles(3)
            #expect(await playPauseTapped(manager) == .suspended) // working: pauses
            try await log.waitFor("the suspended event") { if case .suspended = $0 { true } else { false } }
            #expect(await playPauseTapped(manager) == .working) // suspended: resumes
            try await log.waitFor("the finished event") { if case .finished = $0 { true } else { false } }
            #expect(
                log.outcomes == [
                    "stateChanged(succeeded)", "stateChanged(working)", "stateChanged(suspended)", "suspended",
                    "stateChanged(working)", "stateChanged(succeeded)", "finished(1.4)",
                ])
            ExampleStorage.expectTree(host.appSupport + "/content", is: "1.4")
            await manager.shutdown()
        }
    }

    @Test func aMeteredLinkSuspendsTheUpdateAndTheUserCanOverrideThePolicy() async throws {
        try await withExampleHost(serving: "1.2") { host in
            let folder = host.appSupport + "/content"
            let stateFile = host.appSupport + "/state.sqlite"
            let storage = host.storageURL
            // snippet:begin connection-policy
            let network = Network()
            var configuration = SyncConfiguration(
                baseURL: storage, contentDirectory: folder, stateDatabasePath: stateFile)
            configuration.connectionPolicy = ConnectionPolicy { await !network.isMetered } // asked often: answer fast
            let manager = try CacheManager(configuration: configuration)
            // snippet:end connection-policy
            try await manager.checkForUpdates()
            publishVersionThatStalls(host)
            let log = await EventLog.recording(manager)
            // snippet:begin ask-the-user
            let events = await manager.events()
            let observer = Task {
                for await event in events {
                    guard case .connectionNotAllowed = event else { continue }
                    // The manager is suspended now. resume() waits for the whole update, so this
                    // observer ends here (a long-lived one would resume from another task).
                    if await userAgreesToUseMeteredData() {
                        let report = try await manager.resume(overridingPolicy: true) // this update only
                        print("now at", report.toVersion)
                    }
                    return
                }
            }
            // snippet:end ask-the-user
            let update = Task { try await manager.checkForUpdates() }
            try await log.waitForDownloadedFiles(3)
            await network.update(isMetered: true)
            let error = await #expect(throws: SyncError.self) { try await update.value }
            #expect(error?.code == .connectionNotAllowed)
            try await observer.value
            ExampleStorage.expectTree(folder, is: "1.4")
            #expect(log.outcomes.contains("connectionNotAllowed"))
            let history = try await manager.history(limit: 2)
            #expect(history.first?.outcome == .succeeded && history.first?.toVersion == "1.4")
            #expect(
                history.first?.filesDownloaded == 3,
                "the three files finished before the link turned metered are not fetched again")
            // The stopped attempt is in the history as cancelled. (Its errorCode is the engine's view,
            // `cancelled`, when the policy watcher stopped it mid-update; the caller and the
            // observer were told connectionNotAllowed.)
            #expect(history.last?.outcome == .cancelled)
            await manager.shutdown()
        }
    }

    @Test func resetForgetsEverythingAndTheNextCheckRestores() async throws {
        try await withExampleHost(serving: "1.0") { host in
            let manager = try await syncedManager(host)
            host.publish("1.2")
            // snippet:begin reset
            try await manager.reset() // stops a running update first; deletes the folder and the state
            let report = try await manager.checkForUpdates() // a restore from the archive
            // snippet:end reset
            #expect(report.outcome == .restored && report.fromVersion == nil && report.toVersion.text == "1.2")
            ExampleStorage.expectTree(host.appSupport + "/content", is: "1.2")
            #expect(try await manager.history().map(\.kind) == [.restore], "reset forgets the history too")
            await manager.shutdown()
        }
    }
}
