import SyncDaemon
import Testing

@Suite struct DurationTextTests {
    @Test(arguments: [
        ("90s", false, Duration.seconds(90)), ("15m", false, .seconds(900)), ("2h", false, .seconds(7200)),
        ("1d", false, .seconds(86400)),
        ("300", true, .seconds(300)), ("5m", true, .seconds(300)),
    ])
    func parses(text: String, bare: Bool, expected: Duration) {
        #expect(DurationText.parse(text, bareSeconds: bare) == expected)
    }

    @Test(arguments: ["", "s", "0s", "1.5m", "-3s", "300", "5 m", "5w", "99999999999999999d"])
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
}
