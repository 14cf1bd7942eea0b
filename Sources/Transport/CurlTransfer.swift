internal import CCurl
import Foundation
import Synchronization

/// One libcurl easy handle and everything its callbacks reach.
///
/// Thread rules: it is configured on the caller's task, then handed to ``CurlMultiLoop``; from
/// then on only the loop thread touches its mutable fields (callbacks run there too). The one
/// field other threads touch is `cancelled`, an atomic (and the ``TransferGroup``'s flag, which
/// `group` names: set before the handoff, never changed). That handoff is what makes the
/// `@unchecked Sendable` safe.
final class CurlTransfer: @unchecked Sendable {
    enum Sink {
        /// Collect the body in memory, refusing more than `limit` bytes.
        case memory(limit: Int64)
        /// Write the body to an open file descriptor, starting at `offset`.
        case file(fd: Int32, path: String, offset: Int64)
    }

    let easy: UnsafeMutableRawPointer
    let url: URL
    /// libcurl's receive buffer (`CURLOPT_BUFFERSIZE`), at most `CURL_MAX_READ_SIZE`.
    static let receiveBufferBytes = 256 << 10
    /// The loop's sockets, and this transfer's among them once its connection is ready
    /// (``LoopSockets``); -1 while unknown. Loop thread only.
    var sockets: LoopSockets?
    var socket: curl_socket_t = -1
    let cancelled = Atomic<Bool>(false)
    /// The group the transfer joined when its task handed it over (``TransferGroup/current``).
    var group: TransferGroup?
    /// The transfer, or its group, was cancelled: it must not start, and it stops at its next callback.
    var isCancelled: Bool {
        cancelled.load(ordering: .relaxed) || group?.isCancelled == true
    }
    private(set) var sink: Sink
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar> = {
        let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        buffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        return buffer
    }()
    private let progress: ProgressHandler?
    private let onResponseStart: (@Sendable (Int, [String: String]) -> Void)?
    private let onBodyChunk: (@Sendable (UnsafeRawBufferPointer) -> Void)?
    /// ``DownloadOptions/admitsSize``.
    private let admitsSize: (@Sendable (Int64) -> Bool)?
    private let maxBytes: Int64?
    /// The request asked for every final status as a response (``HTTPRequest/returnsEveryStatus``).
    private let returnsEveryStatus: Bool
    /// What a response must be to answer the request as sent.
    let expectation: ResponseExpectation

    // Loop-thread state.
    var continuation: CheckedContinuation<HTTPResponse, any Error>?
    /// The current response's header lines combined by name (RFC 9110 §5.3).
    private(set) var headers: [String: String] = [:]
    /// The current response's header lines, in order.
    private(set) var headerFields: [HTTPHeaderField] = []
    /// The redirects followed before the current response, oldest first.
    private var redirects: [HTTPRedirect] = []
    /// Every `Content-Length` value of the current response, a repeated header as a second entry
    /// (the `headers` dictionary keeps only the last, which is what libcurl believes).
    private var contentLengths: [String] = []
    /// The current response's head has ended: later fields are trailers, not head fields.
    private var headEnded = false
    /// Whether the request has credential headers (``HTTPRequest/isCredentialHeader(_:)``),
    /// which a redirect to another origin must not take along.
    private let carriesCredentials: Bool
    /// Whether libcurl follows redirects for this transfer.
    private let followsRedirects: Bool
    /// Whether a folded line (obsolete line folding) changed a field since `headers` was
    /// combined: it is combined again when the head ends.
    private var foldedHead = false
    /// The current response's head was held to ``expectation``, and passed.
    private(set) var headAccepted = false
    private var headChecked = false
    private(set) var body = Data()
    private(set) var bytesReceived: Int64 = 0
    private var sawFirstBodyByte = false
    /// The current response's content decoder, from its first body byte; nil for an unencoded body.
    private var decoder: ContentDecoder?
    /// The current response's encoded bytes so far, and what they decoded to: a body whose
    /// encoded bytes keep coming without decoding to anything (empty deflate blocks, forever)
    /// passes every limit on decoded bytes, so the two are compared (``endlessEncoding``).
    private var encodedBytes: Int64 = 0
    private var decodedBytes: Int64 = 0
    private var status = 0
    private var writeFailure: TransportError?
    private var lastProgressReport: UInt64 = 0
    private(set) var resumedFrom: Int64 = 0
    /// The rate rule over whole windows (``CurlTransport/Configuration/minimumRate`` over
    /// ``CurlTransport/Configuration/stallTimeout``): libcurl's own check looks at its recent
    /// speed, so a burst every few seconds resets it, and a body sent as 3 KB every 28 s (100
    /// bytes/s) never failed. Each window that ends with fewer than its share fails the transfer.
    private let rateWindow: (nanoseconds: UInt64, bytes: Int64)
    private var rateWindowStart: (tick: UInt64, received: Int64)?

