import Foundation

/// When and how long to wait before trying a failed request again.
///
/// Only transient failures are retried (``TransportError/isTransient``). The delay grows
/// exponentially with jitter, and a server's `Retry-After` wins when it asks for longer.
public struct RetryPolicy: Sendable, Equatable {
    /// Attempts in all, the first included. Default 4.
    public var maxAttempts: Int = 4
    /// The first backoff delay. Default 0.25 s.
    public var baseDelay: Duration = .milliseconds(250)
    /// The longest backoff delay. Default 8 s.
    public var maxDelay: Duration = .seconds(8)
    /// The longest `Retry-After` honoured; a server asking for more fails the request instead.
    /// Default 60 s.
    public var maxRetryAfter: Duration = .seconds(60)
    /// Whether a connection that could not be made is tried again: refused (nothing listens,
    /// libcurl's `CURLE_COULDNT_CONNECT`) or a host name that does not resolve
    /// (`CURLE_COULDNT_RESOLVE_HOST`). Either fails at once and rarely changes within a backoff
    /// delay, so a caller with something to fall back on (a cache with a stale copy) turns this
    /// off. Default true.
    public var retriesFailedConnections = true

    /// The default policy: 4 attempts, backoff from 0.25 s up to 8 s, `Retry-After` honoured up to
    /// 60 s.
    public init() {}

    /// No retries at all.
    public static var none: RetryPolicy {
        var policy = RetryPolicy()
        policy.maxAttempts = 1
        return policy
    }

    /// The wait before attempt `attempt + 1` after `error`, or `nil` to give up.
    /// `attempt` counts from 1. `jitter` is a number in 0..<1.
    public func delay(after error: TransportError, attempt: Int, jitter: Double) -> Duration? {
        guard error.isTransient, attempt < maxAttempts else { return nil }
        if !retriesFailedConnections, error.failedToConnect { return nil }
        let exponent = min(attempt - 1, 20)
        var backoff = baseDelay * (1 << exponent)
        if backoff > maxDelay { backoff = maxDelay }
        backoff = backoff * (0.5 + jitter / 2)
        if let asked = error.retryAfter {
            // Compared as seconds before any conversion: a server may ask for 1e300 s (or a
            // caller pass infinity), which no `Duration` holds. Any `maxRetryAfter` is under
            // 2⁶³ s, which `Duration.seconds(_:)` takes.
            guard asked.isFinite, asked <= maxRetryAfter.seconds else { return nil }
            return max(Duration.seconds(max(0, asked)), backoff)
        }
        return backoff
    }

    /// Parses a `Retry-After` value: delta-seconds or an HTTP date. Returns seconds from `now`.
    public static func parseRetryAfter(_ value: String, now: Date = Date()) -> Double? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        // A number of seconds: finite ("inf" reads as a Double, and waits for nothing).
        if let seconds = Double(trimmed) { return seconds.isFinite && seconds >= 0 ? seconds : nil }
        guard let date = HTTPDate.parse(trimmed, now: now) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }
}
