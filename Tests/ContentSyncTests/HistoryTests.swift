import Foundation
import Synchronization
import Testing

@testable import ContentSync
@testable import Transport

/// The history records every attempt; the state keeps the last attempt, the last success and
/// the count of consecutive failures; the status shows an update running now.
@Suite("History records every attempt, and the status shows what runs now", .timeLimit(.minutes(5)))
struct HistoryTests {
    func summary(_ history: [UpdateHistoryEntry]) -> [String] {
        history.map { "\($0.kind.rawValue) \($0.outcome.rawValue)\($0.errorCode.map { " \($0)" } ?? "")" }
    }

    @Test func everyAttemptIsRecordedAndTheStateKeepsLastAttemptLastSuccessAndFailures() async throws {
        try await withScriptedManager(serving: "1.0") { fixture in
            let manager = fixture.manager
            try await manager.checkForUpdates()
            try await manager.checkForUpdates()

            let broken = try copySnapshot("1.2", to: fixture.root + "/broken")
            try "{\"actualCacheVersion\": ".write(
                toFile: broken.path + "/RXCacheConfig/cacheStatus.json", atomically: true, encoding: .utf8)
            fixture.transport.serve(broken)
            for _ in 0..<2 {
                await #expect(throws: SyncError.self) { try await manager.checkForUpdates() }
            }
            var status = try await manager.status()
            #expect(status.consecutiveFailures == 2)
            #expect(status.lastAttempt?.outcome == .failed && status.lastAttempt?.errorCode == .invalidStatus)
            #expect(status.lastSuccess?.outcome == .upToDate)
            #expect(status.lastError?.contains("cacheStatus.json") == true && status.lastErrorCode == .invalidStatus)

            fixture.serve("1.2")
            let update = try await fixture.startHeldUpdate(manager)
            await manager.suspend()
            _ = try? await update.value
            fixture.transport.release()
            status = try await manager.status()
            #expect(status.consecutiveFailures == 2, "a cancelled attempt is no failure")
            #expect(status.lastAttempt?.outcome == .cancelled && status.lastAttempt?.errorCode == .cancelled)

            let report = try await manager.resume()
            #expect(report.outcome == .replayed)
            status = try await manager.status(historyLimit: 10)
            #expect(status.consecutiveFailures == 0)
            #expect(status.lastError == nil)
            #expect(status.lastAttempt == status.lastSuccess)
            #expect(
                status.lastSuccess?.kind == .replay && status.lastSuccess?.toVersion == "1.2"
                    && status.lastSuccess?.fromVersion == "1.0")
            #expect(
                summary(status.history) == [
                    "replay succeeded", "check cancelled cancelled", "check failed invalidStatus",
                    "check failed invalidStatus",
                    "check upToDate", "restore succeeded",
                ])
            #expect(summary(try await manager.history()) == summary(status.history))
            let read = try await SyncStatus.read(
                statePath: fixture.state, contentDirectory: fixture.content, historyLimit: 10)
            #expect(read.history == status.history && read.state == .succeeded && read.version == "1.2")
        }
    }

    @Test func historyKeepsItsNewestEntriesAndAlwaysTheLastSuccess() async throws {
        try await withTemporaryDirectory { folder in
            let store = try StateStore(path: folder + "/state.sqlite")
            let start = Date(timeIntervalSince1970: 1_800_000_000)
            func attempt(_ index: Int, _ outcome: UpdateHistoryEntry.Outcome) -> UpdateHistoryEntry {
                UpdateHistoryEntry(
                    startedAt: start + Double(index), finishedAt: start + Double(index), fromVersion: "1.0",
                    toVersion: "1.1",
                    kind: .check, outcome: outcome, errorCode: outcome == .failed ? .network : nil,
                    message: outcome == .failed ? "failure \(index)" : nil)
            }
            try await store.recordAttempt(attempt(0, .upToDate), contentDirectory: folder + "/content")
            let failures = StateStore.historyRetention + 10
            for index in 1...failures {
                try await store.recordAttempt(attempt(index, .failed), contentDirectory: folder + "/content")
            }
            let kept = try await store.history(limit: 10 * StateStore.historyRetention)
            #expect(kept.count == StateStore.historyRetention + 1)
            #expect(kept.first?.error == "failure \(failures)")
            #expect(kept.last?.outcome == .upToDate, "the last success outlives the retention")
            #expect(kept.dropLast().last?.error == "failure \(failures - StateStore.historyRetention + 1)")
            let status = try await SyncStatus.read(
                statePath: folder + "/state.sqlite", contentDirectory: folder + "/content")
            #expect(status.consecutiveFailures == failures)
            #expect(status.lastSuccess?.startedAt == start)
            #expect(status.state == .failed)
        }
    }

    /// A `status` beside the first `sync` opens the new database while it is being created.
    @Test func aNewStateDatabaseOpenedFromSeveralConnectionsAtOnceOpensEverywhere() async throws {
        try await withTemporaryDirectory { folder in
            for round in 0..<20 {
                let path = folder + "/state-\(round).sqlite"
                let opened = try await offPool {
                    let results = Mutex<[String]>([])
                    let threads = (0..<4).map { _ in
                        Thread {
                            let outcome: String
                            do {
                                _ = try StateStore(path: path)
                                outcome = "ok"
                            } catch { outcome = "\(error)" }
                            results.withLock { $0.append(outcome) }
                        }
                    }
                    threads.forEach { $0.start() }
                    while results.withLock({ $0.count }) < threads.count { usleep(1_000) }
                    return results.withLock { $0 }
                }
                #expect(opened == ["ok", "ok", "ok", "ok"], "round \(round)")
            }
        }
    }

    @Test func theStatusShowsAnUpdateRunningNow() async throws {
        try await withScriptedManager(serving: "1.0") { fixture in
            let manager = fixture.manager
            let idle = try await SyncStatus.read(statePath: fixture.state, contentDirectory: fixture.content)
            #expect(idle.state == .unknown && idle.runningUpdate == nil)
            let update = try await fixture.startHeldUpdate(manager)
            // As another process (`sync-agent status`) sees it, and as the manager does.
            let running = try await SyncStatus.read(statePath: fixture.state, contentDirectory: fixture.content)
            #expect(running.state == .working)
            #expect(running.runningUpdate?.processID == getpid())
            #expect(try await manager.status().runningUpdate?.processID == getpid())
            await manager.suspend()
            _ = try? await update.value
            fixture.transport.release()
            let stopped = try await SyncStatus.read(statePath: fixture.state, contentDirectory: fixture.content)
            #expect(stopped.runningUpdate == nil)
            #expect(stopped.state == .suspended)
            #expect(stopped.lastAttempt?.outcome == .cancelled)
            // Read for another folder, the database is refused, not shown as that folder's.
            let other = fixture.content + "-other"
            let error = await #expect(throws: SyncError.self) {
                try await SyncStatus.read(statePath: fixture.state, contentDirectory: other)
            }
            #expect(error?.code == .configuration)
            #expect(error?.message.contains("belongs to \(fixture.content), not \(other)") == true)
        }
    }

}

/// A secret an origin echoed into a failure's message (a redirect to `?echo=<the header's
/// value>`) is stored masked, in the state row's last error and in the history (an outside
/// audit found it in both).
@Suite("A registered secret is never stored")
struct StoredSecretTests {
    @Test func anEchoedSecretIsMaskedInTheLastErrorAndTheHistory() async throws {
        try await withTemporaryDirectory { folder in
            let secret = "echoed-" + UUID().uuidString
            Redaction.registerSecrets([secret])
            let store = try StateStore(path: folder + "/state.sqlite")
            let now = Date()
            try await store.recordAttempt(
                UpdateHistoryEntry(
                    startedAt: now, finishedAt: now, fromVersion: nil, toVersion: "1.0", kind: .restore,
                    outcome: .failed, errorCode: .network, message: "GET http://h/x?echo=\(secret) answered HTTP 404"),
                contentDirectory: folder + "/content")
            let lastError = try #require(try await store.syncState()?.lastError)
            #expect(lastError == "GET http://h/x?echo=*** answered HTTP 404")
            let stored = try await store.history(limit: 1).first?.error
            #expect(stored == "GET http://h/x?echo=*** answered HTTP 404")
        }
    }
}
