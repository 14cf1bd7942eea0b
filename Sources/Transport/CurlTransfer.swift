internal import CCurl
import Foundation
import Synchronization

/// One libcurl easy handle and everything its callbacks reach.
///
/// Thread rules: it is configured on the caller's task, then handed to ``CurlMultiLoop``; from
/// then on only the loop thread touches its mutable fields (callbacks run there too). The one
/// field other threads touch is `cancelled`, an atomic. That handoff is what makes the
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
    let cancelled = Atomic<Bool>(false)
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
    private let maxBytes: Int64?
    private let requestedRange: Bool

    // Loop-thread state.
    var continuation: CheckedContinuation<HTTPResponse, any Error>?
    private(set) var headers: [String: String] = [:]
    private(set) var body = Data()
    private(set) var bytesReceived: Int64 = 0
    private var sawFirstBodyByte = false
    private var status = 0
    private var writeFailure: TransportError?
    private var lastProgressReport: UInt64 = 0
    private(set) var resumedFrom: Int64 = 0

    init(request: HTTPRequest, sink: Sink, configuration: CurlTransport.Configuration,
         acceptEncoding: Bool, maxBytes: Int64?, progress: ProgressHandler?,
         onResponseStart: (@Sendable (Int, [String: String]) -> Void)? = nil,
         onBodyChunk: (@Sendable (UnsafeRawBufferPointer) -> Void)? = nil) throws(TransportError) {
        let url = request.resolvedURL
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw TransportError(code: .invalidRequest,
                                 message: "\(url.absoluteString) is not an http(s) URL; only http and https are fetched",
                                 url: url)
        }
        guard let easy = curl_easy_init() else {
            throw TransportError(code: .invalidRequest, message: "libcurl could not create a handle for \(url.absoluteString)", url: url)
        }
        self.easy = easy
        self.url = url
        self.sink = sink
        self.progress = progress
        self.onResponseStart = onResponseStart
        self.onBodyChunk = onBodyChunk
        self.maxBytes = maxBytes
        if case .file(_, _, let offset) = sink, offset > 0 { requestedRange = true } else { requestedRange = false }

        _ = ccurl_easy_setopt_string(easy, CURLOPT_URL, url.absoluteString)
        _ = ccurl_easy_setopt_string(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        _ = ccurl_easy_setopt_string(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        _ = ccurl_easy_setopt_string(easy, CURLOPT_USERAGENT, configuration.userAgent)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_FOLLOWLOCATION, configuration.maxRedirects > 0 ? 1 : 0)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_MAXREDIRS, configuration.maxRedirects)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
        _ = ccurl_easy_setopt_long(easy, CURLOPT_PIPEWAIT, 1)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_TCP_NODELAY, 1)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, configuration.connectTimeout.milliseconds)
        // A stall, not a slow link, is what fails a transfer: under 1 byte/s for the stall window.
        _ = ccurl_easy_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, 1)
        _ = ccurl_easy_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, max(1, configuration.stallTimeout.milliseconds / 1000))
        if let timeout = request.timeout {
            _ = ccurl_easy_setopt_long(easy, CURLOPT_TIMEOUT_MS, max(1, timeout.milliseconds))
        }
        if acceptEncoding {
            _ = ccurl_easy_setopt_string(easy, CURLOPT_ACCEPT_ENCODING, "")
        }
        let method = request.method.uppercased()
        if method == "HEAD" {
            _ = ccurl_easy_setopt_long(easy, CURLOPT_NOBODY, 1)
        } else if method != "GET" {
            _ = ccurl_easy_setopt_string(easy, CURLOPT_CUSTOMREQUEST, method)
        }
        var headerLines = request.headers.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
        if case .file(_, _, let offset) = sink, offset > 0 {
            // A manual Range header instead of CURLOPT_RESUME_FROM: libcurl fails a resume that the
            // server answers with 200, but 200 is exactly how If-Range says "start again".
            headerLines.append("Range: bytes=\(offset)-")
        }
        for line in headerLines {
            headerList = curl_slist_append(headerList, line)
        }
        if let headerList {
            _ = ccurl_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList)
        }
        _ = ccurl_easy_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer)

        let userdata = Unmanaged.passUnretained(self).toOpaque()
        _ = ccurl_easy_setopt_pointer(easy, CURLOPT_PRIVATE, userdata)
        _ = ccurl_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, userdata)
        _ = ccurl_easy_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION) { pointer, size, count, userdata in
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata!).takeUnretainedValue()
            return transfer.receiveBody(UnsafeRawBufferPointer(start: pointer, count: size * count))
        }
        _ = ccurl_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, userdata)
        _ = ccurl_easy_setopt_data_callback(easy, CURLOPT_HEADERFUNCTION) { pointer, size, count, userdata in
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata!).takeUnretainedValue()
            transfer.receiveHeader(UnsafeRawBufferPointer(start: pointer, count: size * count))
            return size * count
        }
        _ = ccurl_easy_setopt_long(easy, CURLOPT_NOPROGRESS, 0)
        _ = ccurl_easy_setopt_pointer(easy, CURLOPT_XFERINFODATA, userdata)
        _ = ccurl_easy_setopt_xferinfo_callback(easy) { userdata, total, now, _, _ in
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(userdata!).takeUnretainedValue()
            return transfer.reportProgress(total: Int64(total), now: Int64(now)) ? 0 : 1
        }
    }

    deinit {
        curl_easy_cleanup(easy)
        if let headerList { curl_slist_free_all(headerList) }
        errorBuffer.deallocate()
    }

    // MARK: - Callbacks (loop thread)

    private func receiveHeader(_ bytes: UnsafeRawBufferPointer) {
        switch HeaderLine(bytes) {
        case .status(let code):
            // A new response (after a redirect or a 100 Continue): forget the previous headers.
            headers = [:]
            status = code
        case .field(let name, let value):
            headers[name] = value
        case .other:
            break
        }
    }

    private func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        if !sawFirstBodyByte {
            sawFirstBodyByte = true
            if !prepareSink() { return 0 }
            if (200..<300).contains(status) { onResponseStart?(status, headers) }
        }
        guard (200..<300).contains(status) else {
            // An error page is not content: keep a little of it for the message, never the file.
            if body.count < 4096 { body.append(contentsOf: bytes.prefix(4096 - body.count)) }
            return bytes.count
        }
        bytesReceived += Int64(bytes.count)
        switch sink {
        case .memory(let limit):
            if Int64(body.count + bytes.count) > limit {
                writeFailure = TransportError(code: .tooLarge,
                                              message: "\(url.absoluteString) sent more than \(limit) bytes; refusing the rest",
                                              url: url)
                return 0
            }
            body.append(contentsOf: bytes)
        case .file(let fd, let path, let offset):
            if let maxBytes, offset + bytesReceived > maxBytes {
                writeFailure = TransportError(code: .tooLarge,
                                              message: "\(url.absoluteString) is larger than its declared \(maxBytes) bytes; refusing it",
                                              url: url)
                return 0
            }
            var remaining = bytes
            while !remaining.isEmpty {
                let written = Glibc.write(fd, remaining.baseAddress, remaining.count)
                if written < 0 {
                    let code = Glibc.errno
                    if code == EINTR { continue }
                    let reason = String(cString: strerror(code))
                    writeFailure = TransportError(code: .fileSystem,
                                                  message: "writing \(url.lastPathComponent) to \(path): \(reason)"
                                                      + (code == ENOSPC ? "; free disk space and retry" : ""),
                                                  url: url, errno: code)
                    return 0
                }
                remaining = UnsafeRawBufferPointer(rebasing: remaining[written...])
            }
            onBodyChunk?(bytes)
        }
        return bytes.count
    }

    /// Decides, at the first body byte, whether a resumed file is appended to or started again.
    private func prepareSink() -> Bool {
        guard case .file(let fd, let path, let offset) = sink, (200..<300).contains(status) else { return true }
        if status == 206 && offset > 0 {
            resumedFrom = offset
            return true
        }
        // 200: the whole body is coming (If-Range did not match, or no range was asked).
        if offset > 0 || requestedRange {
            if ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) < 0 {
                let code = Glibc.errno
                writeFailure = TransportError(code: .fileSystem,
                                              message: "restarting \(path): \(String(cString: strerror(code)))",
                                              url: url, errno: code)
                return false
            }
            sink = .file(fd: fd, path: path, offset: 0)
        }
        return true
    }

    private func reportProgress(total: Int64, now: Int64) -> Bool {
        if cancelled.load(ordering: .relaxed) { return false }
        guard let progress, now > 0 else { return true }
        let tick = DispatchTime.now().uptimeNanoseconds
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
        if cancelled.load(ordering: .relaxed) { return .failure(TransportError.cancelled(url)) }
        var finalURL = url
        var effective: UnsafeMutablePointer<CChar>?
        if ccurl_easy_getinfo_string(easy, CURLINFO_EFFECTIVE_URL, &effective) == CURLE_OK, let effective,
           let parsed = URL(string: String(cString: effective)) {
            finalURL = parsed
        }
        guard result == CURLE_OK else {
            let buffered = String(cString: errorBuffer)
            let detail = buffered.isEmpty ? String(cString: curl_easy_strerror(result)) : buffered
            let timedOut = result == CURLE_OPERATION_TIMEDOUT
            return .failure(TransportError(code: timedOut ? .timeout : .network,
                                           message: "GET \(url.absoluteString) failed: \(detail) (curl \(result.rawValue))",
                                           url: url, curlCode: Int(result.rawValue)))
        }
        var code = 0
        ccurl_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &code)
        guard (200..<300).contains(code) || code == 304 else {
            let retryAfter = headers["retry-after"].flatMap { RetryPolicy.parseRetryAfter($0) }
            return .failure(TransportError.status(code, url: finalURL, retryAfter: retryAfter))
        }
        var fileSize: Int64 = 0
        if case .file(_, _, let offset) = sink {
            fileSize = offset + bytesReceived
        }
        let responseBody: Data
        if case .memory = sink { responseBody = body } else { responseBody = Data() }
        return .success(HTTPResponse(statusCode: code, headers: headers, body: responseBody, url: finalURL,
                                     bytesReceived: bytesReceived, resumedFrom: resumedFrom, fileSize: fileSize))
    }
}

extension Duration {
    /// Whole milliseconds, for libcurl's `_MS` options.
    var milliseconds: Int {
        let (seconds, attoseconds) = components
        return Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000)
    }
}
