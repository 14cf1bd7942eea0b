import Foundation

/// What came back for one ``HTTPRequest``, after redirects and retries.
public struct HTTPResponse: Sendable {
    /// The final status code (after redirects): 200, 206 (to a `Range`) or 304 (to a conditional
    /// request) for a successful exchange; any status for a request that asked for every one
    /// (``HTTPRequest/returnsEveryStatus``).
    public var statusCode: Int
    /// Response headers of the final response, names lower-cased. A name sent on several lines
    /// holds their RFC 9110 §5.3 combination: the values in order, joined by `", "`
    /// (``HTTPHeaderField/combined(_:)``; `Set-Cookie` keeps its last line).
    public var headers: [String: String]
    /// Every header line of the final response, in order, repeated names included. Empty for a
    /// response built from a dictionary only.
    public var headerFields: [HTTPHeaderField]
    /// The body, for in-memory fetches; empty for downloads and 304s.
    public var body: Data
    /// The address that finally answered.
    public var url: URL
    /// Body bytes received by this call, across retries, after content decoding: what was kept
    /// in memory or written to the file.
    public var bytesReceived: Int64
    /// For downloads: the byte offset the final attempt resumed from (0 for a full download).
    public var resumedFrom: Int64
    /// For downloads: the size of the file on disk when the call returned.
    public var fileSize: Int64
    /// The redirects followed to get here, oldest first (empty when none was): a cache reuses
    /// the final response under the URL asked for only as long as each of them may be reused
    /// (RFC 9111 §4).
    public var redirects: [HTTPRedirect]

    /// A response from its parts (default: no headers, an empty body, every count 0), e.g. for an
    /// app's own ``Transport`` to return.
    public init(
        statusCode: Int, headers: [String: String] = [:], body: Data = Data(), url: URL,
        bytesReceived: Int64 = 0, resumedFrom: Int64 = 0, fileSize: Int64 = 0
    ) {
        self.statusCode = statusCode
        self.headers = headers
        self.headerFields = []
        self.body = body
        self.url = url
        self.bytesReceived = bytesReceived
        self.resumedFrom = resumedFrom
        self.fileSize = fileSize
        self.redirects = []
    }

    /// A response whose headers are `fields`, line by line; ``headers`` is their combination.
    public init(
        statusCode: Int, headerFields: [HTTPHeaderField], body: Data = Data(), url: URL,
        bytesReceived: Int64 = 0, resumedFrom: Int64 = 0, fileSize: Int64 = 0, redirects: [HTTPRedirect] = []
    ) {
        self.init(
            statusCode: statusCode, headers: HTTPHeaderField.combined(headerFields), body: body, url: url,
            bytesReceived: bytesReceived, resumedFrom: resumedFrom, fileSize: fileSize)
        self.headerFields = headerFields
        self.redirects = redirects
    }

    /// The entity tag the server gave, if any.
    public var etag: String? { headers["etag"] }
    /// True for `304 Not Modified`: the conditional request found the resource unchanged.
    public var isNotModified: Bool { statusCode == 304 }
}

/// A redirect the transport followed: its status (301, 302, 303, 307, 308) and header lines.
public struct HTTPRedirect: Sendable, Equatable {
    /// The redirect's status code.
    public var status: Int
    /// Its header lines, in order (`Location`, `Cache-Control`…).
    public var headerFields: [HTTPHeaderField]
    /// The lines combined by name (RFC 9110 §5.3).
    public var headers: [String: String] { HTTPHeaderField.combined(headerFields) }

    /// A redirect from its status and header lines.
    public init(status: Int, headerFields: [HTTPHeaderField]) {
        self.status = status
        self.headerFields = headerFields
    }
}
