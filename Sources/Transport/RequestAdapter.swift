/// Rewrites a request before every attempt: URL, method, query parameters or headers.
///
/// It runs again on each retry, so a token it adds can be refreshed.
public protocol RequestAdapter: Sendable {
    func adapt(_ request: inout HTTPRequest) async throws
}

/// A ``RequestAdapter`` made from a closure.
public struct ClosureRequestAdapter: RequestAdapter {
    private let body: @Sendable (inout HTTPRequest) async throws -> Void

    public init(_ body: @escaping @Sendable (inout HTTPRequest) async throws -> Void) {
        self.body = body
    }

    public func adapt(_ request: inout HTTPRequest) async throws {
        try await body(&request)
    }
}
