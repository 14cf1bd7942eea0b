/// Applies a ``RequestAdapter`` in front of any ``Transport``, for transports that do not take
/// one themselves (an app's own network stack).
public struct AdaptingTransport: Transport {
    /// The transport that sends the adapted requests.
    public let base: any Transport
    /// Rewrites each request before ``base`` sees it.
    public let adapter: any RequestAdapter

    /// Wraps `base` so that `adapter` rewrites every request first.
    public init(base: any Transport, adapter: any RequestAdapter) {
        self.base = base
        self.adapter = adapter
    }

    /// Adapts `request` once, then fetches it into memory through ``base``; retries inside
    /// ``base`` reuse the adapted request.
    public func data(for request: HTTPRequest) async throws -> HTTPResponse {
        var request = request
        try await adapter.adapt(&request)
        return try await base.data(for: request)
    }

    /// Adapts `request` once, then downloads it to `path` through ``base``.
    public func download(_ request: HTTPRequest, to path: String, options: DownloadOptions) async throws -> HTTPResponse
    {
        var request = request
        try await adapter.adapt(&request)
        return try await base.download(request, to: path, options: options)
    }

    /// Adapts `request` once, then downloads it into `descriptor` through ``base``.
    public func download(_ request: HTTPRequest, into descriptor: Int32, options: DownloadOptions) async throws
        -> HTTPResponse
    {
        var request = request
        try await adapter.adapt(&request)
        return try await base.download(request, into: descriptor, options: options)
    }
}
