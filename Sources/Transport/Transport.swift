/// The one HTTP layer: everything content-sync fetches goes through a `Transport`.
///
/// ``CurlTransport`` is the default. An app that already has a network stack (one that shows a
/// captcha, say) can implement this protocol and hand over bytes it fetched itself.
///
/// Every call returns only responses that answer the request as sent: 200; 206 to a request with
/// a single `Range`, from exactly the asked start; 304 to a request with `If-None-Match` or
/// `If-Modified-Since`; bodies content-decoded and as long as their `Content-Length`. They throw
/// ``TransportError`` for anything else, after whatever retries the implementation makes. A
/// request with ``HTTPRequest/returnsEveryStatus`` gets every other final status back as a
/// response too, body included (the item cache stores a 404 and serves a 503's page); a
/// transport that throws ``TransportError/Code/httpStatus`` for it instead still works, without
/// those answers.
public protocol Transport: Sendable {
    /// Fetches a small resource into memory (status files, change lists).
    func data(for request: HTTPRequest) async throws -> HTTPResponse

    /// Streams a body to the file at `path`, creating it. With ``DownloadOptions/resumeETag`` set
    /// and a partial file present, only the missing tail is fetched.
    func download(_ request: HTTPRequest, to path: String, options: DownloadOptions) async throws -> HTTPResponse

    /// Streams a body into the open, writable file `descriptor`, which stays open and keeps
    /// whatever name it has (none, for an `O_TMPFILE` file). Resuming works as for
    /// ``download(_:to:options:)``, from what the file already holds.
    ///
    /// The default implementation goes through ``download(_:to:options:)`` with the
    /// descriptor's `/proc/self/fd` path, so a transport need implement only that.
    func download(_ request: HTTPRequest, into descriptor: Int32, options: DownloadOptions) async throws -> HTTPResponse
}

extension Transport {
    /// Downloads into `descriptor` through its `/proc/self/fd` path: the default for transports that
    /// implement only ``download(_:to:options:)``.
    public func download(_ request: HTTPRequest, into descriptor: Int32, options: DownloadOptions) async throws
        -> HTTPResponse
    {
        try await download(request, to: "/proc/self/fd/\(descriptor)", options: options)
    }
}
