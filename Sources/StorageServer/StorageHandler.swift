internal import FlyingFox
import Foundation

import enum Transport.HTTPDate

/// Answers one request the way a static host (GitHub raw, nginx) would, applying any fault that
/// matches, and logs what it answered.
struct StorageHandler: HTTPHandler {
    let state: ServerState
    let configuration: StorageServer.Configuration

    func handleRequest(_ request: HTTPRequest) async throws -> HTTPResponse {
        let rawPath = request.target.path(percentEncoded: true)
        let path = RequestPath.loggable(rawPath)
        state.answering(path)
        defer { state.answered(path) }
        var record = RequestRecord(
            method: request.method.rawValue,
            path: path,
            headers: Self.headerDictionary(request.headers),
            status: 0,
            bodyBytes: 0
        )
        let (response, bodyBytes) = try await answer(request, rawPath: rawPath, record: &record)
        record.status = response.statusCode.code
        record.bodyBytes = bodyBytes
        state.record(record)
        return response
    }

    /// The response and the body bytes it will carry.
    private func answer(
        _ request: HTTPRequest,
        rawPath: String,
        record: inout RequestRecord
    ) async throws -> (HTTPResponse, Int) {
        guard request.method == .GET || request.method == .HEAD else {
            return (
                HTTPResponse(statusCode: .methodNotAllowed, headers: HTTPHeaders([HTTPHeader("Allow"): "GET, HEAD"])), 0
            )
        }
        guard let path = RequestPath(percentEncoded: rawPath) else {
            return (HTTPResponse(statusCode: .notFound), 0)
        }
        record.path = path.decoded

        let fault = state.takeFault(for: path.decoded)
        record.fault = fault
        var shape = BodyShape()
        var openedForShape: OpenedFile?
        switch fault {
        case .status(let code, let headers, let body)?:
            return statusResponse(code: code, headers: headers, body: body, isHead: request.method == .HEAD)
        case .redirect(let target, let code)?:
            return (redirectResponse(to: target, code: code), 0)
        case .delay(let seconds)?:
            try await Task.sleep(for: .seconds(max(0, seconds)))
        case .truncate(let afterBytes)?:
            shape.cut = max(0, afterBytes)
            shape.ending = .truncate
        case .reset(let afterBytes)?:
            guard let ends = ConnectionReset.Ends(of: request) else {
                return statusResponse(
                    code: 500, headers: [:], body: Data("StorageServer: no peer address to reset".utf8), isHead: false)
            }
            shape.cut = max(0, afterBytes)
            shape.ending = .reset(ends)
        case .stall?:
            let generation = state.faultGeneration
            let state = self.state
            shape.cut = max(0, configuration.stallAfterBytes)
            shape.ending = .stall(limit: configuration.stallLimit, isReleased: { state.faultGeneration != generation })
        case .trickle(let bytesPerSecond)?:
            shape.bytesPerSecond = max(1, bytesPerSecond)
        case .wholeBodyAsPartialContent?:
            shape.range = .wholeAsPartial
        case .shiftedRange(let startShift, let endShift)?:
            shape.range = .shifted(start: startShift, end: endShift)
        case .gzipEncoded?:
            guard let file = OpenedFile.open(path, under: state.root) else {
                return (HTTPResponse(statusCode: .notFound), 0)
            }
            openedForShape = file
            do {
                let compressed = try await GzipEncoding.compress(try file.read(at: 0, count: file.size))
                shape.representation = .gzip(compressed, entityTag: String(file.entityTag.value.dropLast()) + "-gzip\"")
            } catch {
                return statusResponse(
                    code: 500, headers: [:], body: Data("StorageServer: \(error)".utf8), isHead: false)
            }
        case .misstatedLength(let claimed)?:
            shape.length = .chunked(claimed: claimed)
        case .duplicateContentLength(let second)?:
            shape.length = .duplicated(second: second)
        case nil:
            break
        }
        return serveFile(path, for: request, shape: shape, opened: openedForShape)
    }

    /// How a served file departs from a faithful answer, as set by the fault.
    struct BodyShape {
        /// Bytes sent before `ending` applies.
        var cut = Int.max
        var ending = FileBytes.Ending.complete
        var bytesPerSecond: Int?
        var range = RangeAnswer.faithful
        var representation = Representation.file
        var length = LengthHeader.faithful

        enum RangeAnswer {
            case faithful
            case wholeAsPartial
            case shifted(start: Int, end: Int)
        }

        enum Representation {
            case file
            /// Compressed bytes served instead of the file, with their own tag.
            case gzip(Data, entityTag: String)
        }

