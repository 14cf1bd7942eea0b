/// How ``Transport/download(_:to:options:)`` treats the destination file.
public struct DownloadOptions: Sendable {
    /// When the destination already holds a partial body, ask only for the rest with a `Range`
    /// request guarded by `If-Range: resumeETag`. Without an ETag nothing proves the partial bytes
    /// belong to the same version, so the download starts again. A server that answers the resume
    /// with other bytes (another start, a shorter range, an encoded range) has the partial body
    /// dropped and the file fetched whole. Default `nil`.
    public var resumeETag: String?
    /// The whole length the answer the partial body came from declared (its `Content-Length`,
    /// or a `206`'s complete length), when the caller kept it with ``resumeETag``. A `416` is
    /// believed to say the partial body is whole only when it names this length (without one, a
    /// half file could pass: the body is fetched anew), and a `206` whose complete length differs
    /// is refused. Default `nil`.
    public var resumeLength: Int64?
    /// Refuse a body larger than this many bytes (a caller that knows the size holds the server to it).
    /// It counts decoded bytes, the ones the file gets, whatever the content encoding on the
    /// wire. Default `nil`: no limit.
    public var maxBytes: Int64?
    /// Progress callback. Default `nil`.
    public var progress: ProgressHandler?
    /// Called once, on the transport's I/O thread, when a successful response's body starts:
    /// the status and the lower-cased headers. Keep it short. Default `nil`.
    public var onResponseStart: (@Sendable (_ statusCode: Int, _ headers: [String: String]) -> Void)?
    /// Called on the transport's I/O thread with each chunk of a successful body once it is
    /// written to the file, so that a caller can hash while downloading instead of reading the
    /// file again. Chunks of every attempt are passed, retries included: trust what it saw only
    /// when the response was not resumed and it saw exactly the file's size. Default `nil`.
    public var onBodyChunk: (@Sendable (UnsafeRawBufferPointer) -> Void)?
    /// Called on the transport's I/O thread before each chunk of a successful body is written,
    /// with the size the file will have with it (from the resumed offset; an attempt that starts
    /// over counts from 0 again): false refuses the body as too large
    /// (``TransportError/Code/tooLarge``). For a limit several downloads share, which
    /// ``maxBytes`` (one download's) cannot hold: each would take all that is left. Keep it
    /// short. Default `nil`.
    public var admitsSize: (@Sendable (Int64) -> Bool)?
    /// For a download into a descriptor: write the body over the file's bytes from its start and
    /// cut the file to the body's length once it is all there, instead of emptying the file
    /// first. A file being reused keeps its blocks (freeing and allocating them again costs a
    /// discard on some disks); until the download returns its tail may hold old bytes. Never
    /// resumes. Transports that do not know it empty the file as for any fresh download, which
    /// gives the same file. Default `false`.
    public var overwrite = false

    /// Options with these fields; ``onResponseStart`` and ``onBodyChunk`` start `nil`.
    public init(
        resumeETag: String? = nil, resumeLength: Int64? = nil, maxBytes: Int64? = nil, progress: ProgressHandler? = nil
    ) {
        self.resumeETag = resumeETag
        self.resumeLength = resumeLength
        self.maxBytes = maxBytes
        self.progress = progress
    }
}
