/// Bytes moved so far for one transfer. `expected` is the full size when the server told it.
public struct TransferProgress: Sendable, Equatable {
    /// Body bytes on hand, counting bytes a resumed download already had.
    public var received: Int64
    /// The total body size, when known.
    public var expected: Int64?

    /// Progress of `received` bytes out of `expected` (nil when unknown).
    public init(received: Int64, expected: Int64?) {
        self.received = received
        self.expected = expected
    }
}

/// Called from the transport's I/O thread; keep it short and non-blocking.
public typealias ProgressHandler = @Sendable (TransferProgress) -> Void