        enum LengthHeader {
            case faithful
            case chunked(claimed: Int)
            case duplicated(second: Int)
        }
    }

    /// A 404 for a regular file that exists means something is wrong in the server or the
    /// machine, not in the client under test: say so on stderr, with the errno, so a rare failure
    /// names its cause.
    private static func reportUnexpectedNotFound(_ path: RequestPath, root: URL) {
        let full = root.path + "/" + path.components.joined(separator: "/")
        var info = stat()
        guard lstat(full, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return }
        let resolved = realpath(full, nil)
        let realpathErrno = resolved == nil ? errno : 0
        let resolvedPath = resolved.map { String(cString: $0) }
        free(resolved)
        // A file reached through a symlink that leaves the root is refused on purpose.
        if let resolvedPath, let rootResolved = realpath(root.path, nil) {
            let prefix = String(cString: rootResolved) + "/"
            free(rootResolved)
            guard resolvedPath.utf8.starts(with: prefix.utf8) else { return }
        }
        let descriptor = open(full, O_RDONLY | O_CLOEXEC)
        let openErrno = descriptor < 0 ? errno : 0
        if descriptor >= 0 { close(descriptor) }
        // write(2), not FileHandle: `sync-agent serve` ignores SIGPIPE, and FileHandle.write
        // traps on the EPIPE a closed stderr then gives.
        let line = Array(
            "StorageServer: answered 404 for existing file \(full) (open errno \(openErrno), realpath errno \(realpathErrno), root \(root.path))\n"
                .utf8)
        _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }

    /// Serves the file at `path` (or `opened`, when the fault already opened it) as `shape` says.
    private func serveFile(
        _ path: RequestPath, for request: HTTPRequest, shape: BodyShape,
        opened: OpenedFile? = nil
    ) -> (HTTPResponse, Int) {
        let root = state.root
        guard let file = opened ?? OpenedFile.open(path, under: root) else {
            Self.reportUnexpectedNotFound(path, root: root)
            return (HTTPResponse(statusCode: .notFound), 0)
        }
        var size = file.size
        var entityTag = file.entityTag.value
        var headers: HTTPHeaders = [
            .contentType: ContentType.forFileName(path.components.last ?? ""),
            .acceptRanges: "bytes",
        ]
        if case .gzip(let compressed, let tag) = shape.representation {
            size = compressed.count
            entityTag = tag
            headers[HTTPHeader("Content-Encoding")] = "gzip"
        }
        headers[.eTag] = entityTag
        headers[.lastModified] = HTTPDate.format(file.modificationSeconds)
        // Set one by one: HTTPHeaders' dictionary literal would split "max-age=60, public".
        for (name, value) in state.extraHeaders(for: path.decoded) {
            headers.setValues([value], for: HTTPHeader(name))
        }

        if Self.isNotModified(request, entityTag: entityTag, modificationSeconds: file.modificationSeconds) {
            // RFC 9110 §8.6 allows a 304 to carry the length the 200 would have had, and only that.
            headers[.contentLength] = String(size)
            return (HTTPResponse(statusCode: .notModified, headers: headers), 0)
        }

        // A client that pins its requests to one version of the file (ranges of an archive) is
        // told when the file changed under it, as nginx does.
        if let ifMatch = request.headers[HTTPHeader("If-Match")], !EntityTag.matches(entityTag, ifMatch: ifMatch) {
            return (HTTPResponse(statusCode: .preconditionFailed, headers: headers), 0)
        }
        var byteRange = ByteRange(header: request.headers[.range], size: size)
        if byteRange != .whole,
            let ifRange = request.headers[HTTPHeader("If-Range")],
            !EntityTag.matches(entityTag, ifRange: ifRange)
        {
            byteRange = .whole
        }
        switch (shape.range, byteRange) {
        case (.wholeAsPartial, _) where size > 0:
            byteRange = .partial(0..<size)
        case (.shifted(let startShift, let endShift), .partial(let asked)):
            let lower = min(max(0, asked.lowerBound + startShift), size - 1)
            let upper = min(max(lower + 1, asked.upperBound + endShift), size)
            byteRange = .partial(lower..<upper)
        default:
            break
        }

        let status: HTTPStatusCode
        let range: Range<Int>
        switch byteRange {
        case .unsatisfiable:
            headers[.contentRange] = "bytes */\(size)"
            return (HTTPResponse(statusCode: .rangeNotSatisfiable, headers: headers), 0)
        case .partial(let partial):
            status = .partialContent
            range = partial
            headers[.contentRange] = "bytes \(partial.lowerBound)-\(partial.upperBound - 1)/\(size)"
        case .whole:
            status = .ok
            range = 0..<size
        }

        if request.method == .HEAD {
            headers[.contentLength] = String(range.count)
            return (HTTPResponse(statusCode: status, headers: headers), 0)
        }
        let body: HTTPBodySequence
        let sent: Int
        switch shape.representation {
        case .gzip(let compressed, _):
            body = HTTPBodySequence(data: compressed.subdata(in: range), suggestedBufferSize: configuration.chunkSize)
            sent = range.count
        case .file:
            let bytes = FileBytes(
                file: file,
                range: range,
                chunkSize: configuration.chunkSize,
                cut: Self.effectiveCut(shape.cut, ending: shape.ending, count: range.count),
                ending: shape.ending,
                bytesPerSecond: shape.bytesPerSecond
            )
            sent = bytes.cut
            switch shape.length {
            case .chunked(let claimed):
                // No count: FlyingFox sends it chunked, and keeps the Content-Length set here.
                headers[.contentLength] = String(claimed)
                body = HTTPBodySequence(from: bytes, suggestedBufferSize: bytes.chunkSize)
            case .duplicated(let second):
                headers.setValues([String(range.count), String(second)], for: .contentLength)
                body = HTTPBodySequence(from: bytes, count: range.count, suggestedBufferSize: bytes.chunkSize)
            case .faithful:
                body = HTTPBodySequence(from: bytes, count: range.count, suggestedBufferSize: bytes.chunkSize)
            }
        }
        return (HTTPResponse(statusCode: status, headers: headers, body: body), sent)
    }

