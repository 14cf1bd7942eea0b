internal import FlyingSocks
import Foundation

/// A byte range of an open file, read in large chunks as the socket drains, optionally cut short
/// by a fault.
///
/// Nothing is read until the connection asks for it, so a 200 MB file costs one chunk of memory.
struct FileBytes: AsyncBufferedSequence {
    typealias Element = UInt8

    /// How the body ends once ``FileBytes/cut`` bytes have been sent.
    enum Ending: Sendable {
        /// The body is complete.
        case complete
        /// Throw, so that FlyingFox closes the connection mid-body.
        case truncate
        /// Arm a reset of the connection (``ConnectionReset``), then throw, so that FlyingFox's
        /// close sends `RST`.
        case reset(ConnectionReset.Ends)
        /// Send nothing until `limit` passes or `isReleased()` turns true, then throw.
        case stall(limit: Duration, isReleased: @Sendable () -> Bool)
    }

    let file: OpenedFile
    let range: Range<Int>
    let chunkSize: Int
    /// Bytes sent before `ending` applies; equal to `range.count` for a complete body.
    let cut: Int
    let ending: Ending
    /// When set, at most this many bytes go out per second (a ``Fault/trickle(bytesPerSecond:)``).
    let bytesPerSecond: Int?

    /// The whole of `range`, with no fault.
    init(file: OpenedFile, range: Range<Int>, chunkSize: Int) {
        self.init(file: file, range: range, chunkSize: chunkSize, cut: range.count, ending: .complete)
    }

    init(file: OpenedFile, range: Range<Int>, chunkSize: Int, cut: Int, ending: Ending, bytesPerSecond: Int? = nil) {
        self.file = file
        self.range = range
        self.chunkSize = Swift.max(1, chunkSize)
        self.cut = Swift.min(cut, range.count)
        self.ending = cut >= range.count ? .complete : ending
        self.bytesPerSecond = bytesPerSecond.map { Swift.max(1, $0) }
    }

    func makeAsyncIterator() -> Iterator {
        Iterator(bytes: self)
    }

    struct Iterator: AsyncBufferedIteratorProtocol {
        private let bytes: FileBytes
        private var offset: Int
        /// When the previous paced chunk went out.
        private var lastPacedChunk: ContinuousClock.Instant?

        init(bytes: FileBytes) {
            self.bytes = bytes
            self.offset = bytes.range.lowerBound
        }

        mutating func next() async throws -> UInt8? {
            try await nextBuffer(suggested: 1)?.first
        }

        mutating func nextBuffer(suggested count: Int) async throws -> Data? {
            let end = bytes.range.lowerBound + bytes.cut
            if offset < end {
                var count = Swift.min(bytes.chunkSize, end - offset)
                if let pace = bytes.bytesPerSecond {
                    // One small chunk a second: the client sees a live but useless link. Server
                    // shutdown cancels the sleep; a client that hung up fails the next write.
                    if let last = lastPacedChunk {
                        try await Task.sleep(until: last.advanced(by: .seconds(1)), clock: .continuous)
                    }
                    lastPacedChunk = ContinuousClock.now
                    count = Swift.min(count, pace)
                }
                let chunk = try bytes.file.read(at: offset, count: count)
                // A file that shrank while being served must not end in a short, "complete" body.
                guard !chunk.isEmpty else { throw FaultEnded.fileShrank }
                offset += chunk.count
                return chunk
            }
            switch bytes.ending {
            case .complete:
                return nil
            case .truncate:
                throw FaultEnded.truncated
            case .reset(let ends):
                ConnectionReset.arm(ends)
                throw FaultEnded.reset
            case .stall(let limit, let isReleased):
                let deadline = ContinuousClock.now.advanced(by: limit)
                // Polling keeps the stall cancellable by clearFaults() without extra plumbing;
                // server shutdown cancels the sleep directly.
                while ContinuousClock.now < deadline, !isReleased() {
                    try await Task.sleep(for: .milliseconds(50))
                }
                throw FaultEnded.stalled
            }
        }
    }

    /// Why a body stopped early; FlyingFox closes the connection on any error from the body.
    enum FaultEnded: Error {
        case truncated
        case reset
        case stalled
        case fileShrank
    }
}
