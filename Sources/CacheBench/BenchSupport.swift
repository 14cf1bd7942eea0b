import Foundation
import ItemCache

#if canImport(Glibc)
    import Glibc
    import ToolSupport
#endif

/// Deterministic test values: one seeded random buffer per size, each item's first 8 bytes
/// replaced by its index so no two values are equal (the Python peer does the same with its own
/// generator: same sizes, equally incompressible).
struct Values {
    private let base: Data

    init(size: Int, seed: UInt64) {
        var state = seed &+ 0x9E37_79B9_7F4A_7C15
        var bytes = [UInt8](repeating: 0, count: size)
        for index in bytes.indices {
            // xorshift64*: cheap and reproducible; the values only need to be incompressible.
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            bytes[index] = UInt8(truncatingIfNeeded: (state &* 0x2545_F491_4F6C_DD1D) >> 56)
        }
        base = Data(bytes)
    }

    func value(_ index: Int) -> Data {
        var data = base
        withUnsafeBytes(of: UInt64(index).littleEndian) { raw in
            for offset in 0..<min(8, data.count) { data[data.startIndex + offset] = raw[offset] }
        }
        return data
    }
}

/// The keys items are stored under: URL keys, as a fetching app would use, built before timing.
func itemKeys(_ prefix: String, count: Int) throws -> [CacheKey] {
    try (0..<count).map { index in try CacheKey(url: URL(string: "https://bench.example/\(prefix)/\(index)")!) }
}

/// A seeded sequence of indices in `0..<count` (SplitMix64), so both tools read the same keys.
func randomIndices(count: Int, ops: Int, seed: UInt64) -> [Int] {
    var random = SplitMix64(seed: seed)
    return (0..<ops).map { _ in Int(random.next() % UInt64(count)) }
}

/// A configuration for a benchmark folder; `memoryTier: false` keeps nothing in memory, so every
/// get reaches the disk tier without a purge inside the timed loop.
func configuration(folder: String, inlineThreshold: Int?, memoryTier: Bool) -> CacheConfiguration {
    var configuration = CacheConfiguration(folder: folder)
    configuration.diskLimit = 1 << 30 // diskcache's default size_limit, so neither evicts here
    if let inlineThreshold { configuration.inlineThreshold = inlineThreshold }
    if !memoryTier { configuration.memory = MemoryLimits(totalBytes: 0) }
    return configuration
}

/// One JSON line on stdout: the measure, its parameters, and latencies or totals.
func emit(_ fields: [String: Any]) {
    var line = fields
    line["tool"] = "itemcache"
    let data = try! JSONSerialization.data(withJSONObject: line, options: [.sortedKeys])
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}

/// Latencies in nanoseconds and a few summary numbers, for humans reading the line.
func latencyFields(_ latencies: [UInt64]) -> [String: Any] {
    let sorted = latencies.sorted()
    func quantile(_ q: Double) -> Double {
        guard !sorted.isEmpty else { return 0 }
        return Double(sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * q).rounded()))])
    }
    let total = latencies.reduce(0, +)
    return [
        "lat_ns": latencies, "n": latencies.count, "median_us": quantile(0.5) / 1000, "p99_us": quantile(0.99) / 1000,
        "ops_per_s": total == 0 ? 0 : Double(latencies.count) / (Double(total) / 1e9),
    ]
}
