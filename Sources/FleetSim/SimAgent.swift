import ContentSync
import Logging
import SyncDaemon
import Synchronization
import ToolSupport
import Transport

/// One simulated agent: the daemon's own loop (`StorageWatcher`, as `sync-agent watch` runs it
/// for each storage) over its own content folder and state database, with its schedule's random
/// draws seeded, and a record of what each check did.
final class SimAgent: Sendable {
    let index: Int
    let watcher: StorageWatcher
    private let outcome: Mutex<AgentOutcome>

    init(index: Int, settings: StorageSettings, transport: any Transport, seed: UInt64) throws {
        self.index = index
        self.outcome = Mutex(AgentOutcome(agent: index))
        let generator = Mutex(SplitMix64(seed: seed))
        // Silent: 1,000 agents' info lines would cost the simulator more than their checks.
        let quiet = Logger(label: "fleet-sim", factory: { _ in SwiftLogNoOpLogHandler() })
        self.watcher = try StorageWatcher(
            settings: settings, transport: transport, logger: quiet,
            random: { generator.withLock { Double.random(in: 0..<1, using: &$0) } })
    }

    /// Runs the loop from `start` until ``stop()`` (a check running then finishes, so an update
    /// is never cut short), then records the final version.
    func run(start: ContinuousClock.Instant, counters: FleetCounters) async -> AgentOutcome {
        let clock = ContinuousClock()
        var callbacks = StorageWatcher.Callbacks()
        callbacks.checkStarting = { [self] in
            let offset = (clock.now - start).seconds
            outcome.withLock { outcome in
                outcome.checks += 1
                outcome.checkStarts.append((offset * 1000).rounded() / 1000)
            }
            counters.checkStarted()
        }
        callbacks.checkFinished = { [self] result, duration in
            let offset = (clock.now - duration - start).seconds
            outcome.withLock { outcome in
                switch result {
                case .success(let report):
                    outcome.lastCheckSucceeded = true
                    switch report.outcome {
                    case .upToDate:
                        outcome.upToDate += 1
                    case .replayed, .restored:
                        if report.outcome == .replayed { outcome.replayed += 1 } else { outcome.restored += 1 }
                        outcome.updates.append(
                            .init(
                                start: offset, seconds: duration.seconds, outcome: report.outcome.rawValue,
                                from: report.fromVersion?.description, to: report.toVersion.description,
                                files: report.filesDownloaded, bytes: report.bytesDownloaded))
                    }
                case .failure(let error):
                    outcome.failures += 1
                    outcome.lastCheckSucceeded = false
                    outcome.lastError = "\(error)"
                }
            }
            switch result {
            case .success(let report) where report.outcome != .upToDate: counters.updated()
            case .success: break
            case .failure: counters.failed()
            }
        }
        do {
            try await watcher.run(callbacks: callbacks)
        } catch {
            outcome.withLock { $0.stoppedOnPermanentError = error.permanent }
        }
        let version = (try? await watcher.manager.localVersion())?.description
        return outcome.withLock { outcome in
            outcome.finalVersion = version
            return outcome
        }
    }

    /// Ends the loop at the run's deadline: a pause ends at once, a running check finishes.
    func stop() {
        watcher.stop()
    }
}
