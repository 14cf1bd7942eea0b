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
        for _ in 0..<10_000 where throttle.shouldReport() { delivered += 1 }
        #expect(delivered >= 1)
        #expect(delivered < 100, "10,000 reports in a burst became \(delivered) deliveries")
        #expect(throttle.shouldReport(final: true))
    }
}
