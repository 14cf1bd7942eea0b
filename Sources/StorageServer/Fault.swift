import Foundation

/// A misbehaviour the server performs instead of, or while, serving a file.
///
/// Install faults with ``StorageServer/injectFault(_:forPath:times:)`` or
/// ``StorageServer/injectFault(_:times:where:)``.
public enum Fault: Sendable, Hashable {
    /// Answers with this status, headers and body instead of the file, whether or not it exists.
    case status(Int, headers: [String: String] = [:], body: Data = Data())
    /// Waits this long before answering, then serves the request normally.
    case delay(seconds: Double)
    /// Sends the normal headers, including the full `Content-Length`, then only this many body
    /// bytes, then closes the connection. A value at or past the body's length has no effect.
    case truncate(afterBytes: Int)
    /// Sends the normal headers and ``StorageServer/Configuration/stallAfterBytes`` body bytes
    /// (always fewer than the whole body), then sends nothing until
    /// ``StorageServer/Configuration/stallLimit`` passes, the faults are cleared or the server
    /// stops; then closes the connection.
    case stall
    /// Answers with a redirect to `path` (a decoded path such as `/v2/a b.zip`, or an absolute URL).
    case redirect(to: String, status: Int = 302)

    /// `429 Too Many Requests` with `Retry-After` in seconds, as rate-limited hosts answer.
    public static func tooManyRequests(retryAfter seconds: Int) -> Fault {
        .status(429, headers: ["Retry-After": String(seconds)])
    }
}

/// One installed fault: which requests it catches and how many more it will catch.
struct FaultRule: Sendable {
    enum Match: Sendable {
        case path(String)
        case predicate(@Sendable (String) -> Bool)

        func matches(_ path: String) -> Bool {
            switch self {
            case .path(let exact): exact == path
            case .predicate(let predicate): predicate(path)
            }
        }
    }

    var match: Match
    var fault: Fault
    /// Requests left before the rule retires; `nil` for no limit.
    var remaining: Int?
}

/// Faults drawn at random: each matching request gets one of `faults` with probability `rate`,
/// from a seeded generator, so a failing run can be replayed (up to request order).
struct RandomFaults: Sendable {
    var rate: Double
    var faults: [Fault]
    var matches: @Sendable (String) -> Bool
    /// SplitMix64 state.
    var state: UInt64

    mutating func draw(for path: String) -> Fault? {
        guard !faults.isEmpty, matches(path) else { return nil }
        let roll = Double(next() >> 11) / Double(1 << 53)
        guard roll < rate else { return nil }
        return faults[Int(next() % UInt64(faults.count))]
    }

    private mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
