/// Plain decimal numbers as people type them in flags and config files: ASCII digits with at
/// most one `.` between them (`12`, `0.1`, `1.5`).
///
/// `Double(_:)` alone would also read `0x10` (sixteen, as hexadecimal), `1e3`, `nan`, `inf` and a
/// sign, so a value that looks like a typo would pass with a meaning nobody meant.
package enum DecimalText {
    /// Whether `text` is digits with at most one `.` between them (`12`, `1.5`).
    package static func isDecimal(_ text: some StringProtocol) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return (1...2).contains(parts.count)
            && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy { $0.isASCII && $0.isNumber } }
    }

    /// The value of a plain decimal number (see ``isDecimal(_:)``), or nil for anything else or a
    /// value too large to be finite.
    package static func parse(_ text: some StringProtocol) -> Double? {
        guard isDecimal(text), let value = Double(String(text)), value.isFinite else { return nil }
        return value
    }
}
