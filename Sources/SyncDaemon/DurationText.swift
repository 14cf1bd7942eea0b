import Transport

/// Durations as operators write them: a whole number with a unit, `90s`, `15m`, `2h`, `1d`. The
/// config file and the flags (`status --max-age`) read the same forms.
public enum DurationText {
    /// The duration `text` names, or nil when it is not one (no unit, zero, a fraction, too big).
    /// With `bareSeconds`, a plain number counts as seconds (`300`), as `--interval` always took;
    /// with `allowingZero`, `0` is zero (`splay`, `full-check-interval`: "none" and "every time").
    public static func parse(_ text: String, bareSeconds: Bool = false, allowingZero: Bool = false) -> Duration? {
        if allowingZero && text == "0" { return .zero }
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
        var digits = Substring(text)
        var unit: Int64 = 1
        if let last = text.last, let scale = units[last] {
            digits = text.dropLast()
            unit = scale
        } else if !bareSeconds {
            return nil
        }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
            let count = Int64(digits), count > 0, count <= Self.longestSeconds / unit
        else { return nil }
        return .seconds(count * unit)
    }

    /// "90s", "15m", "2h" or "1d": the largest unit that divides the duration.
    public static func format(_ duration: Duration) -> String {
        let seconds = duration.components.seconds
        for (unit, size) in [("d", Int64(86400)), ("h", 3600), ("m", 60)] where seconds >= size && seconds % size == 0 {
            return "\(seconds / size)\(unit)"
        }
        return "\(seconds)s"
    }

    /// The longest duration read: 36,500 days (100 years), the longest wait the agent schedules
    /// (`Duration.longestWait`, which every sleep clamps to).
    static let longestSeconds: Int64 = Duration.longestWait.components.seconds

    /// What a duration looks like, for error messages.
    public static let help = "a whole number above 0 with s, m, h or d (90s, 15m, 2h, 1d), at most 36500d"
}
