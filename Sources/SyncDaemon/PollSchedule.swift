import ContentSync
import Transport

/// When `watch` checks next: every interval with random jitter, and after failures an
/// exponential backoff, also jittered, up to a cap. Pure arithmetic: the caller draws the random
/// numbers, so tests can fix them.
public struct PollSchedule: Sendable, Equatable {
    /// The pause between checks that succeed.
    public var interval: Duration
    /// Each pause is scaled by a random factor in `1 ± jitter` (0 ≤ jitter < 1), so a fleet
    /// started together spreads out instead of polling in step. Default 0.1.
    public var jitter: Double = 0.1
    /// The first pause after a failure; each further failure in a row doubles it.
    public var firstRetry: Duration = .seconds(10)
    /// The longest pause after failures.
    public var maxBackoff: Duration
    /// The first check waits a random part of this (0 by default: check at once). A fleet
    /// restarted together (a deploy, a power cut) otherwise polls in step at its first check.
    public var splay: Duration = .zero
    /// Failures since the last success.
    public private(set) var consecutiveFailures = 0

    /// A schedule checking every `interval` (the first retry is at most the interval; the cap
    /// defaults to it).
    public init(
        interval: Duration, jitter: Double = 0.1, firstRetry: Duration = .seconds(10), maxBackoff: Duration? = nil
    ) {
        self.interval = interval
        self.jitter = jitter
        self.firstRetry = min(firstRetry, interval)
        self.maxBackoff = maxBackoff ?? interval
    }

    /// The wait before the first check; `random` is uniform in [0, 1).
    public func initialDelay(random: Double) -> Duration {
        splay.clampedWait * random
    }

    /// Continues a run of `failures` failed checks (a storage a reload restarted): the next
    /// failure counts on from them, for the backoff and for `max-failures`.
    public mutating func continuing(failures: Int) {
        consecutiveFailures = max(0, failures)
    }

    /// The pause after a successful check; `random` is uniform in [0, 1).
    public mutating func afterSuccess(random: Double) -> Duration {
        consecutiveFailures = 0
        return jittered(interval, random)
    }

    /// The pause after a failed check; `random` is uniform in [0, 1).
    public mutating func afterFailure(random: Double) -> Duration {
        consecutiveFailures += 1
        var backoff = firstRetry
        // Waits are clamped to 100 years (`Duration.longestWait`): a longer one, doubled or
        // jittered, would overflow.
        let cap = maxBackoff.clampedWait
        for _ in 1..<consecutiveFailures where backoff < cap { backoff = backoff * 2 }
        return jittered(min(backoff, cap), random)
    }

    private func jittered(_ pause: Duration, _ random: Double) -> Duration {
        pause.clampedWait * (1 + jitter * (2 * random - 1))
    }

    /// Whether retrying cannot help: the configuration is wrong, or the library refuses until
    /// a setting changes (an unknown non-empty folder, a trust downgrade). `watch` stops on
    /// these at once instead of retrying forever.
    public static func isPermanent(_ error: any Error) -> Bool {
        guard let error = error as? SyncError else { return false }
        return error.code == .configuration || error.setting != nil
    }
}
