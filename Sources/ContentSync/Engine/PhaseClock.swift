import Logging
import Synchronization

/// How long each phase of one update took, in order: for ``SyncReport/phases`` and, as each
/// phase ends, a debug log line (`phase finished`, with `sync.phase` and `sync.seconds`), so an
/// operator running `--verbose` sees where an update's time went, even one that fails.
final class PhaseClock: Sendable {
    private struct Running {
        var timings: [PhaseTiming] = []
        var current: (phase: PhaseTiming.Phase, started: ContinuousClock.Instant)?
    }

    private let state = Mutex(Running())
    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    /// Ends the running phase, if any, and starts `phase`.
    func begin(_ phase: PhaseTiming.Phase) {
        end()
        state.withLock { $0.current = (phase, .now) }
    }

    /// Ends the running phase, if any.
    func end() {
        let finished: PhaseTiming? = state.withLock { running in
            guard let current = running.current else { return nil }
            running.current = nil
            let elapsed = ContinuousClock.now - current.started
            let timing = PhaseTiming(phase: current.phase, seconds: elapsed.seconds)
            running.timings.append(timing)
            return timing
        }
        if let finished {
            logger.debug(
                "phase finished",
                metadata: [
                    "sync.phase": "\(finished.phase.rawValue)",
                    "sync.seconds": "\(PhaseTiming.format(finished.seconds))",
                ])
        }
    }

    /// The phases ended so far, in order.
    var timings: [PhaseTiming] { state.withLock { $0.timings } }
}