    /// Whether the conditional headers of a GET or HEAD ask for a 304 (RFC 9110 §13.2.2): a
    /// matching `If-None-Match`, or, only when that header is absent, an `If-Modified-Since` date
    /// the file was not modified after. An `If-Modified-Since` that is not an HTTP date is ignored.
    static func isNotModified(_ request: HTTPRequest, entityTag: String, modificationSeconds: Int64) -> Bool {
        if let ifNoneMatch = request.headers[.ifNoneMatch] {
            return EntityTag.matches(entityTag, ifNoneMatch: ifNoneMatch)
        }
        guard let ifModifiedSince = request.headers[.ifModifiedSince],
            let since = HTTPDate.parse(ifModifiedSince, currentYear: HTTPDate.currentYear())
        else { return false }
        return modificationSeconds <= since
    }

    /// Where a faulty body stops. A stall always withholds at least one byte, or the client would
    /// finish before the stall began.
    static func effectiveCut(_ cut: Int, ending: FileBytes.Ending, count: Int) -> Int {
        switch ending {
        case .complete: count
        case .truncate, .reset: min(cut, count)
        case .stall: min(cut, max(0, count - 1))
        }
    }

    private func statusResponse(code: Int, headers: [String: String], body: Data, isHead: Bool) -> (HTTPResponse, Int) {
        var httpHeaders = HTTPHeaders()
        for (name, value) in headers {
            httpHeaders[HTTPHeader(name)] = value
        }
        if !body.isEmpty, httpHeaders[.contentType] == nil {
            httpHeaders[.contentType] = "text/plain; charset=utf-8"
        }
        let status = HTTPStatusCode(code, phrase: Self.reasonPhrase(for: code))
        if isHead {
            httpHeaders[.contentLength] = String(body.count)
            return (HTTPResponse(statusCode: status, headers: httpHeaders), 0)
        }
        return (HTTPResponse(statusCode: status, headers: httpHeaders, body: body), body.count)
    }

    private func redirectResponse(to target: String, code: Int) -> HTTPResponse {
        let location: String
        if target.contains("://") {
            location = target
        } else {
            // Relative to the server, as RFC 9110 §10.2.2 allows; curl -L and libcurl resolve it.
            location = StorageServer.percentEncodedPath(target)
        }
        return HTTPResponse(
            statusCode: HTTPStatusCode(code, phrase: Self.reasonPhrase(for: code)),
            headers: [.location: location]
        )
    }

    private static func headerDictionary(_ headers: HTTPHeaders) -> [String: String] {
        var dictionary: [String: String] = [:]
        for (name, value) in headers {
            let key = name.rawValue.lowercased()
            dictionary[key] = dictionary[key].map { "\($0), \(value)" } ?? value
        }
        return dictionary
    }

    private static func reasonPhrase(for code: Int) -> String {
        switch code {
        case 200: "OK"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 408: "Request Timeout"
        case 410: "Gone"
        case 416: "Range Not Satisfiable"
        case 429: "Too Many Requests"
        case 500: "Internal Server Error"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: "Status \(code)"
        }
    }
}
