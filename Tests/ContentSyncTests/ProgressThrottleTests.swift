import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

@Suite("Progress reports are throttled", .timeLimit(.minutes(3)))
struct ProgressThrottleTests {
    @Test func aBurstOfReportsIsThinnedButFinalReportsAlwaysPass() {
        let throttle = ProgressThrottle(interval: .milliseconds(50))
        var delivered = 0
        let started = ContinuousClock.now
        for _ in 0..<10_000 where throttle.shouldReport() { delivered += 1 }
        // At most one a 50 ms since the burst began, however long a loaded machine took for it.
        let allowed = 1 + Int((ContinuousClock.now - started) / .milliseconds(50))
        #expect(delivered >= 1)
        #expect(delivered <= allowed, "10,000 reports in a burst became \(delivered) deliveries (\(allowed) allowed)")
        #expect(throttle.shouldReport(final: true))
    }
}
