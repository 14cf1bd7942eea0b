import SyncDaemon
import Testing

@Suite struct DurationTextTests {
    @Test(arguments: [
        ("90s", false, Duration.seconds(90)), ("15m", false, .seconds(900)), ("2h", false, .seconds(7200)),
        ("1d", false, .seconds(86400)),
        ("300", true, .seconds(300)), ("5m", true, .seconds(300)),
        ("36500d", false, .seconds(36_500 * 86_400)), ("3153600000", true, .seconds(3_153_600_000)),
    ])
    func parses(text: String, bare: Bool, expected: Duration) {
        #expect(DurationText.parse(text, bareSeconds: bare) == expected)
    }

    /// Past 36,500 days (100 years, the longest wait scheduled) is refused in every unit alike:
    /// `106751991167300d` was read, and its jittered wait stopped the agent.
    @Test(arguments: [
        "", "s", "0s", "1.5m", "-3s", "300", "5 m", "5w", "99999999999999999d", "36501d", "106751991167300d",
        "922337203685477s", "876001h",
    ])
    func refuses(text: String) {
        #expect(DurationText.parse(text) == nil)
    }

    @Test("0 is zero only where asked (splay, full-check-interval); 0s and 00 never")
    func zeroWhereAllowed() {
        #expect(DurationText.parse("0", bareSeconds: true) == nil)
        #expect(DurationText.parse("0", bareSeconds: true, allowingZero: true) == .zero)
        #expect(DurationText.parse("0s", allowingZero: true) == nil)
        #expect(DurationText.parse("00", bareSeconds: true, allowingZero: true) == nil)
        #expect(DurationText.parse("90s", allowingZero: true) == .seconds(90))
    }

    @Test func formatsWithTheLargestWholeUnit() {
        #expect(DurationText.format(.seconds(90)) == "90s")
        #expect(DurationText.format(.seconds(900)) == "15m")
        #expect(DurationText.format(.seconds(7200)) == "2h")
        #expect(DurationText.format(.seconds(172800)) == "2d")
    }

    /// A schedule built with durations past what can be jittered or doubled (a library caller's
    /// `.seconds(.max)`) clamps them to the longest wait instead of trapping.
    @Test func aScheduleOfNeverClampsInsteadOfTrapping() {
        var schedule = PollSchedule(
            interval: .seconds(Int64.max), firstRetry: .seconds(10), maxBackoff: .seconds(Int64.max))
        schedule.splay = .seconds(Int64.max)
        #expect(schedule.afterSuccess(random: 0.99) <= .seconds(3_153_600_000 * 11 / 10))
        #expect(schedule.initialDelay(random: 0.99) <= .seconds(3_153_600_000))
        for _ in 0..<200 { _ = schedule.afterFailure(random: 0.5) }
        // (1 + 0 jitter) through a Double: within a second of the longest wait.
        #expect(schedule.afterFailure(random: 0.5) <= .seconds(3_153_600_001))
    }
}
