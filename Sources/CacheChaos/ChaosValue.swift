import FileKit
import Foundation
import ToolSupport

/// A value that proves itself whole: one header line naming its key, its generation, its
/// payload's length and SHA-256, then the payload. A torn, short, zeroed or foreign value
/// fails ``check(_:)``.
///
///     cache-chaos w1-17 4294967303 20371 9f86d0…\n<20371 bytes>
struct ChaosValue: Equatable {
    /// The key's name (`w<writer>-<index>`), as given to `CacheKey.custom`.
    var name: String
    /// Which write of the key this is: `epoch << 32 | step`, rising over a writer's restarts.
    var generation: UInt64

    /// The bytes of this value, about `size` long (exactly, for sizes above the header's).
    func encoded(size: Int) -> Data {
        let fixed = "cache-chaos \(name) \(generation)  \n".utf8.count + 64
        var count = max(0, size - fixed - 1)
        count = max(0, size - fixed - String(count).count)
        var payload = Data(count: count)
        var random = SplitMix64(seed: name.utf8.reduce(generation) { ($0 ^ UInt64($1)) &* 0x100_0000_01B3 })
        payload.withUnsafeMutableBytes { raw in
            guard let base = raw.baseAddress else { return }
            for offset in stride(from: 0, to: count - 7, by: 8) {
                base.storeBytes(of: random.next(), toByteOffset: offset, as: UInt64.self)
            }
            for offset in (count / 8 * 8)..<count {
                base.storeBytes(of: UInt8(truncatingIfNeeded: random.next()), toByteOffset: offset, as: UInt8.self)
            }
        }
        var data = Data("cache-chaos \(name) \(generation) \(count) \(FileDigest.sha256(payload))\n".utf8)
        data.append(payload)
        return data
    }

    /// The value `data` holds, or why it is not a whole value.
    static func check(_ data: Data) -> Result<ChaosValue, ToolFailure> {
        guard let newline = data.prefix(512).firstIndex(of: UInt8(ascii: "\n")) else {
            return .failure(
                ToolFailure(
                    "no header line in \(data.count) bytes (starts \(data.prefix(16).map { String($0, radix: 16) }.joined(separator: " ")))"
                ))
        }
        let fields = String(decoding: data[data.startIndex..<newline], as: UTF8.self).split(separator: " ")
        guard fields.count == 5, fields[0] == "cache-chaos", let generation = UInt64(fields[2]),
            let count = Int(fields[3])
        else {
            return .failure(ToolFailure("not a cache-chaos header: \(fields.prefix(5).joined(separator: " "))"))
        }
        let payload = data[(newline + 1)...]
        guard payload.count == count else {
            return .failure(
                ToolFailure(
                    "\(fields[1]) generation \(generation): \(payload.count) payload bytes, the header says \(count)"))
        }
        guard FileDigest.sha256(payload) == fields[4] else {
            return .failure(
                ToolFailure("\(fields[1]) generation \(generation): the payload's SHA-256 is not the header's"))
        }
        return .success(ChaosValue(name: String(fields[1]), generation: generation))
    }
}

/// Value sizes on both sides of the inline threshold (16 KiB) up to 1 MiB.
enum SizeMix: String {
    /// Mostly small and medium values, some right at the threshold, a few up to 1 MiB.
    case mixed
    /// Inline values only (up to 8 KiB).
    case small
    /// File values only, 512 KiB to 1 MiB: slow group writes.
    case large

    func next(_ random: inout SplitMix64) -> Int {
        let roll = random.next() % 100
        switch self {
        case .small: return 64 + Int(random.next() % 8_128)
        case .large: return (512 << 10) + Int(random.next() % (512 << 10))
        case .mixed:
            if roll < 40 { return 64 + Int(random.next() % 4_032) }
            if roll < 55 { return (16 << 10) - 256 + Int(random.next() % 512) }
            if roll < 90 { return (16 << 10) + Int(random.next() % (240 << 10)) }
            return (256 << 10) + Int(random.next() % (768 << 10))
        }
    }
}
