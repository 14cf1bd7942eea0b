import Foundation
import ToolSupport

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
    /// Sends the normal headers, including the full `Content-Length`, then at most this many body
    /// bytes, then resets the connection: a TCP `RST`, which discards what the server has not
    /// sent yet, as a crashed proxy or a load balancer dropping the flow does. The client reads
    /// `ECONNRESET` (curl: exit 56), never an end of file. A value at or past the body's length
    /// has no effect.
    case reset(afterBytes: Int)
    /// Sends the normal headers and ``StorageServer/Configuration/stallAfterBytes`` body bytes
    /// (always fewer than the whole body), then sends nothing until
    /// ``StorageServer/Configuration/stallLimit`` passes, the faults are cleared or the server
    /// stops; then closes the connection.
    case stall
    /// Answers with a redirect to `path` (a decoded path such as `/v2/a b.zip`, or an absolute URL).
    case redirect(to: String, status: Int = 302)
    /// Sends the normal headers, then the body at `bytesPerSecond` bytes a second (at least 1):
    /// a link that never goes silent yet is too slow to be of use. Ends when the body is sent,
    /// the client hangs up or the server stops.
    case trickle(bytesPerSecond: Int)
    /// Answers every GET, ranged or not, with the whole file as `206 Partial Content` and
    /// `Content-Range: bytes 0-(size-1)/size`, as a broken cache or proxy in front of a host does.
    case wholeBodyAsPartialContent
    /// Answers a GET for one satisfiable byte range with `206` for another range: the asked one
    /// moved to start `startShift` bytes later (earlier when negative) and end `endShift` bytes
    /// later (`-1000`: stops 1000 bytes short), kept inside the file. `Content-Range` describes
    /// exactly the bytes sent. A request without such a range is served normally.
    case shiftedRange(startShift: Int, endShift: Int)
    /// Serves the file gzip-compressed with `Content-Encoding: gzip` whatever `Accept-Encoding`
    /// says, the way S3 and CloudFront serve an object stored gzipped: the compressed bytes are
    /// the representation, so `Content-Length`, byte ranges (`206` still marked gzip) and the
    /// `ETag` (the file's tag with `-gzip` appended) all describe them. The bytes come from
    /// `gzip -c -n` run as a child process.
    case gzipEncoded
    /// Serves the whole file with chunked transfer coding and a `Content-Length: claimed` header
    /// beside it that disagrees with the body the chunks carry (a proxy that rewrote one of them).
    case misstatedLength(claimed: Int)
    /// Serves the whole file with two `Content-Length` lines: the true length, then `second`.
    case duplicateContentLength(second: Int)

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
    var random: SplitMix64

    mutating func draw(for path: String) -> Fault? {
        guard !faults.isEmpty, matches(path) else { return nil }
        let roll = Double(random.next() >> 11) / Double(1 << 53)
        guard roll < rate else { return nil }
        return faults[Int(random.next() % UInt64(faults.count))]
    }
}
