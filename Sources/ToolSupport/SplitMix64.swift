/// SplitMix64: a tiny, well-mixed generator whose sequence depends only on its seed, so a seeded
/// test, fault schedule, chaos run or benchmark replays the same way on every run and machine.
/// One copy for the test server's random faults, the tests, `cache-bench` and `cache-chaos`.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator whose sequence is fixed by `seed`.
    public init(seed: UInt64) { state = seed }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Fills `buffer` with random bytes, 8 per call to ``next()`` (cheap enough for megabytes,
    /// unlike the system generator's `getrandom(2)` per 8 bytes).
    public mutating func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        var index = 0
        while index < buffer.count {
            var word = next()
            for _ in 0..<Swift.min(8, buffer.count - index) {
                buffer[index] = UInt8(truncatingIfNeeded: word)
                word >>= 8
                index += 1
            }
        }
    }
}
