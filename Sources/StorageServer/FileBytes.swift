import Foundation

/// A byte range of an open file, read in large chunks as the socket drains, optionally cut short
/// by a fault.
///
/// Nothing is read until the connection asks for it, so a 200 MB file costs one chunk of memory.
struct FileBytes {
    /// How the body ends once ``FileBytes/cut`` bytes have been sent.
    enum Ending: Sendable {
        /// The body is complete.
        case complete
        /// Close the connection mid-body.
        case truncate
        /// Close the connection with a TCP reset (``ConnectionSocket/armReset()``).
        case reset
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

    /// Sends the bytes up to the cut to `socket` (as chunks of `Transfer-Encoding: chunked` when
    /// `chunked`), then ends as ``ending`` says: a body that does not end complete throws, and
    /// the connection then closes.
    func stream(to socket: ConnectionSocket, chunked: Bool) throws(FaultEnded) {
        var offset = range.lowerBound
        let end = range.lowerBound + cut
        var lastPacedChunk: ContinuousClock.Instant?
        while offset < end {
            guard !socket.isStopping else { throw .stopped }
            var count = Swift.min(chunkSize, end - offset)
            if let pace = bytesPerSecond {
                // One small chunk a second: the client sees a live but useless link.
                if let last = lastPacedChunk,
                    !socket.sleep(for: ContinuousClock.now.duration(to: last.advanced(by: .seconds(1))))
                {
                    throw .stopped
                }
                lastPacedChunk = ContinuousClock.now
                count = Swift.min(count, pace)
            }
            let chunk: Data
            do {
                chunk = try file.read(at: offset, count: count)
            } catch {
                throw .readFailed(error.errno)
            }
            // A file that shrank while being served must not end in a short, "complete" body.
            guard !chunk.isEmpty else { throw .fileShrank }
            offset += chunk.count
            var framed = chunk
            if chunked {
                framed = Data((String(chunk.count, radix: 16) + "\r\n").utf8) + chunk + Data("\r\n".utf8)
            }
            guard socket.send(framed) else { throw .clientGone }
        }
        switch ending {
        case .complete:
            if chunked, !socket.send(Data("0\r\n\r\n".utf8)) { throw .clientGone }
        case .truncate:
            throw .truncated
        case .reset:
            socket.armReset()
            throw .reset
        case .stall(let limit, let isReleased):
            // Polled, so that clearFaults() ends a stall without extra plumbing, and stop() too.
            _ = ConnectionSocket.sleep(for: limit) { socket.isStopping || isReleased() }
            throw .stalled
        }
    }

    /// Why a body stopped early; the connection closes on any of them.
    enum FaultEnded: Error {
        case truncated
        case reset
        case stalled
        case fileShrank
        case readFailed(Int32)
        case clientGone
        case stopped
    }
}
