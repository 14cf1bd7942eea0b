extension Duration {
    /// The duration in seconds, fractions included: the one conversion the package's modules
    /// share (a `Double` holds any `Duration`, so comparing as seconds never traps).
    package var seconds: Double {
        let (whole, attoseconds) = components
        return Double(whole) + Double(attoseconds) / 1e18
    }

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
