extension Duration {
    /// The duration in seconds, fractions included: the one conversion the package's modules
    /// share (a `Double` holds any `Duration`, so comparing as seconds never traps).
    package var seconds: Double {
        let (whole, attoseconds) = components
        return Double(whole) + Double(attoseconds) / 1e18
    }

    /// The longest the package sleeps, schedules or doubles a configured wait: 100 years. An
    /// app may configure `.seconds(.max)` for "never"; a sleep, a deadline or a doubling of that
    /// would overflow and trap.
    package static let longestWait: Duration = .seconds(3_153_600_000)

    /// The duration as a wait: from zero to ``longestWait``.
    package var clampedWait: Duration { min(max(self, .zero), .longestWait) }

    /// The duration in seconds for an API that takes whole milliseconds in an `Int32`
    /// (SQLite's busy timeout): at most `Int32.max` ms, about 24.8 days, and never negative.
    package var secondsForInt32Milliseconds: Double { min(max(seconds, 0), Double(Int32.max) / 1000) }

    /// Whole milliseconds, for libcurl's `_MS` options; `Int.max` (or `.min`) for a duration
    /// longer than that (an app may configure `.seconds(.max)` for "never").
    var milliseconds: Int {
        let (seconds, attoseconds) = components
        let (whole, overflow) = Int(seconds).multipliedReportingOverflow(by: 1000)
        guard !overflow else { return seconds < 0 ? .min : .max }
        let (total, past) = whole.addingReportingOverflow(Int(attoseconds / 1_000_000_000_000_000))
        return past ? (seconds < 0 ? .min : .max) : total
    }
}
