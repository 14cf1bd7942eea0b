import ContentSync
import SyncDaemon
import ToolSupport

/// One simulated agent: its own manager (content folder and state database), schedule and
/// seeded random numbers, looping as `sync-agent watch` does: the initial delay, a check, then
/// the schedule's pause after a success or a failure, until the run's deadline.
struct SimAgent: Sendable {
    let index: Int
    let manager: CacheManager
    var schedule: PollSchedule
    var random: SplitMix64

    /// Runs until no further check would start before `deadline` (a check running at the
    /// deadline finishes, so an update is never cut short), then records the final version.
    mutating func run(start: ContinuousClock.Instant, deadline: ContinuousClock.Instant,
                      counters: FleetCounters) async -> AgentOutcome {
        let clock = ContinuousClock()
        var outcome = AgentOutcome(agent: index)
        var pause = schedule.initialDelay(random: nextUnit())
        while true {
            let wake = clock.now + pause
            guard wake < deadline else { break }
            // Not cancelled in a run; an early wake-up only makes this one check early.
            try? await Task.sleep(until: wake, clock: clock)
            let checkStart = clock.now
            let offset = (checkStart - start).seconds
            outcome.checks += 1
            outcome.checkStarts.append((offset * 1000).rounded() / 1000)
            counters.checkStarted()
            do {
                let report = try await manager.checkForUpdates()
                outcome.lastCheckSucceeded = true
                switch report.outcome {
                case .upToDate:
                    outcome.upToDate += 1
                case .replayed, .restored:
                    if report.outcome == .replayed { outcome.replayed += 1 } else { outcome.restored += 1 }
                    counters.updated()
                    outcome.updates.append(.init(start: offset, seconds: (clock.now - checkStart).seconds,
                                                 outcome: report.outcome.rawValue, from: report.fromVersion?.description,
                                                 to: report.toVersion.description, files: report.filesDownloaded,
                                                 bytes: report.bytesDownloaded))
                }
                pause = schedule.afterSuccess(random: nextUnit())
            } catch {
                outcome.failures += 1
                outcome.lastCheckSucceeded = false
                outcome.lastError = "\(error)"
                counters.failed()
                if PollSchedule.isPermanent(error) {
                    outcome.stoppedOnPermanentError = true
                    break
                }
                pause = schedule.afterFailure(random: nextUnit())
            }
        }
        outcome.finalVersion = (try? await manager.localVersion())?.description
        return outcome
    }

    /// Uniform in [0, 1), from this agent's own generator.
    private mutating func nextUnit() -> Double {
        Double.random(in: 0..<1, using: &random)
    }
}
