/// One request as the server saw and answered it, for tests to assert on.
public struct RequestRecord: Sendable, Hashable {
    /// The request method, such as `GET` or `HEAD`.
    public var method: String
    /// The percent-decoded path, such as `/v2/a b.zip`. A path refused as unsafe is logged
    /// decoded as far as possible.
    public var path: String
    /// Every request header, keyed by lowercased name.
    public var headers: [String: String]
    /// The status sent.
    public var status: Int
    /// Body bytes the response carried: the `Content-Length` of a full or partial answer, the cut
    /// point of a truncated or stalled one, 0 for HEAD, 304, 404 and 416.
    public var bodyBytes: Int
    /// The fault applied to this request, if any.
    public var fault: Fault?

    /// The `Range` header, if sent.
    public var range: String? { headers["range"] }
    /// The `If-None-Match` header, if sent.
    public var ifNoneMatch: String? { headers["if-none-match"] }
    /// The `If-Range` header, if sent.
    public var ifRange: String? { headers["if-range"] }

    /// The value of header `name`, matched case-insensitively.
    public func header(_ name: String) -> String? {
        headers[name.lowercased()]
    }
}
