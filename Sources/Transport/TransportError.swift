import Foundation

/// A failed exchange. The message names the URL and, where there is one, the fix.
public struct TransportError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare against the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case httpStatus, network, timeout, cancelled, tooLarge, fileSystem, invalidRequest
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
        /// The request could not be sent as given (bad URL, unsupported scheme).
        public static let invalidRequest = Code(.invalidRequest)

        public var description: String { base.rawValue }
    }

    public var code: Code
    public var message: String
    /// The URL the failure concerns.
    public var url: URL?
    /// The HTTP status, for ``Code/httpStatus``.
    public var statusCode: Int?
    /// libcurl's CURLcode, kept exactly, when libcurl reported the failure.
    public var curlCode: Int?
    /// The errno of a failed file write.
    public var errno: Int32?
    /// Seconds the server asked us to wait (`Retry-After`), when it did.
    public var retryAfter: Double?

    public init(code: Code, message: String, url: URL? = nil, statusCode: Int? = nil,
                curlCode: Int? = nil, errno: Int32? = nil, retryAfter: Double? = nil) {
        self.code = code
        self.message = message
        self.url = url
        self.statusCode = statusCode
        self.curlCode = curlCode
        self.errno = errno
        self.retryAfter = retryAfter
    }

    public var description: String { message }

    /// Whether trying again may help: network faults, timeouts, 408, 429 and 5xx.
    public var isTransient: Bool {
        switch code {
        case .network, .timeout: return true
        case .httpStatus: return [408, 425, 429, 500, 502, 503, 504].contains(statusCode ?? 0)
        default: return false
        }
    }

    static func cancelled(_ url: URL) -> TransportError {
        TransportError(code: .cancelled, message: "request for \(url.absoluteString) was cancelled", url: url)
    }

    static func status(_ status: Int, url: URL, retryAfter: Double?) -> TransportError {
        let hint: String
        switch status {
        case 404: hint = "the file is not published there; check the base URL and that the storage was uploaded completely"
        case 401, 403: hint = "the server refused access; add credentials with a request adapter"
        case 429: hint = "the server is rate-limiting; try again later"
        default: hint = status >= 500 ? "the server failed; try again later" : "check the URL"
        }
        return TransportError(code: .httpStatus, message: "GET \(url.absoluteString) answered HTTP \(status): \(hint)",
                              url: url, statusCode: status, retryAfter: retryAfter)
    }
}
