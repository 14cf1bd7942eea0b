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
            || isIdentityHeader(lowered)
    }

    /// Whether a header (`lowered`) says whom the request is for, as an authenticating proxy or
    /// a gateway writes it (`Remote-User`, `X-Forwarded-User`, `X-Ms-Client-Principal`,
    /// `X-Ssl-Client-Cert`, `X-Identity`): a backend answers each user with their own data, so it
    /// is a credential to the cache and to a redirect to another origin.
    static func isIdentityHeader(_ lowered: String) -> Bool {
        lowered == "remote-user" || lowered.hasSuffix("-user") || lowered.contains("principal")
            || lowered.contains("identity") || lowered.hasSuffix("-cert")
    }

    /// The headers libcurl writes for each request to frame it, lower-cased: one given as well
    /// would contradict its own (`Content-Length: 5` on a GET stalls the connection, a second
    /// `Host` sends the request to another site than the URL's, which keys and origins follow).
    package static let framingHeaderNames: Set<String> = [
        "host", "content-length", "transfer-encoding", "connection", "te", "upgrade", "expect",
    ]

    /// The punctuation an HTTP token may hold beside letters and digits (RFC 9110 §5.6.2).
    private static let tokenPunctuation = Set("!#$%&'*+-.^_`|~".utf8)

    /// What is wrong with a request header `name: value`, or nil: the name must be an HTTP
    /// token and not a framing header (``framingHeaderNames``), and the value may hold no control
    /// character but the tab (RFC 9110 §5.5: a line break would add headers of its own, a NUL
    /// cut the line, and proxies read the others each their own way). The value is never quoted:
    /// it may be a secret. The transport refuses such a request, and the command-line tools and
    /// the config file check with it first, to name the flag or line.
    package static func headerProblem(name: String, value: String) -> String? {
        // Asked of every header of every request: the token's punctuation is a set made once.
        if name.isEmpty
            || !name.utf8.allSatisfy({ $0 < 0x80 && (isalnum(Int32($0)) != 0 || tokenPunctuation.contains($0)) })
        {
            return
                "'\(name.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : String($0) }.joined())' is not a header name (letters, digits and - are usual)"
        }
        if framingHeaderNames.contains(name.lowercased()) {
            return
                "\(name) is written by the transport itself for each request, to frame it; give only headers of your own, such as Authorization"
        }
        if value.unicodeScalars.contains(where: { ($0.value < 0x20 && $0 != "\t") || $0.value == 0x7F }) {
            return
                "the value of \(name) holds a line break, NUL or another control character; a header value must be one line of text"
        }
        return nil
    }

    /// This request sent to `url`, where a redirect within its own origin leads: every header
    /// kept.
    package func followed(to url: URL) -> HTTPRequest {
        var next = self
        next.url = url
        next.queryItems = [] // the Location is the whole URL
        return next
    }

    /// This request sent to `url`, where a redirect to another origin leads: without its
    /// credential headers (libcurl itself drops only `Authorization` and `Cookie` there, and
    /// sends `X-Api-Key` on), everything else kept.
    package func redirected(to url: URL) -> HTTPRequest {
        var next = followed(to: url)
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
