/// What a response must be to answer one request, and the checks that hold a response to it.
///
/// Built from the request exactly as sent (after the ``RequestAdapter`` ran, with the resume's
/// `Range` and `If-Range` added). ``checkHead(status:headers:contentLengths:)`` runs when the
/// response's head is complete, before any body byte is kept; ``checkBody(status:headers:wireBytes:)``
/// runs when the body has ended. Each returns what was wrong, for the error message, or `nil`.
///
/// The rules (RFC 9110 §15.3, §14.4, §8.6, §15.4.5):
/// - `200` answers a GET or HEAD, ranged or not (a server may ignore `Range`; a failed `If-Range`
///   sends the whole file).
/// - `206` answers only a request with a single `Range`, with a `Content-Range` that starts where
///   the request asked and, for an open-ended `bytes=N-`, runs to the end of the representation;
///   and it must be `identity`-encoded: a range of compressed bytes can neither be decoded on its
///   own nor appended to decoded bytes. To a request with `If-Range: <entity tag>`, a 206 that
///   names another entity tag is a range of another representation (§13.1.5): its bytes cannot
///   continue the ones held.
/// - `304` answers only a request with `If-None-Match` or `If-Modified-Since`.
/// - Any other 2xx (`204 No Content`, …) carries no file.
/// - `Content-Length`, when sent, names one length, and the body bytes on the wire (before content
///   decoding) match it, and match the `Content-Range` of a `206`.
package struct ResponseExpectation: Sendable, Equatable {
    /// One byte range as a `Range` header or a `Content-Range` states it.
    struct ByteSpan: Sendable, Equatable {
        var first: Int64
        /// The last byte, or `nil` for an open-ended request (`bytes=N-`).
        var last: Int64?
    }

    /// The method, upper-cased.
    var method: String
    /// The `Range` header as sent, if any.
    var rangeHeader: String?
    /// The single range `rangeHeader` asks for; `nil` when it asks for several or a suffix.
    var range: ByteSpan?
    /// The request carried `If-None-Match` or `If-Modified-Since`.
    var isConditional: Bool
    /// The entity tag the request's `If-Range` holds (a resume's); nil without one, or for a date.
    var ifRangeTag: String?
    /// The caller takes any status (``HTTPRequest/returnsEveryStatus``): a 2xx other than 200
    /// or 206 (a `204`, a `203`) is an answer too.
    var acceptsAnyStatus = false

    /// The expectation for a request with these headers (names in any case).
    init(method: String, headers: [String: String], acceptsAnyStatus: Bool = false) {
        self.acceptsAnyStatus = acceptsAnyStatus
        self.method = method.uppercased()
        var rangeHeader: String?
        var isConditional = false
        var ifRange: String?
        for (name, value) in headers {
            switch name.lowercased() {
            case "range": rangeHeader = value
            case "if-none-match", "if-modified-since": isConditional = true
            case "if-range": ifRange = value
            default: break
            }
        }
        // An entity tag (quoted, or weak), not a date.
        self.ifRangeTag = ifRange.flatMap { $0.hasPrefix("\"") || $0.hasPrefix("W/") ? $0 : nil }
        self.rangeHeader = rangeHeader
        self.range = rangeHeader.flatMap(Self.parseRange)
        self.isConditional = isConditional
    }

    /// GET and HEAD fetch a file: a 2xx other than 200 or 206 cannot answer them.
    private var isFetch: Bool { method == "GET" || method == "HEAD" }

    // MARK: - Checks

    /// Checks the status and head of a final response (2xx or 304). `contentLengths` holds every
    /// `Content-Length` value sent, in order (a repeated header is a separate entry).
    func checkHead(status: Int, headers: [String: String], contentLengths: [String]) -> String? {
        if contentLengths.count > 0, Self.contentLength(contentLengths) == nil {
            let shown = contentLengths.map { "\"\($0)\"" }.joined(separator: " and ")
            return "answered \(Self.describe(status)) with Content-Length \(shown), which is not one length"
        }
        switch status {
        case 304:
            guard isConditional else {
                return "answered 304 Not Modified to a request without If-None-Match or If-Modified-Since"
            }
        case 206:
            return checkPartial(headers: headers, contentLength: Self.contentLength(contentLengths))
        case 200:
            break
        default:
            if isFetch, !acceptsAnyStatus, (200..<300).contains(status) {
                return "answered \(Self.describe(status)), which carries no file"
            }
        }
        return nil
    }

    private func checkPartial(headers: [String: String], contentLength: Int64?) -> String? {
        guard let rangeHeader else {
            return "answered 206 Partial Content to a request without Range"
        }
        if let coding = Self.nonIdentityEncoding(headers) {
            return "answered Range: \(rangeHeader) with 206 Partial Content in Content-Encoding: \(coding); "
                + "a range of encoded bytes can neither be decoded alone nor appended to decoded ones"
        }
        guard let asked = range else {
            return
                "answered Range: \(rangeHeader) with 206 Partial Content; only a single range from a known start is accepted"
        }
        guard let contentRange = headers["content-range"], let sent = Self.parseContentRange(contentRange) else {
            let shown = headers["content-range"].map { "Content-Range: \($0)" } ?? "no Content-Range"
            return "answered Range: \(rangeHeader) with 206 Partial Content and \(shown)"
        }
        let mismatch = "answered Range: \(rangeHeader) with 206 Partial Content for Content-Range: \(contentRange)"
        if let ifRangeTag, let tag = headers["etag"], tag != ifRangeTag {
            return mismatch + " of ETag \(tag), not the If-Range \(ifRangeTag) the bytes held belong to"
        }
        guard sent.span.first == asked.first else { return mismatch + ", which starts elsewhere" }
        if let last = asked.last {
            // A closed range may come back shorter only where the representation ends.
            let end = sent.total.map { min(last, $0 - 1) } ?? last
            guard sent.span.last == end else { return mismatch + ", which ends elsewhere" }
        } else {
            guard let total = sent.total, sent.span.last == total - 1 else {
                return mismatch + ", which does not run to the end of the file"
            }
        }
        if let contentLength, let last = sent.span.last, contentLength != last - sent.span.first + 1 {
            return mismatch + " and Content-Length: \(contentLength), which disagree"
        }
        return nil
    }

    /// Checks the body once it has ended: `wireBytes` is the count on the wire, after chunked
    /// framing and before content decoding (`CURLINFO_SIZE_DOWNLOAD_T`).
    func checkBody(status: Int, headers: [String: String], contentLengths: [String], wireBytes: Int64) -> String? {
        // A HEAD or 304 states the length (a 204 must send none, RFC 9110 §8.6; one that
        // does is not held to it: nothing follows the head) the body would have had, and sends none.
        guard method != "HEAD", status != 304, status != 204 else { return nil }
        if let length = Self.contentLength(contentLengths), length != wireBytes {
            return "sent \(wireBytes) body bytes under Content-Length: \(length)"
        }
        if status == 206, let contentRange = headers["content-range"], let sent = Self.parseContentRange(contentRange),
            let last = sent.span.last, last - sent.span.first + 1 != wireBytes
        {
            return "sent \(wireBytes) body bytes under Content-Range: \(contentRange)"
        }
        return nil
    }

    // MARK: - Parsing

    /// `bytes=N-` or `bytes=N-M` (RFC 9110 §14.1.2); anything else, including several ranges or a
    /// suffix range, is `nil`.
    static func parseRange(_ value: String) -> ByteSpan? {
        let trimmed = value.trimmingHTTPWhitespace()
        guard trimmed.lowercased().hasPrefix("bytes=") else { return nil }
        let spec = trimmed.dropFirst("bytes=".count).trimmingHTTPWhitespace()
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return nil }
        guard let first = position(spec[..<dash]) else { return nil }
        let rest = spec[spec.index(after: dash)...]
        if rest.isEmpty { return ByteSpan(first: first, last: nil) }
        guard let last = position(rest), last >= first else { return nil }
        return ByteSpan(first: first, last: last)
    }

    /// The complete length a `Content-Range: bytes first-last/total` states (nil for `*`, a
    /// missing header or anything malformed): for a caller that fetches ranges of a file whose
    /// size it knows.
    package static func completeLength(ofContentRange value: String?) -> Int64? {
        value.flatMap(parseContentRange)?.total
    }

    /// The first and last byte and the complete length a `Content-Range: bytes first-last/total`
    /// states (nil for a missing header or anything malformed; `total` nil for `*`): for a caller
    /// that must know an answer is exactly the range it asked before it takes any of its bytes.
    package static func span(ofContentRange value: String?) -> (first: Int64, last: Int64, total: Int64?)? {
        guard let (span, total) = value.flatMap(parseContentRange), let last = span.last else { return nil }
        return (span.first, last, total)
    }

    /// `bytes first-last/total` or `bytes first-last/*` (RFC 9110 §14.4); `nil` otherwise,
    /// including the `bytes */total` of a 416.
    static func parseContentRange(_ value: String) -> (span: ByteSpan, total: Int64?)? {
        let trimmed = value.trimmingHTTPWhitespace()
        guard trimmed.lowercased().hasPrefix("bytes ") else { return nil }
        let spec = trimmed.dropFirst("bytes ".count).trimmingHTTPWhitespace()
        guard let slash = spec.firstIndex(of: "/"), let dash = spec[..<slash].firstIndex(of: "-"),
            let first = position(spec[..<dash]), let last = position(spec[spec.index(after: dash)..<slash]),
            first <= last
        else { return nil }
        let totalText = spec[spec.index(after: slash)...]
        if totalText == "*" { return (ByteSpan(first: first, last: last), nil) }
        guard let total = position(totalText), last < total else { return nil }
        return (ByteSpan(first: first, last: last), total)
    }

    /// The one length that every `Content-Length` value names (RFC 9110 §8.6 lets a recipient
    /// accept `42, 42`), or `nil` when there is none, or they disagree, or one is not a number.
    static func contentLength(_ values: [String]) -> Int64? {
        var length: Int64?
        for value in values {
            for part in value.split(separator: ",", omittingEmptySubsequences: false) {
                guard let parsed = position(part.trimmingHTTPWhitespace()[...]) else { return nil }
                if let length, length != parsed { return nil }
                length = parsed
            }
        }
        return length
    }

    /// The first content coding other than `identity`, lower-cased, or `nil` for an unencoded body.
    static func nonIdentityEncoding(_ headers: [String: String]) -> String? {
        HTTPHeaderField.contentCodings(headers["content-encoding"]).first
    }

    /// ASCII digits only, so `+5`, ` 5` or `0x5` are not positions; at most 18 digits, so it fits.
    private static func position(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return nil
        }
        return Int64(text)
    }

    static func describe(_ status: Int) -> String {
        switch status {
        case 200: "200 OK"
        case 201: "201 Created"
        case 202: "202 Accepted"
        case 203: "203 Non-Authoritative Information"
        case 204: "204 No Content"
        case 205: "205 Reset Content"
        case 206: "206 Partial Content"
        case 304: "304 Not Modified"
        default: "HTTP \(status)"
        }
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs (HTTP's optional whitespace).
    func trimmingHTTPWhitespace() -> String {
        let isBlank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let start = firstIndex(where: { !isBlank($0) }), let end = lastIndex(where: { !isBlank($0) }) else {
            return ""
        }
        return String(self[start...end])
    }
}
