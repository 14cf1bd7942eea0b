/// Applies a ``RequestAdapter`` in front of any ``Transport``, for transports that do not take
/// one themselves (an app's own network stack).
public struct AdaptingTransport: Transport {
    public let base: any Transport
    public let adapter: any RequestAdapter

    public init(base: any Transport, adapter: any RequestAdapter) {
        self.base = base
        self.adapter = adapter
    }

    public func data(for request: HTTPRequest) async throws -> HTTPResponse {
        var request = request
        try await adapter.adapt(&request)
        return try await base.data(for: request)
    }

    public func download(_ request: HTTPRequest, to path: String, options: DownloadOptions) async throws -> HTTPResponse {
        var request = request
        try await adapter.adapt(&request)
        return try await base.download(request, to: path, options: options)
    }

    public func download(_ request: HTTPRequest, into descriptor: Int32, options: DownloadOptions) async throws -> HTTPResponse {
        var request = request
        try await adapter.adapt(&request)
        return try await base.download(request, into: descriptor, options: options)
    }
}
