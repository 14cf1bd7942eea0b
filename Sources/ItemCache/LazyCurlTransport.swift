import Synchronization
import Transport

/// The `CurlTransport` a loader opens for itself, started on its first HTTP request: a loader
/// that never fetches over HTTP (`file` URLs, custom fetchers, images saved under an id, an
/// offline command) never loads libcurl and its TLS library (about 3 MiB of memory).
final class LazyCurlTransport: Transport, Sendable {
    private let started = Mutex<CurlTransport?>(nil)

    /// The transport, started now if it was not.
    private func transport() throws(TransportError) -> CurlTransport {
        try started.withLock { (current: inout CurlTransport?) throws(TransportError) -> CurlTransport in
            if let current { return current }
            let made = try CurlTransport()
            current = made
            return made
        }
    }

    func data(for request: HTTPRequest) async throws -> HTTPResponse {
        try await transport().data(for: request)
    }

    func download(_ request: HTTPRequest, to path: String, options: DownloadOptions) async throws -> HTTPResponse {
        try await transport().download(request, to: path, options: options)
    }

    func download(_ request: HTTPRequest, into descriptor: Int32, options: DownloadOptions) async throws
        -> HTTPResponse
    {
        try await transport().download(request, into: descriptor, options: options)
    }

    /// Whether the transport was started (tests).
    var isStarted: Bool { started.withLock { $0 != nil } }

    /// Ends the transport, if it was started.
    func shutdown() async {
        await started.withLock { $0 }?.shutdown()
    }
}