    init(
        request: HTTPRequest, sink: Sink, configuration: CurlTransport.Configuration,
        maxBytes: Int64?, progress: ProgressHandler?,
        onResponseStart: (@Sendable (Int, [String: String]) -> Void)? = nil,
        onBodyChunk: (@Sendable (UnsafeRawBufferPointer) -> Void)? = nil,
        admitsSize: (@Sendable (Int64) -> Bool)? = nil
    ) throws(TransportError) {
        let url = request.resolvedURL
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw TransportError(
                code: .invalidRequest,
                message: "\(Redaction.url(url)) is not an http(s) URL; only http and https are fetched",
                url: url)
        }
        guard let easy = curl_easy_init() else {
            throw TransportError(
                code: .invalidRequest, message: "libcurl could not create a handle for \(Redaction.url(url))", url: url)
        }
        self.easy = easy
        self.url = url
        self.sink = sink
        carriesCredentials = request.headers.keys.contains(where: HTTPRequest.isCredentialHeader)
        // An origin may echo a credential back (a redirect to `?echo=<it>`): masked from now on.
        if carriesCredentials || Redaction.hasUserInfo(url) { Redaction.registerSecrets(of: request, url: url) }
        followsRedirects = configuration.maxRedirects > 0
        self.progress = progress
        self.onResponseStart = onResponseStart
        self.onBodyChunk = onBodyChunk
        self.admitsSize = admitsSize
        self.maxBytes = maxBytes
        // Saturating: a configuration may ask for a window or a rate no product holds.
        let window = Int64(clamping: max(1, configuration.stallTimeout.milliseconds / 1000))
        let nanoseconds = UInt64(window).multipliedReportingOverflow(by: 1_000_000_000)
        let bytes = window.multipliedReportingOverflow(by: Int64(clamping: max(1, configuration.minimumRate)))
        self.rateWindow = (
            nanoseconds.overflow ? .max : nanoseconds.partialValue, bytes.overflow ? .max : bytes.partialValue
        )
        var headers = request.headers
        if case .file(_, _, let offset) = sink, offset > 0 {
            // A manual Range header instead of CURLOPT_RESUME_FROM: libcurl fails a resume that the
            // server answers with 200, but 200 is exactly how If-Range says "start again".
            for name in headers.keys where name.lowercased() == "range" { headers[name] = nil }
            headers["Range"] = "bytes=\(offset)-"
        }
        let method = request.method.uppercased()
        self.returnsEveryStatus = request.returnsEveryStatus
        self.expectation = ResponseExpectation(
            method: method, headers: headers, acceptsAnyStatus: request.returnsEveryStatus)

