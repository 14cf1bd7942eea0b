/// A ``FileFingerprint`` in 40 bytes: the SHA-256 as its 32 raw bytes instead of 64 characters
/// of hex. The planner keeps one per file it will download, so a list of a million adds costs
/// 40 MB less than with Strings.
package struct PackedFingerprint: Hashable, Sendable {
    package var size: Int64
    private var words: (UInt64, UInt64, UInt64, UInt64)

    /// Reads exactly 64 ASCII hex digits, either case; nil for anything else.
    package init?<Hex: Collection<UInt8>>(size: Int64, hex: Hex) {
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        var count = 0
        for byte in hex {
            let nibble: UInt64
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = UInt64(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = UInt64(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = UInt64(byte - UInt8(ascii: "A") + 10)
            default: return nil
            }
            switch count / 16 {
            case 0: words.0 = words.0 << 4 | nibble
            case 1: words.1 = words.1 << 4 | nibble
            case 2: words.2 = words.2 << 4 | nibble
            case 3: words.3 = words.3 << 4 | nibble
            default: return nil
            }
            count += 1
        }
        guard count == 64 else { return nil }
        self.size = size
        self.words = words
    }

    /// Packs a fingerprint whose hash is 64 hex digits; nil otherwise.
    package init?(_ fingerprint: FileFingerprint) {
        self.init(size: fingerprint.size, hex: fingerprint.sha256.utf8)
    }

    /// The fingerprint with its hash in lower-case hex, as the protocol's parsers produce it.
    package var fingerprint: FileFingerprint {
        let words = self.words
        let hex = String(unsafeUninitializedCapacity: 64) { buffer in
            for position in 0..<64 {
                let word = position < 16 ? words.0 : position < 32 ? words.1 : position < 48 ? words.2 : words.3
                let nibble = UInt8(truncatingIfNeeded: word >> UInt64(60 - 4 * (position % 16))) & 0xF
                buffer[position] = nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
            }
            return 64
        }
        return FileFingerprint(size: size, sha256: hex)
    }

    package static func == (lhs: PackedFingerprint, rhs: PackedFingerprint) -> Bool {
        lhs.size == rhs.size && lhs.words == rhs.words
    }

    package func hash(into hasher: inout Hasher) {
        hasher.combine(size)
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }
}
