/// Rewrites a request before every attempt: URL, method, query parameters or headers.
///
/// It runs again on each retry, so a token it adds can be refreshed.
public protocol RequestAdapter: Sendable {
    /// Rewrites `request` in place before an attempt; throwing fails the request.
    func adapt(_ request: inout HTTPRequest) async throws
}

/// A ``RequestAdapter`` made from a closure.
public struct ClosureRequestAdapter: RequestAdapter {
    private let body: @Sendable (inout HTTPRequest) async throws -> Void

    /// An adapter that runs `body` on each request.
    public init(_ body: @escaping @Sendable (inout HTTPRequest) async throws -> Void) {
        self.body = body
    }

    /// Runs the closure on `request`.
    public func adapt(_ request: inout HTTPRequest) async throws {
        try await body(&request)
    }
}