        try set(ccurl_easy_setopt_string(easy, CURLOPT_URL, url.absoluteString), "CURLOPT_URL")
        try set(ccurl_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https"), "CURLOPT_PROTOCOLS_STR")
        try set(
            ccurl_easy_setopt_string(easy, CURLOPT_REDIR_PROTOCOLS_STR, Self.redirectProtocols(from: url)),
            "CURLOPT_REDIR_PROTOCOLS_STR")
        try set(ccurl_easy_setopt_string(easy, CURLOPT_USERAGENT, configuration.userAgent), "CURLOPT_USERAGENT")
        // A request with credential headers is never redirected by libcurl: each hop is the
        // transport's (``redirectTarget()``), so the Location it reads is the one followed. When
        // libcurl followed, its reading of a head (an empty first Location, a bare CR, a status
        // line amid the header lines) differed from the transport's, and credentials went to
        // another origin (outside audits).
        try set(
            ccurl_easy_setopt_long(
                easy, CURLOPT_FOLLOWLOCATION, configuration.maxRedirects > 0 && !carriesCredentials ? 1 : 0),
            "CURLOPT_FOLLOWLOCATION")
        try set(ccurl_easy_setopt_long(easy, CURLOPT_MAXREDIRS, configuration.maxRedirects), "CURLOPT_MAXREDIRS")
        // Preferences, not restrictions: a libcurl built without HTTP/2 refuses HTTP/2 with
        // CURLE_UNSUPPORTED_PROTOCOL and speaks HTTP/1.1, which is correct, only slower. Any other
        // refusal is an error like the rest.
        let http2 = ccurl_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        if http2 != CURLE_UNSUPPORTED_PROTOCOL { try set(http2, "CURLOPT_HTTP_VERSION") }
        try set(ccurl_easy_setopt_long(easy, CURLOPT_PIPEWAIT, 1), "CURLOPT_PIPEWAIT")
        try set(ccurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1), "CURLOPT_NOSIGNAL")
        try set(ccurl_easy_setopt_long(easy, CURLOPT_TCP_NODELAY, 1), "CURLOPT_TCP_NODELAY")
        try set(
            ccurl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, configuration.connectTimeout.milliseconds),
            "CURLOPT_CONNECTTIMEOUT_MS")
        // Under `minimumRate` bytes/s, averaged by libcurl, for a whole stall window fails the
        // transfer: a stall (0 bytes/s) as before, and a trickle that would take days as well.
        try set(
            ccurl_easy_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, max(1, configuration.minimumRate)),
            "CURLOPT_LOW_SPEED_LIMIT")
        try set(
            ccurl_easy_setopt_long(
                easy, CURLOPT_LOW_SPEED_TIME, max(1, configuration.stallTimeout.milliseconds / 1000)),
            "CURLOPT_LOW_SPEED_TIME")
        if let timeout = request.timeout {
            try set(
                ccurl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, max(1, timeout.milliseconds)), "CURLOPT_TIMEOUT_MS")
        }
        // Content codings are decoded, for downloads as for in-memory fetches, by
        // ``ContentDecoder`` (libcurl's own decoding is off: it takes a compressed stream cut
        // short as whole), which reads gzip and deflate; so those are what is offered. Not
        // `Accept-Encoding: identity`: S3 and CloudFront serve an object stored
        // gzipped with `Content-Encoding: gzip` whatever the client asks, so asking for identity
        // would leave such a resource unreadable; and sending no Accept-Encoding at all (as
        // downloads once did) means "any coding is fine" (RFC 9110 §12.5.3), which installed
        // compressed bytes. What follows from decoding: every callback, `maxBytes` and the file
        // see decoded bytes; an encoded body is never resumed (a range of compressed bytes cannot
        // follow decoded ones, so a 206 in a non-identity coding is refused and no entity tag is
        // kept for it); another coding, or a stream that stops before its end, fails as
        // `.invalidResponse`.
        try set(
            ccurl_easy_setopt_string(easy, CURLOPT_ACCEPT_ENCODING, ContentDecoder.offered), "CURLOPT_ACCEPT_ENCODING")
        try set(ccurl_easy_setopt_long(easy, CURLOPT_HTTP_CONTENT_DECODING, 0), "CURLOPT_HTTP_CONTENT_DECODING")
        if method == "HEAD" {
            try set(ccurl_easy_setopt_long(easy, CURLOPT_NOBODY, 1), "CURLOPT_NOBODY")
        } else if method != "GET" {
            try set(ccurl_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, method), "CURLOPT_CUSTOMREQUEST")
        }
        // libcurl sends a header line as it is: a line break would add headers (or a request) of
        // its own, a NUL would cut the line short, and a framing header would contradict libcurl's.
        for (name, value) in headers {
            if let problem = HTTPRequest.headerProblem(name: name, value: value) {
                throw TransportError(
                    code: .invalidRequest, message: "a header for \(Redaction.url(url)): \(problem)", url: url)
            }
        }
        for line in headers.sorted(by: { $0.key < $1.key }).map({ "\($0.key): \($0.value)" }) {
            guard let appended = curl_slist_append(headerList, line) else {
                throw TransportError(
                    code: .invalidRequest, message: "libcurl could not add the header line for \(Redaction.url(url))",
                    url: url)
            }
            headerList = appended
        }
        if let headerList {
            try set(ccurl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList), "CURLOPT_HTTPHEADER")
        }
        try set(ccurl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer), "CURLOPT_ERRORBUFFER")
        // libcurl reads the socket into a buffer of 16 KiB by default: a read, a callback and a
        // trip through the multi loop for every 16 KiB. S2's 108 MiB took 64 ms less CPU with
        // 256 KiB (438 → 374 ms median, `perf stat`); the buffer is allocated once per handle,
        // and only the pages a read fills are touched.
        try set(ccurl_easy_setopt_long(easy, CURLOPT_BUFFERSIZE, Self.receiveBufferBytes), "CURLOPT_BUFFERSIZE")

        let userdata = Unmanaged.passUnretained(self).toOpaque()
        try set(ccurl_easy_setopt_pointer(easy, CURLOPT_PRIVATE, userdata), "CURLOPT_PRIVATE")
        try set(ccurl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, userdata), "CURLOPT_WRITEDATA")
        try set(
            ccurl_easy_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION) { pointer, size, count, userdata in
                let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata!).takeUnretainedValue()
                return transfer.receiveBody(UnsafeRawBufferPointer(start: pointer, count: size * count))
            }, "CURLOPT_WRITEFUNCTION")
        try set(ccurl_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, userdata), "CURLOPT_HEADERDATA")
        try set(
            ccurl_easy_setopt_data_callback(easy, CURLOPT_HEADERFUNCTION) { pointer, size, count, userdata in
                let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata!).takeUnretainedValue()
                // Any other count than the one given aborts the transfer (CURLE_WRITE_ERROR).
                return transfer.receiveHeader(UnsafeRawBufferPointer(start: pointer, count: size * count))
                    ? size * count : 0
            }, "CURLOPT_HEADERFUNCTION")
        try set(ccurl_easy_setopt_long(easy, CURLOPT_NOPROGRESS, 0), "CURLOPT_NOPROGRESS")
        try set(ccurl_easy_setopt_pointer(easy, CURLOPT_XFERINFODATA, userdata), "CURLOPT_XFERINFODATA")
        try set(
            ccurl_easy_setopt_xferinfo_callback(easy) { userdata, total, now, _, _ in
                let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata!).takeUnretainedValue()
                return transfer.reportProgress(total: Int64(total), now: Int64(now)) ? 0 : 1
            }, "CURLOPT_XFERINFOFUNCTION")
    }

    /// Turns an option libcurl refused into an error naming it: ignored, the failure would
    /// silently drop a restriction (a protocol limit, a timeout) on an older libcurl.
    private func set(_ code: CURLcode, _ option: String) throws(TransportError) {
        guard code != CURLE_OK else { return }
        throw TransportError(
            code: .invalidRequest,
            message: "libcurl refused \(option) for \(Redaction.url(url)): \(String(cString: curl_easy_strerror(code)))"
                + " (curl \(code.rawValue)); this transport needs libcurl 7.85 or later",
            url: url, curlCode: Int(code.rawValue))
    }

    deinit {
        curl_easy_cleanup(easy)
        if let headerList { curl_slist_free_all(headerList) }
        errorBuffer.deallocate()
    }

    // MARK: - Callbacks (loop thread)

    /// Returns false to abort the transfer: the head just ended and does not answer the request.
    private func receiveHeader(_ bytes: UnsafeRawBufferPointer) -> Bool {
        switch HeaderLine(bytes) {
        case .status(let code):
            // A new response (after a redirect or a 100 Continue): forget the previous headers,
            // keeping a followed redirect's (a cache needs them: RFC 9111 §4).
            if (300..<400).contains(status), headEnded {
                redirects.append(HTTPRedirect(status: status, headerFields: headerFields))
            }
            headers = [:]
            headerFields = []
            contentLengths = []
            foldedHead = false
            encodedBytes = 0
            decodedBytes = 0
            status = code
            headEnded = false
            headChecked = false
            headAccepted = false
            decoder = nil
        case .field(let name, let value):
            // Trailers after a chunked body: they may not redefine what the head said.
            guard !headEnded else { return true }
            let field = HTTPHeaderField(name: name, value: value)
            headerFields.append(field)
            if !foldedHead { HTTPHeaderField.combine(field, into: &headers) }
            if name == "content-length" { contentLengths.append(value) }
        case .continuation(let text):
            // Obsolete line folding: the previous field goes on after one space (RFC 9112 §5.2).
            // The lines are combined again once, when the head ends: each fold once combined
            // them all, so a hostile head of folds cost minutes of CPU (an outside audit).
            guard !headEnded, var last = headerFields.popLast() else { return true }
            if !last.value.isEmpty { last.value += " " }
            last.value += text
            headerFields.append(last)
            foldedHead = true
            if last.name == "content-length", !contentLengths.isEmpty {
                contentLengths[contentLengths.count - 1] = last.value
            }
        case .end:
            guard !headEnded else { return true }
            headEnded = true
            if foldedHead {
                headers = HTTPHeaderField.combined(headerFields)
                foldedHead = false
            }
            // A redirect of a request with credential headers: the transfer stops here, and the
            // transport asks the target itself, with them only on the request's own origin.
            if carriesCredentials, followsRedirects, (300...399).contains(status), status != 304 {
                switch redirectTarget() {
                case .none:
                    break
                case .refused(let problem):
                    writeFailure = .invalidResponse(expectation.method, answeringURL, problem, statusCode: status)
                    writeFailure?.answered = true
                    return false
                case .follow(let next):
                    var stop = TransportError(
                        code: .invalidRequest, message: "redirected to \(Redaction.url(next))", url: url)
                    stop.redirectToOtherOrigin = (next, HTTPRedirect(status: status, headerFields: headerFields))
                    writeFailure = stop
                    return false
                }
            }
            // Before a single body byte is written: a refused body never touches the file.
            if isFinalSuccess { return checkHead() }
        case .other:
            break
        }
        return true
    }

    /// The current response ends the exchange as a success, if it answers the request: 2xx or
    /// 304; for a request that asked for every status, any final answer (a 3xx that is not
    /// followed, a 4xx, a 5xx) too.
    private var isFinalSuccess: Bool {
        (200..<300).contains(status) || status == 304 || (returnsEveryStatus && status >= 300)
    }

    /// Whether the current response's body is content to keep (not an error page kept for
    /// the message only).
    private var keepsBody: Bool {
        (200..<300).contains(status) || (returnsEveryStatus && status >= 300 && status != 304)
    }

    /// Holds the current response's head to the request, and its announced size to the limit.
    /// Returns false, with `writeFailure` set, to refuse it.
    private func checkHead() -> Bool {
        headChecked = true
        if let problem = expectation.checkHead(status: status, headers: headers, contentLengths: contentLengths) {
            writeFailure = .invalidResponse(expectation.method, answeringURL, problem, statusCode: status)
            return false
        }
        // A body announced over its limit is refused now, not after the limit's worth of bytes.
        // Only an unencoded length counts: limits hold decoded bytes.
        if status == 200 || status == 206, ResponseExpectation.nonIdentityEncoding(headers) == nil,
            let length = ResponseExpectation.contentLength(contentLengths)
        {
            switch sink {
            case .memory(let limit) where length > limit:
                writeFailure = tooLarge(limit: limit, memory: true, declared: length)
                return false
            case .file(_, _, let offset) where maxBytes.map({ (status == 206 ? offset : 0) + length > $0 }) == true:
                writeFailure = tooLarge(limit: maxBytes ?? 0, memory: false)
                return false
            default:
                break
            }
        }
        headAccepted = true
        return true
    }

    /// The failure of a body over its limit; `declared` when only its `Content-Length` said so
    /// (no byte of it was taken).
    private func tooLarge(limit: Int64, memory: Bool, declared: Int64? = nil) -> TransportError {
        let message =
            if let declared {
                "\(Redaction.url(url)) declared \(declared) bytes (its Content-Length), more than the \(limit) it may have; refusing it"
            } else if memory {
                "\(Redaction.url(url)) sent more than \(limit) bytes; refusing the rest"
            } else {
                "\(Redaction.url(url)) is larger than the \(limit) bytes it may have (its declared size, or the caller's limit); refusing it"
            }
        return TransportError(code: .tooLarge, message: message, url: url)
    }

    /// The schemes a redirect may go to: never from https down to plain http, where whoever is on
    /// the path could answer in the server's name.
    static func redirectProtocols(from url: URL) -> String {
        url.scheme?.lowercased() == "https" ? "https" : "http,https"
    }

    /// What a redirect of the current response (a 3xx but 304) leads to, as the transport
    /// follows it for a request with credential headers.
    private enum RedirectStep {
        /// No `Location` with a value: the 3xx is the answer, as libcurl would leave it.
        case none
        /// A `Location` that cannot be followed (unreadable, or a scheme a redirect may not
        /// take from this request): refused, as libcurl would refuse it.
        case refused(String)
        case follow(URL)
    }

    /// The first `Location` line with a value (as libcurl picks it), resolved by libcurl's URL
    /// parser against the URL that answered, by a scheme a redirect may take.
    private func redirectTarget() -> RedirectStep {
        guard
            let line = headerFields.first(where: {
                $0.name == "location" && $0.value.unicodeScalars.contains { !Self.curlSpaces.contains($0.value) }
            })?.value
        else { return .none }
        guard let next = Self.redirectTarget(line, from: answeringURL.absoluteString),
            let parsed = URL(string: next.url), parsed.httpOrigin != nil
        else { return .refused("it redirected to a Location that cannot be read as a URL") }
        guard Self.redirectProtocols(from: url).split(separator: ",").contains(Substring(next.scheme)) else {
            return .refused("it redirected to a \(next.scheme): URL, which a redirect from this request may not take")
        }
        return .follow(parsed)
    }

    /// The bytes libcurl trims around a header value (its `ISSPACE`).
    private static let curlSpaces: Set<UInt32> = [0x20, 0x09, 0x0A, 0x0B, 0x0C, 0x0D]

    /// The target of a `Location` line as libcurl itself resolves it when it follows (its URL
    /// parser, with the flags its redirect step uses, against the URL that answered), and that
    /// target's origin; nil when libcurl could not read it either (it then fails, asking no one).
    ///
    /// Another parser would differ from libcurl's somewhere (`http:/host`, `http:///host` and a
    /// leading vertical tab are another origin to libcurl but not to Foundation: an outside
    /// audit), and each difference would send the request's credentials to another origin.
    static func redirectTarget(_ line: String, from base: String) -> (url: String, scheme: String, origin: String)? {
        // libcurl takes the value from its first non-space byte to its last (its `ISSPACE`: the
        // vertical tab and form feed too), as bytes: header text is Latin-1 here.
        var bytes: [UInt8] = []
        for scalar in line.unicodeScalars {
            guard scalar.value <= 0xFF, scalar.value != 0 else { return nil }
            bytes.append(UInt8(scalar.value))
        }
        guard let first = bytes.firstIndex(where: { !curlSpaces.contains(UInt32($0)) }),
            let last = bytes.lastIndex(where: { !curlSpaces.contains(UInt32($0)) })
        else { return nil }
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, base, 0) == CURLUE_OK else { return nil }
        let location = Array(bytes[first...last]) + [0]
        let flags = UInt32(CURLU_URLENCODE) | UInt32(CURLU_ALLOW_SPACE)
        let set = location.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { curl_url_set(handle, CURLUPART_URL, $0.baseAddress, flags) }
        }
        guard set == CURLUE_OK, let url = part(handle, CURLUPART_URL), let origin = origin(handle),
            let scheme = part(handle, CURLUPART_SCHEME)?.lowercased()
        else { return nil }
        return (url, scheme, origin)
    }

    /// The origin of `url` (`scheme://host:port`, lower-cased, the port always given) as
    /// libcurl's URL parser reads it, or nil.
    static func curlOrigin(of url: String) -> String? {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, url, 0) == CURLUE_OK else { return nil }
        return origin(handle)
    }

    private static func origin(_ handle: OpaquePointer) -> String? {
        guard let scheme = part(handle, CURLUPART_SCHEME), let host = part(handle, CURLUPART_HOST),
            let port = part(handle, CURLUPART_PORT, flags: UInt32(CURLU_DEFAULT_PORT))
        else { return nil }
        return (scheme + "://" + host + ":" + port).lowercased()
    }

    private static func part(_ handle: OpaquePointer, _ part: CURLUPart, flags: UInt32 = 0) -> String? {
        var text: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, part, &text, flags) == CURLUE_OK, let text else { return nil }
        defer { curl_free(text) }
        return String(cString: text)
    }

    /// The address answering now: after a redirect, not the one asked.
    private var answeringURL: URL {
        var effective: UnsafeMutablePointer<CChar>?
        if ccurl_easy_getinfo_string(easy, CURLINFO_EFFECTIVE_URL, &effective) == CURLE_OK, let effective,
            let parsed = URL(string: String(cString: effective))
        {
            return parsed
        }
        return url
    }

    /// The strong entity tag a later attempt may resume this body with (`If-Range`), or `nil`:
    /// only an accepted, unencoded 200 or 206 can be continued, and a weak tag never matches.
    var resumableETag: String? {
        guard headAccepted, status == 200 || status == 206, ResponseExpectation.nonIdentityEncoding(headers) == nil,
            let etag = headers["etag"], !etag.hasPrefix("W/")
        else { return nil }
        return etag
    }

    /// The whole entity's length an accepted, unencoded 200 or 206 declared (its
    /// `Content-Length`, or its `Content-Range`'s complete length), or nil: what a resume of its
    /// bytes must end at.
    var entityLength: Int64? {
        guard headAccepted, ResponseExpectation.nonIdentityEncoding(headers) == nil else { return nil }
        switch status {
        case 200: return ResponseExpectation.contentLength(contentLengths)
        case 206: return ResponseExpectation.completeLength(ofContentRange: headers["content-range"])
        default: return nil
        }
    }

    private func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        if !sawFirstBodyByte {
            sawFirstBodyByte = true
            // The head is checked when it ends; this covers a head whose end was not reported.
            if isFinalSuccess && !headChecked && !checkHead() { return 0 }
            if !prepareSink() { return 0 }
            switch ContentDecoder.coding(of: headers["content-encoding"]) {
            case .success(let coding):
                decoder = coding.map(ContentDecoder.init(coding:))
            case .failure(let refusal):
                // An error page in a coding we cannot read is still kept, as it came, for the message.
                if keepsBody {
                    writeFailure = .invalidResponse(
                        expectation.method, answeringURL, refusal.problem, statusCode: status)
                    return 0
                }
            }
            if keepsBody { onResponseStart?(status, headers) }
        }
        if bytes.count < Self.largestChunk { acknowledgeNow() }
        guard let decoder else { return deliver(bytes) ? bytes.count : 0 }
        encodedBytes += Int64(bytes.count)
        let outcome = decoder.decode(bytes) { chunk in
            self.decodedBytes += Int64(chunk.count)
            return self.deliver(chunk)
        }
        switch outcome {
        case .decoded:
            if let problem = endlessEncoding() {
                writeFailure = .invalidResponse(expectation.method, answeringURL, problem, statusCode: status)
                return 0
            }
            return bytes.count
        case .stopped:
            return 0
        case .failed(let problem):
            // An error page that does not decode is kept no further; the status says enough.
            guard keepsBody else { return bytes.count }
            writeFailure = .invalidResponse(expectation.method, answeringURL, problem, statusCode: status)
            return 0
        }
    }

    /// Why the current body is refused when its encoded bytes outgrow what they decoded to by
    /// far (32 times, and 1 MiB): no encoder comes near (deflate adds a few bytes a block to
    /// data it cannot shrink; a gzip member of one byte, the worst a chain of tiny members gets,
    /// takes about 21), but a hostile one can send empty blocks forever, which no limit on
    /// decoded bytes stops.
    private func endlessEncoding() -> String? {
        guard encodedBytes > Self.largestEncodingRatio * decodedBytes + (1 << 20) else { return nil }
        return
            "its \(headers["content-encoding"] ?? "encoded") body sent \(encodedBytes) bytes that decoded to \(decodedBytes), more than \(Self.largestEncodingRatio) times as many: blocks of (nearly) nothing, so the body would not end; fix the server's compression"
    }

    /// How many encoded bytes a decoded one may cost (``endlessEncoding()``).
    static let largestEncodingRatio: Int64 = 32

    /// Takes decoded body bytes: the error page's first 4 KiB, or the content into its sink.
    /// Returns false, with `writeFailure` set, to stop the transfer.
    private func deliver(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard keepsBody else {
            // An error page is not content: keep a little of it for the message, never the file.
            if body.count < 4096 { body.append(contentsOf: bytes.prefix(4096 - body.count)) }
            return true
        }
        bytesReceived += Int64(bytes.count)
        switch sink {
        case .memory(let limit):
            if Int64(body.count + bytes.count) > limit {
                writeFailure = tooLarge(limit: limit, memory: true)
                return false
            }
            body.append(contentsOf: bytes)
        case .file(let fd, let path, let offset):
            if let maxBytes, offset + bytesReceived > maxBytes {
                writeFailure = tooLarge(limit: maxBytes, memory: false)
                return false
            }
            if let admitsSize, !admitsSize(offset + bytesReceived) {
                writeFailure = TransportError(
                    code: .tooLarge,
                    message:
                        "\(expectation.method) \(Redaction.url(url)) sent more than the downloads it shares a limit with may take",
                    url: url)
                return false
            }
            var remaining = bytes
            while !remaining.isEmpty {
                let written = Glibc.write(fd, remaining.baseAddress, remaining.count)
                if written < 0 {
                    let code = Glibc.errno
                    if code == EINTR { continue }
                    let reason = String(cString: strerror(code))
                    writeFailure = TransportError(
                        code: .fileSystem,
                        message: "writing \(url.lastPathComponent) to \(path): \(reason)"
                            + (code == ENOSPC ? "; free disk space and retry" : ""),
                        url: url, errno: code)
                    return false
                }
                remaining = UnsafeRawBufferPointer(rebasing: remaining[written...])
            }
            onBodyChunk?(bytes)
        }
        return true
    }

    /// The most libcurl hands the write callback at once (`CURL_MAX_WRITE_SIZE`): a shorter
    /// chunk ends what one read of the socket gave.
    private static let largestChunk = 16 << 10

    /// Acknowledges at once what the socket has received. On a connection that carried a request
    /// and its answer before, Linux delays acknowledgements by up to 40 ms, meaning to send them
    /// with the next request; a server with Nagle's algorithm on (nginx with `tcp_nopush`, as
    /// Debian ships it) holds an answer's last short segment until the one before is
    /// acknowledged. Then an answer a little over one segment long waits 40 ms for its tail: the
    /// archive's end (64 KiB) did on loopback, on the path of every range after it.
    /// `TCP_QUICKACK` sends the pending acknowledgement now; it does not last, so it is set again
    /// after each read. A failure (not a TCP socket) changes nothing.
    private func acknowledgeNow() {
        guard socket >= 0 else { return }
        var on: Int32 = 1
        _ = setsockopt(socket, Int32(IPPROTO_TCP), TCP_QUICKACK, &on, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Decides, at the first body byte, whether a resumed file is appended to or started again.
    /// The head has passed ``checkHead()``: a 206 here starts exactly at the asked offset.
    private func prepareSink() -> Bool {
        guard case .file(let fd, let path, let offset) = sink, keepsBody else { return true }
        if status == 206 && offset > 0 {
            resumedFrom = offset
            return true
        }
        // 200: the whole body is coming (If-Range did not match, or no range was asked).
        if offset > 0 {
            if let failure = Self.emptyFile(fd, path: path, url: url) {
                writeFailure = failure
                return false
            }
            sink = .file(fd: fd, path: path, offset: 0)
        }
        return true
    }

    /// Cuts an overwritten download's file at its position, the end of the body just written
    /// from its start (see ``DownloadOptions/overwrite``); the failure when it cannot be cut,
    /// which fails the download: old bytes past the body would be taken for part of it.
    static func cutAtPosition(_ fd: Int32, path: String, url: URL?) -> TransportError? {
        let end = lseek(fd, 0, SEEK_CUR)
        if end >= 0, ftruncate(fd, end) == 0 { return nil }
        let code = Glibc.errno
        return TransportError(
            code: .fileSystem,
            message: "cutting \(path) at the end of its download: \(String(cString: strerror(code)))",
            url: url, errno: code)
    }

    /// Empties a download's file for a fresh start; the failure when it cannot be emptied, which
    /// fails the download: its bytes would be taken for the start of the next body.
    static func emptyFile(_ fd: Int32, path: String, url: URL?) -> TransportError? {
        if ftruncate(fd, 0) == 0, lseek(fd, 0, SEEK_SET) >= 0 { return nil }
        let code = Glibc.errno
        return TransportError(
            code: .fileSystem, message: "emptying \(path) for a fresh download: \(String(cString: strerror(code)))",
            url: url, errno: code)
    }

    private func reportProgress(total: Int64, now: Int64) -> Bool {
        if isCancelled { return false }
        let tick = DispatchTime.now().uptimeNanoseconds
        if let start = rateWindowStart, now < start.received {
            // libcurl counts each response of a redirect from 0: a new window starts with it.
            rateWindowStart = (tick, now)
        } else if let start = rateWindowStart {
            if tick - start.tick >= rateWindow.nanoseconds {
                guard now - start.received >= rateWindow.bytes else {
                    let seconds = rateWindow.nanoseconds / 1_000_000_000
                    writeFailure = TransportError(
                        code: .timeout,
                        message:
                            "\(expectation.method) \(Redaction.url(url)) failed: \(now - start.received) bytes came in the last \(seconds) s, under the minimum of \(rateWindow.bytes / Int64(seconds)) bytes/s (CurlTransport.Configuration.minimumRate)",
                        url: url, curlCode: Int(CURLE_OPERATION_TIMEDOUT.rawValue))
                    return false
                }
                rateWindowStart = (tick, now)
            }
        } else {
            rateWindowStart = (tick, now)
        }
        guard let progress, now > 0 else { return true }
        if tick - lastProgressReport < 50_000_000 && now < total { return true }
        lastProgressReport = tick
        var base: Int64 = 0
        if case .file(_, _, let offset) = sink { base = offset }
        progress(TransferProgress(received: base + now, expected: total > 0 ? base + total : nil))
        return true
    }

    // MARK: - Completion (loop thread)

    /// Turns libcurl's verdict into a response or an error and resumes the waiting task.
    func complete(result: CURLcode) {
        guard let continuation else { return }
        self.continuation = nil
        continuation.resume(with: outcome(result: result))
    }

    func fail(_ error: TransportError) {
        guard let continuation else { return }
        self.continuation = nil
        continuation.resume(throwing: error)
    }

    private func outcome(result: CURLcode) -> Result<HTTPResponse, any Error> {
        if let writeFailure { return .failure(writeFailure) }
        if isCancelled { return .failure(TransportError.cancelled(url)) }
        var finalURL = url
        var effective: UnsafeMutablePointer<CChar>?
        if ccurl_easy_getinfo_string(easy, CURLINFO_EFFECTIVE_URL, &effective) == CURLE_OK, let effective,
            let parsed = URL(string: String(cString: effective))
        {
            finalURL = parsed
        }
        guard result == CURLE_OK else {
            let buffered = String(cString: errorBuffer)
            // libcurl's words may quote the URL (a redirect's target, a proxy), user info and all.
            let detail = Redaction.text(buffered.isEmpty ? String(cString: curl_easy_strerror(result)) : buffered)
            let timedOut = result == CURLE_OPERATION_TIMEDOUT
            // libcurl refuses a header line over 100 KB as "Out of memory": the server's answer
            // is at fault, and asking again gets the same.
            if result == CURLE_OUT_OF_MEMORY, !headEnded, status != 0 {
                return .failure(
                    TransportError(
                        code: .invalidResponse,
                        message:
                            "\(expectation.method) \(Redaction.url(finalURL)) sent a response header line larger than libcurl takes (100 KB); refusing the answer (the server or a proxy in between is misbehaving)",
                        url: url, statusCode: status, curlCode: Int(result.rawValue)))
            }
            var failure = TransportError(
                code: timedOut ? .timeout : .network,
                message: "\(expectation.method) \(Redaction.url(url)) failed: \(detail) (curl \(result.rawValue))",
                url: url, curlCode: Int(result.rawValue))
            failure.answered = status != 0
            return .failure(failure)
        }
        var code = 0
        ccurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &code)
        // libcurl takes status lines this transport does not (`http/1.1 200`, `HTTP 200`): the
        // response was then never checked, and its body never kept, yet libcurl calls it a 200
        // (an outside audit: empty files installed). One reading of the status, or no answer.
        guard code == status else {
            return .failure(
                TransportError.invalidResponse(
                    expectation.method, finalURL,
                    "its status line is not HTTP/1.1's (`HTTP/1.1 200 OK`): libcurl read a \(code) in it, this transport \(status == 0 ? "no status" : "a \(status)")",
                    statusCode: code))
        }
        // HTTP defines 100 to 599 (RFC 9110 §15): a 999 is no server error, and no answer.
        guard (100...599).contains(code) else {
            return .failure(
                TransportError.invalidResponse(
                    expectation.method, finalURL, "its status \(code) is not one HTTP defines (100 to 599)",
                    statusCode: code))
        }
        guard (200..<300).contains(code) || code == 304 || (returnsEveryStatus && code >= 300) else {
            let retryAfter = headers["retry-after"].flatMap { RetryPolicy.parseRetryAfter($0) }
            return .failure(TransportError.status(code, url: finalURL, retryAfter: retryAfter))
        }
        // The head was checked when it ended; this covers one whose end libcurl did not report.
        if !headChecked && !checkHead(), let writeFailure { return .failure(writeFailure) }
        // Raw bytes on the wire, after chunked framing and before content decoding: what
        // Content-Length and Content-Range count.
        var wireBytes: curl_off_t = 0
        if ccurl_easy_getinfo_off_t(easy, CURLINFO_SIZE_DOWNLOAD_T, &wireBytes) == CURLE_OK,
            let problem = expectation.checkBody(
                status: code, headers: headers, contentLengths: contentLengths,
                wireBytes: Int64(wireBytes))
        {
            return .failure(TransportError.invalidResponse(expectation.method, finalURL, problem, statusCode: code))
        }
        // A compressed body counts only when its stream came to its end.
        if keepsBody, let problem = decoder?.finish() {
            return .failure(TransportError.invalidResponse(expectation.method, finalURL, problem, statusCode: code))
        }
        var fileSize: Int64 = 0
        if case .file(_, _, let offset) = sink {
            fileSize = offset + bytesReceived
        }
        let responseBody: Data
        if case .memory = sink { responseBody = body } else { responseBody = Data() }
        return .success(
            HTTPResponse(
                statusCode: code, headerFields: headerFields, body: responseBody, url: finalURL,
                bytesReceived: bytesReceived, resumedFrom: resumedFrom, fileSize: fileSize, redirects: redirects))
    }
}
