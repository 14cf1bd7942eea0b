import Foundation

/// One HTTP request as the transport will send it. A ``RequestAdapter`` may rewrite any field
/// before each attempt, for example to add an auth token for a private repository.
public struct HTTPRequest: Sendable, Equatable {
    /// The address to fetch. ``queryItems`` are appended to it when the request is sent.
    public var url: URL
    /// The HTTP method. Default `GET`.
    public var method: String
    /// Request headers. Names are matched case-insensitively by servers; keep one spelling per name.
    public var headers: [String: String]
    /// Query parameters appended to ``url``. Default none.
    public var queryItems: [URLQueryItem]
    /// The longest the whole exchange may take, or `nil` for no limit (large downloads rely on
    /// the stall timeout instead). Default `nil`: the transport's configuration decides.
    public var timeout: Duration?
    /// Whether a final answer other than 2xx or 304 comes back as a response, body and all,
    /// instead of ``TransportError/Code/httpStatus``: a cache stores a 404 or serves a 503's
    /// page. Transient statuses (``TransportError/isTransient``) are still retried first; any
    /// 2xx is returned (a `204` carries no body). Default false.
    public var returnsEveryStatus = false
    /// The retry policy for this request, or `nil` for the transport's. Default `nil`. (Write
    /// `RetryPolicy.none` for no retries: `.none` alone is the optional's `nil`.)
    public var retry: RetryPolicy?
    /// The most body bytes ``Transport/data(for:)`` takes for this request (a file's declared
    /// size), below the transport's own limit; a longer body fails as
    /// ``TransportError/Code/tooLarge`` as soon as it passes it. Default `nil`: the transport's.
    public var maxBodyBytes: Int64?

    /// A request for `url`: by default a `GET` with no extra headers or query items and the
    /// transport's own time limit.
    public init(
        url: URL, method: String = "GET", headers: [String: String] = [:],
        queryItems: [URLQueryItem] = [], timeout: Duration? = nil
    ) {
        self.url = url
        self.method = method
        self.headers = headers
        self.queryItems = queryItems
        self.timeout = timeout
    }

    /// Whether a header named `name` carries a credential that goes only to the origin it was
    /// given for: `Authorization`, `Cookie`, `Proxy-Authorization`, or a name `Redaction` takes
    /// for a secret's (`X-Api-Key`, `Private-Token`, `X-Auth-Token`).
    package static func isCredentialHeader(_ name: String) -> Bool {
        let lowered = name.lowercased()
        return lowered == "cookie" || lowered == "proxy-authorization" || Redaction.isSecretName(lowered.utf8)
    }

    /// This request sent to `url`, where a redirect to another origin leads: without its
    /// credential headers (libcurl itself drops only `Authorization` and `Cookie` there, and
    /// sends `X-Api-Key` on), everything else kept.
    package func redirected(to url: URL) -> HTTPRequest {
        var next = self
        next.url = url
        next.queryItems = [] // the Location is the whole URL
        next.headers = headers.filter { !Self.isCredentialHeader($0.key) }
        return next
    }

    /// ``url`` with ``queryItems`` appended: the address actually sent.
    public var resolvedURL: URL {
        guard !queryItems.isEmpty, var parts = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
            return url
        }
        parts.queryItems = (parts.queryItems ?? []) + queryItems
        return parts.url ?? url
    }
}
