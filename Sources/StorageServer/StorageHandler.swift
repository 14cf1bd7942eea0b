import Foundation

import enum Transport.HTTPDate

/// Answers one request the way a static host (GitHub raw, nginx) would, applying any fault that
/// matches, and logs what it answered.
struct StorageHandler: Sendable {
    let state: ServerState
    let configuration: StorageServer.Configuration

    /// Answers `request`, which arrived on `socket`, and logs the answer.
    func answer(_ request: RequestHead, on socket: ConnectionSocket) -> ServedAnswer {
        let rawPath = request.path
        let path = RequestPath.loggable(rawPath)
        state.answering(path)
        defer { state.answered(path) }
        var record = RequestRecord(
            method: request.method,
            path: path,
            headers: Self.headerDictionary(request.headers),
            status: 0,
            bodyBytes: 0
        )
        let (response, bodyBytes) = answer(request, rawPath: rawPath, on: socket, record: &record)
        record.status = response.status
        record.bodyBytes = bodyBytes
        state.record(record)
        return response
    }

    /// The response and the body bytes it will carry.
    private func answer(
        _ request: RequestHead,
        rawPath: String,
        on socket: ConnectionSocket,
        record: inout RequestRecord
    ) -> (ServedAnswer, Int) {
        guard request.method == "GET" || request.method == "HEAD" else {
            return (ServedAnswer(status: 405, headers: [("Allow", "GET, HEAD")]), 0)
        }
        guard let path = RequestPath(percentEncoded: rawPath) else {
            return (ServedAnswer(status: 404), 0)
        }
        record.path = path.decoded

        let fault = state.takeFault(for: path.decoded)
        record.fault = fault
        var shape = BodyShape()
        var openedForShape: OpenedFile?
        switch fault {
        case .status(let code, let headers, let body)?:
            return statusResponse(code: code, headers: headers, body: body, isHead: request.method == "HEAD")
        case .redirect(let target, let code)?:
            return (redirectResponse(to: target, code: code), 0)
        case .delay(let seconds)?:
            // A stop ends the delay; the connection then closes unanswered.
            guard socket.sleep(for: .seconds(max(0, seconds))) else {
                return (ServedAnswer(status: 503, headers: [("Retry-After", "1")]), 0)
            }
        case .truncate(let afterBytes)?:
            shape.cut = max(0, afterBytes)
            shape.ending = .truncate
        case .reset(let afterBytes)?:
            shape.cut = max(0, afterBytes)
            shape.ending = .reset
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
                return (ServedAnswer(status: 404), 0)
            }
            openedForShape = file
            do {
                let compressed = try GzipEncoding.compressWaiting(try file.read(at: 0, count: file.size))
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
        _ path: RequestPath, for request: RequestHead, shape: BodyShape,
        opened: OpenedFile? = nil
    ) -> (ServedAnswer, Int) {
        let root = state.root
        guard let file = opened ?? OpenedFile.open(path, under: root) else {
            Self.reportUnexpectedNotFound(path, root: root)
            return (ServedAnswer(status: 404), 0)
        }
        var size = file.size
        var entityTag = file.entityTag.value
        var headers = ResponseHeaders()
        headers["Content-Type"] = ContentType.forFileName(path.components.last ?? "")
        headers["Accept-Ranges"] = "bytes"
        if case .gzip(let compressed, let tag) = shape.representation {
            size = compressed.count
            entityTag = tag
            headers["Content-Encoding"] = "gzip"
        }
        headers["ETag"] = entityTag
        headers["Last-Modified"] = HTTPDate.format(file.modificationSeconds)
        for (name, value) in state.extraHeaders(for: path.decoded) {
            headers[name] = value
        }

        // The preconditions in RFC 9110 §13.2.2's order. A client that pins its requests to one
        // version of the file (ranges of an archive) is told when the file changed under it, as
        // nginx does: first by If-Match, else by If-Unmodified-Since.
        if let ifMatch = request.value("if-match") {
            if !EntityTag.matches(entityTag, ifMatch: ifMatch) {
                return (ServedAnswer(status: 412, headers: headers.lines), 0)
            }
        } else if let ifUnmodifiedSince = request.value("if-unmodified-since"),
            let since = HTTPDate.parse(ifUnmodifiedSince, currentYear: HTTPDate.currentYear()),
            file.modificationSeconds > since
        {
            return (ServedAnswer(status: 412, headers: headers.lines), 0)
        }
        if Self.isNotModified(request, entityTag: entityTag, modificationSeconds: file.modificationSeconds) {
            // RFC 9110 §8.6 allows a 304 to carry the length the 200 would have had, and only that.
            headers["Content-Length"] = String(size)
            return (ServedAnswer(status: 304, headers: headers.lines), 0)
        }
        var byteRange = ByteRange(header: request.value("range"), size: size)
        if byteRange != .whole,
            let ifRange = request.value("if-range"),
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

        let status: Int
        let range: Range<Int>
        switch byteRange {
        case .unsatisfiable:
            headers["Content-Range"] = "bytes */\(size)"
            return (ServedAnswer(status: 416, headers: headers.lines), 0)
        case .partial(let partial):
            status = 206
            range = partial
            headers["Content-Range"] = "bytes \(partial.lowerBound)-\(partial.upperBound - 1)/\(size)"
        case .whole:
            status = 200
            range = 0..<size
        }

        if request.method == "HEAD" {
            headers["Content-Length"] = String(range.count)
            return (ServedAnswer(status: status, headers: headers.lines), 0)
        }
        var answer = ServedAnswer(status: status)
        let sent: Int
        switch shape.representation {
        case .gzip(let compressed, _):
            answer.body = .bytes(compressed.subdata(in: range))
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
            answer.body = .file(bytes)
            switch shape.length {
            case .chunked(let claimed):
                // Sent chunked, beside a Content-Length that says otherwise.
                headers["Content-Length"] = String(claimed)
                answer.framing = .chunked
            case .duplicated(let second):
                headers["Content-Length"] = String(range.count)
                headers.add("Content-Length", String(second))
            case .faithful:
                break
            }
        }
        answer.headers = headers.lines
        return (answer, sent)
    }

    /// Whether the conditional headers of a GET or HEAD ask for a 304 (RFC 9110 §13.2.2): a
    /// matching `If-None-Match`, or, only when that header is absent, an `If-Modified-Since` date
    /// the file was not modified after. An `If-Modified-Since` that is not an HTTP date is ignored.
    static func isNotModified(_ request: RequestHead, entityTag: String, modificationSeconds: Int64) -> Bool {
        if let ifNoneMatch = request.value("if-none-match") {
            return EntityTag.matches(entityTag, ifNoneMatch: ifNoneMatch)
        }
        guard let ifModifiedSince = request.value("if-modified-since"),
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

    private func statusResponse(code: Int, headers: [String: String], body: Data, isHead: Bool) -> (ServedAnswer, Int) {
        var lines = ResponseHeaders()
        for (name, value) in headers {
            lines[name] = value
        }
        if !body.isEmpty, lines["Content-Type"] == nil {
            lines["Content-Type"] = "text/plain; charset=utf-8"
        }
        if isHead {
            lines["Content-Length"] = String(body.count)
            return (ServedAnswer(status: code, headers: lines.lines), 0)
        }
        return (ServedAnswer(status: code, headers: lines.lines, body: .bytes(body)), body.count)
    }

    private func redirectResponse(to target: String, code: Int) -> ServedAnswer {
        let location: String
        if target.contains("://") {
            location = target
        } else {
            // Relative to the server, as RFC 9110 §10.2.2 allows; curl -L and libcurl resolve it.
            location = StorageServer.percentEncodedPath(target)
        }
        return ServedAnswer(status: code, headers: [("Location", location)])
    }

    private static func headerDictionary(_ headers: [RequestHead.Header]) -> [String: String] {
        var dictionary: [String: String] = [:]
        for header in headers {
            dictionary[header.name] = dictionary[header.name].map { "\($0), \(header.value)" } ?? header.value
        }
        return dictionary
    }
}

/// Response header lines in the order set; setting a name (any case) replaces its lines.
struct ResponseHeaders {
    private(set) var lines: [(name: String, value: String)] = []

    subscript(name: String) -> String? {
        get { lines.first { $0.name.lowercased() == name.lowercased() }?.value }
        set {
            guard let newValue else {
                lines.removeAll { $0.name.lowercased() == name.lowercased() }
                return
            }
            let lowered = name.lowercased()
            if let index = lines.firstIndex(where: { $0.name.lowercased() == lowered }) {
                lines[index].value = newValue
                lines = lines.enumerated().filter { $0.offset == index || $0.element.name.lowercased() != lowered }
                    .map(\.element)
            } else {
                lines.append((name, newValue))
            }
        }
    }

    /// Adds one more line named `name`, beside any there.
    mutating func add(_ name: String, _ value: String) {
        lines.append((name, value))
    }
}
