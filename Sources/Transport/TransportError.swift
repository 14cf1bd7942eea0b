import Foundation

/// A failed exchange. The message names the URL and, where there is one, the fix.
public struct TransportError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare against the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case httpStatus, network, timeout, cancelled, tooLarge, fileSystem, invalidRequest, invalidResponse
            case threadLimit
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The server answered with a status other than 2xx/304 (see ``TransportError/statusCode``).
        public static let httpStatus = Code(.httpStatus)
        /// The connection failed, was reset or ended early.
        public static let network = Code(.network)
        /// No progress within the stall timeout, or the request's own timeout ran out.
        public static let timeout = Code(.timeout)
        /// The caller's task was cancelled.
        public static let cancelled = Code(.cancelled)
        /// The body exceeded the size it was allowed.
        public static let tooLarge = Code(.tooLarge)
        /// Writing the body to disk failed (see ``TransportError/errno``; ENOSPC is a full disk).
        public static let fileSystem = Code(.fileSystem)
        /// The request could not be sent as given (bad URL, unsupported scheme, an option libcurl
        /// refused).
        public static let invalidRequest = Code(.invalidRequest)
        /// The server (or a proxy in between) sent a well-formed answer that does not answer the
        /// request: a `206` to a request without `Range`, a `Content-Range` other than the one
        /// asked for, a `304` to an unconditional request, a `Content-Length` the body disagrees
        /// with, a body in an encoding that cannot be decoded. The body is refused, never kept.
        public static let invalidResponse = Code(.invalidResponse)
        /// The transport could not start the thread that runs its transfers: the process is at
        /// its task limit (systemd's `TasksMax=`, a container's pids limit, `ulimit -u`).
        public static let threadLimit = Code(.threadLimit)

        public var description: String { base.rawValue }
    }

    /// What kind of failure this is.
    public var code: Code
    /// The readable explanation naming the URL and, where there is one, the fix; the ``description``.
    public var message: String
    /// The URL the failure concerns.
    public var url: URL?
    /// The HTTP status, for ``Code/httpStatus``, and for ``Code/invalidResponse`` the status refused.
    public var statusCode: Int?
    /// libcurl's CURLcode, kept exactly, when libcurl reported the failure.
    public var curlCode: Int?
    /// The errno of a failed file write.
    public var errno: Int32?
    /// Seconds the server asked us to wait (`Retry-After`), when it did.
    public var retryAfter: Double?
    /// A redirect the transfer stopped at, because the request carried credential headers: the
    /// transport follows it itself, with them on the request's own origin
    /// (``HTTPRequest/followed(to:)``) and without them elsewhere
    /// (``HTTPRequest/redirected(to:)``).
    package var redirectToOtherOrigin: (url: URL, redirect: HTTPRedirect)?
    /// Whether a response's status line had come when the exchange failed (a body cut short,
    /// a redirect to a scheme that is not followed): the server answered, so the failure is the
    /// resource's, not its origin's.
    package var answered = false

    /// An error from its parts, e.g. for an app's own ``Transport`` to throw.
    public init(
        code: Code, message: String, url: URL? = nil, statusCode: Int? = nil,
        curlCode: Int? = nil, errno: Int32? = nil, retryAfter: Double? = nil
    ) {
        self.code = code
        self.message = message
        self.url = url
        self.statusCode = statusCode
        self.curlCode = curlCode
        self.errno = errno
        self.retryAfter = retryAfter
    }

    public var description: String { message }

    /// Whether trying again may help: network faults, timeouts, invalid responses, and HTTP 408,
    /// 425, 429, 500, 502, 503 and 504.
    public var isTransient: Bool {
        switch code {
        case .network, .timeout: return true
        // An invalid response is refused at its headers, so a retry costs a request, not a body.
        // It is often one cache node or a stale proxy entry that a second request avoids, and for
        // a refused resume the retry is the plain GET that recovers (the partial bytes are gone).
        case .invalidResponse: return true
        case .httpStatus: return [408, 425, 429, 500, 502, 503, 504].contains(statusCode ?? 0)
        default: return false
        }
    }

    /// Whether the connection itself failed: nothing listens at the address (libcurl's
    /// `CURLE_COULDNT_CONNECT`, 7), or the host could not be resolved (6).
    public var failedToConnect: Bool {
        code == .network && (curlCode == 7 || curlCode == 6)
    }

    /// A refused answer: `what` says what was asked and what came back.
    static func invalidResponse(_ method: String, _ url: URL, _ what: String, statusCode: Int? = nil) -> TransportError
    {
        TransportError(
            code: .invalidResponse,
            message:
                "\(method) \(Redaction.url(url)) \(what); refusing the body (the server or a proxy in between is misbehaving)",
            url: url, statusCode: statusCode)
    }

    static func shutDown(_ url: URL) -> TransportError {
        TransportError(
            code: .cancelled, message: "request for \(Redaction.url(url)) was refused: the transport was shut down",
            url: url)
    }

    static func cancelled(_ url: URL) -> TransportError {
        TransportError(code: .cancelled, message: "request for \(Redaction.url(url)) was cancelled", url: url)
    }

    static func status(_ status: Int, url: URL, retryAfter: Double?) -> TransportError {
        let hint: String
        switch status {
        case 404: hint = "nothing is published at that URL; check it"
        case 401, 403:
            hint =
                "the server refused access; give credentials (an Authorization header, or a token in the URL's user part) that it accepts"
        case 407:
            hint =
                "the proxy refused access; give its credentials in the proxy variable (http_proxy=http://user:password@proxy:port)"
        case 429: hint = "the server is rate-limiting; try again later"
        default: hint = status >= 500 ? "the server failed; try again later" : "check the URL"
        }
        return TransportError(
            code: .httpStatus, message: "GET \(Redaction.url(url)) answered HTTP \(status): \(hint)",
            url: url, statusCode: status, retryAfter: retryAfter)
    }
}
