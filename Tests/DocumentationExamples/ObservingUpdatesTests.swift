import ContentSync
import Foundation
import StorageServer
import Testing

/// The "Observing updates" article (Sources/ContentSync/ContentSync.docc/ObservingUpdates.md).
@Suite("The guide's observing examples work", .timeLimit(.minutes(3)))
struct ObservingUpdatesExamples {
    @Test func theObserverSeesEveryStateOfARestoreAndItsProgress() async throws {
        try await withExampleHost(serving: "1.0") { host in
            let manager = try CacheManager(
                configuration: SyncConfiguration(
                    baseURL: host.storageURL, contentDirectory: host.appSupport + "/content",
                    stateDatabasePath: host.appSupport + "/state.sqlite"))
            // snippet:begin observe-events
            let events = await manager.events() // starts with the current state: subscribe first, then check
            let observer = Task {
                var states: [CacheManagerState] = []
                var phases: [SyncProgress.Phase] = []
                for await event in events {
                    switch event {
                    case .stateChanged(let state):
                        states.append(state)
                    case .progress(let progress):
                        if phases.last != progress.phase { phases.append(progress.phase) }
                        if let total = progress.bytesTotal {
                            print(progress.phase, "\(progress.bytesDone) of \(total) bytes")
                        } else {
                            print(
                                progress.phase, "\(progress.filesDone) of \(progress.filesTotal) files",
                                progress.currentItem ?? "")
                        }
                    case .finished(let report):
                        print("now at", report.toVersion)
                        return (states, phases)
                    case .failed(let error):
                        print("failed; the folder keeps its version:", error)
                        return (states, phases)
                    case .connectionNotAllowed, .suspended:
                        print("paused; resume() continues")
                        return (states, phases)
                    }
                }
                return (states, phases)
            }
            try await manager.checkForUpdates()
            let (states, phases) = await observer.value
            // snippet:end observe-events
            #expect(states == [.ready, .working, .succeeded])
            #expect(phases.first == .checking && phases.contains(.downloadingArchive))
            ExampleStorage.expectTree(host.appSupport + "/content", is: "1.0")
            await manager.shutdown()
        }
    }

    @Test func statusAndHistoryTellTheLastSuccessAndTheFailuresSince() async throws {
        try await withExampleHost(serving: "1.0") { host in
            let folder = host.appSupport + "/content"
            let stateFile = host.appSupport + "/state.sqlite"
            let manager = try CacheManager(
                configuration: SyncConfiguration(
                    baseURL: host.storageURL, contentDirectory: folder,
                    stateDatabasePath: stateFile))
            try await manager.checkForUpdates()
            host.server.injectFault(.status(404), forPath: "/RXCacheConfig/cacheStatus.json")
            await #expect(throws: SyncError.self) { try await manager.checkForUpdates() }

            // snippet:begin status-and-history
            let status = try await manager.status()
            print("version", status.version ?? "none yet", "state", status.state)
            if let success = status.lastSuccess {
                print("last success", success.finishedAt, success.kind, "to", success.toVersion ?? "?")
            }
            if status.consecutiveFailures > 0, let error = status.lastError {
                print(status.consecutiveFailures, "failures since; the last:", error)
            }
            for entry in try await manager.history(limit: 20) { // newest first, every attempt
                print(entry.startedAt, entry.kind, entry.outcome, entry.errorCode.map { "\($0)" } ?? "")
            }
            // snippet:end status-and-history
            #expect(status.version == "1.0" && status.state == .failed && status.consecutiveFailures == 1)
            #expect(status.lastErrorCode == .network && status.lastError?.contains("cacheStatus.json") == true)
            #expect(status.lastSuccess?.kind == .restore && status.lastSuccess?.toVersion == "1.0")
            let history = try await manager.history(limit: 20)
            #expect(history.map(\.outcome) == [.failed, .succeeded])
            #expect(history.first?.errorCode == .network)

            await manager.shutdown()
            // snippet:begin status-without-a-manager
            // reads only; never fetches
            let seen = try await SyncStatus.read(statePath: stateFile, contentDirectory: folder)
            // snippet:end status-without-a-manager
            #expect(seen.version == "1.0" && seen.consecutiveFailures == 1 && seen.runningUpdate == nil)
        }
    }
}
