import DateText
import Testing

/// Numbers typed in flags and config files are plain decimals: what `Double(_:)` reads beyond
/// them (hexadecimal, exponents, signs, nan, inf) is refused, not given a meaning nobody meant.
@Suite("Plain decimal numbers")
struct DecimalTextTests {
    @Test(arguments: [("0", 0.0), ("12", 12), ("0.1", 0.1), ("1.5", 1.5), ("007", 7), ("36500", 36_500)])
    func reads(text: String, expected: Double) {
        #expect(DecimalText.parse(text) == expected)
        #expect(DecimalText.isDecimal(text))
    }

    @Test(arguments: [
        "", ".", "1.", ".5", "1.2.3", "0x10", "0x1p-3", "1e3", "1E3", "+1", "-1", "-0", "nan", "inf", "infinity",
        " 1", "1 ", "1,5", "١", "²", String(repeating: "9", count: 400),
    ])
    func refuses(text: String) {
        #expect(DecimalText.parse(text) == nil)
    }
}
