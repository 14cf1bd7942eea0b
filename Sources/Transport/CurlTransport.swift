import Foundation
import Logging
import Synchronization

/// The default ``Transport``: libcurl's multi interface with connection reuse, HTTP/2 where the
/// server offers it, retries with backoff that honour `Retry-After`, conditional requests and
/// Range resume.
///
/// Every instance owns one I/O thread; share one transport across a process where you can.
public final class CurlTransport: Transport {
    /// How the transport behaves. Every field has a default.
    public struct Configuration: Sendable {
        /// Connections open to one host at once, across all I/O threads. Default 8.
        public var maxConnectionsPerHost = 8
        /// Threads that run transfers, each with its own `curl_multi` handle and connections;
        /// each transfer goes to the least busy one (the first on a tie, so sequential requests
        /// reuse one connection). Receiving, writing and the `onBodyChunk` work (hashing)
        /// of many small files is CPU-bound on one thread, so a second one lets a multi-core
        /// machine overlap them. Default: 2 where there are at least 2 cores, else 1.
        public var ioThreads = min(2, max(1, ProcessInfo.processInfo.activeProcessorCount))
        /// How long connecting may take. Default 10 s.
        public var connectTimeout: Duration = .seconds(10)
        /// A transfer that moves no byte for this long fails (and may be retried). Default 30 s.
        /// It is also the window over which ``minimumRate`` is measured.
        public var stallTimeout: Duration = .seconds(30)
        /// The slowest a transfer may run, in bytes a second: one that averages less over a whole
        /// ``stallTimeout`` fails with ``TransportError/Code/timeout`` and is retried like a
        /// stall, so a server trickling a few bytes a second cannot hold a download for days.
        /// Values under 1 count as 1 (a stall still fails). Default 512 bytes/s: a mobile plan
        /// throttled to 64 kbit/s (8 KB/s) shared by 8 concurrent downloads
        /// gives each about 1 KB/s, which must pass with room to spare; at 512 bytes/s a 1 MB
        /// file still arrives within about 35 minutes instead of never.
        public var minimumRate = 512
        /// The time limit for in-memory fetches that set none. Default 60 s.
        public var dataTimeout: Duration = .seconds(60)
        /// The most bytes an in-memory fetch accepts. Default 64 MiB.
        public var maxDataBytes: Int64 = 64 << 20
        /// Redirects followed (0 turns following off). Default 10.
        public var maxRedirects = 10
        /// Retry behaviour for transient failures.
        public var retry = RetryPolicy()
        /// Rewrites each request before each attempt. Default none.
        public var adapter: (any RequestAdapter)?
        /// The `User-Agent` header.
        public var userAgent = "content-sync/0.1 (+libcurl)"
        /// Where debug-level messages go. Default: a no-op logger.
        public var logger = Logger(label: "content-sync.transport", factory: { _ in SwiftLogNoOpLogHandler() })

        /// A configuration with every field at its default.
        public init() {}
    }

    /// The settings the transport was started with.
    public let configuration: Configuration
    let loops: [CurlMultiLoop]

    /// Refuses a proxy variable libcurl would ignore without a word, connecting directly where
    /// the proxy may be the only way allowed out: one whose URL holds a control character, as
    /// written or escaped (`%0a` in a password). The value is never quoted (it may hold a
    /// password).
    static func checkProxyVariables(_ environment: [String: String]) throws(TransportError) {
        for name in Redaction.proxyVariables {
            guard let value = environment[name] else { continue }
            let decoded = value.removingPercentEncoding ?? value
            guard
                value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
                    || decoded.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
            else { continue }
            throw TransportError(
                code: .invalidRequest,
                message:
                    "the proxy variable \(name) holds a control character (a line break, escaped or not), so libcurl would ignore the proxy and connect directly; fix the variable, or unset it to connect without a proxy"
            )
        }
    }

    /// Starts the transport's I/O threads. Throws when the installed libcurl refuses an option
    /// the transfers rely on (a protocol restriction, a timeout, a callback): at start-up, not
    /// silently at the first request.
    ///
    /// Call ``shutdown()`` when done: it ends the threads and fails what is still running.
    public init(configuration: Configuration = Configuration()) throws(TransportError) {
        self.configuration = configuration
        try Self.checkOptions(configuration)
        try Self.checkProxyVariables(ProcessInfo.processInfo.environment)
        let threads = max(1, min(configuration.ioThreads, configuration.maxConnectionsPerHost))
        // The per-host limit is shared out, so the host sees at most the configured number.
        let perLoop = max(1, configuration.maxConnectionsPerHost / threads)
        var loops: [CurlMultiLoop] = []
        do throws(TransportError) {
            for index in 0..<threads {
                loops.append(try CurlMultiLoop(maxConnectionsPerHost: perLoop, name: "cs.curl.\(index)"))
            }
        } catch {
            // The first loop took every option, so a later one failed for want of a thread or
            // memory (a task limit): the loops made carry the transfers, with their share of
            // the connections. Only none at all is a failure.
            guard !loops.isEmpty else { throw error }
        }
        self.loops = loops
    }

    /// Ends the I/O threads: running transfers fail as cancelled, later requests fail at once,
    /// and the call returns once libcurl's handles are freed. Safe to call more than once. The
    /// owner of the transport calls it; a transport shared by several managers is shut down by
    /// the app after the last of them.
    public func shutdown() async {
        for loop in loops { await loop.shutdown() }
    }

    deinit {
        // The fallback when nobody called shutdown(): ends the threads without waiting for them.
        for loop in loops { loop.beginShutdown() }
    }

    /// Sets every option a transfer uses on a throwaway handle, so a libcurl that lacks one
    /// fails here. Runs once per configuration shape; the handle is never performed.
    private static func checkOptions(_ configuration: Configuration) throws(TransportError) {
        var probe = HTTPRequest(url: URL(string: "https://probe.invalid/")!)
        probe.method = "HEAD"
        probe.headers["X-Probe"] = "1"
        probe.timeout = .seconds(1)
        let received: @Sendable (TransferProgress) -> Void = { _ in }
        let transfer = try CurlTransfer(
            request: probe, sink: .memory(limit: 1), configuration: configuration, maxBytes: 1, progress: received)
        // The socket callbacks every transfer gets on its loop (LoopSockets), refused by a libcurl
        // before 7.80 (CURLOPT_PREREQFUNCTION): loudly here, not silently per transfer.
        let sockets = LoopSockets()
        defer { withExtendedLifetime(sockets) {} }
        guard sockets.attach(transfer.easy, transfer: Unmanaged.passUnretained(transfer).toOpaque()) else {
            throw TransportError(
                code: .invalidRequest,
                message:
                    "libcurl refused the socket callbacks (CURLOPT_SOCKOPTFUNCTION, CURLOPT_CLOSESOCKETFUNCTION, CURLOPT_PREREQFUNCTION); this transport needs libcurl 7.85 or later"
            )
        }
        // A method other than GET and HEAD (CURLOPT_CUSTOMREQUEST: a publish's uploads).
        probe.method = "PUT"
        _ = try CurlTransfer(
            request: probe, sink: .memory(limit: 1), configuration: configuration, maxBytes: 1, progress: received)
    }

    /// Fetches `request` into memory, with ``Configuration/dataTimeout`` when it sets no time limit
    /// and at most ``Configuration/maxDataBytes`` bytes (or the request's
    /// ``HTTPRequest/maxBodyBytes``, when lower), retrying transient failures.
    public func data(for request: HTTPRequest) async throws -> HTTPResponse {
        try await withRetries(request) { request in
            var request = request
            if request.timeout == nil { request.timeout = self.configuration.dataTimeout }
            let limit = min(max(request.maxBodyBytes ?? .max, 0), self.configuration.maxDataBytes)
            let transfer = try CurlTransfer(
                request: request, sink: .memory(limit: limit),
                configuration: self.configuration, maxBytes: nil, progress: nil)
            return try await self.run(transfer)
        }
    }

    /// Downloads to `path`, created (mode 0644) when missing; a file already there is resumed when
    /// ``DownloadOptions/resumeETag`` allows, else emptied first.
    public func download(_ request: HTTPRequest, to path: String, options: DownloadOptions) async throws -> HTTPResponse
    {
        // Never through a symlink, into a FIFO, or into a file with other names: each would put
        // the body somewhere else than `path`. (`/proc/self/fd/N`, a descriptor's own name for a
        // transport that downloads only to paths, is a link by design.)
        // Exactly `/proc/self/fd/<digits>`: a path below one (a held folder's file) is opened
        // without following its last name like any other.
        let descriptorName =
            path.hasPrefix("/proc/self/fd/") && path.utf8.count > 14
            && path.utf8.dropFirst(14).allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK | (descriptorName ? 0 : O_NOFOLLOW), 0o644)
        guard fd >= 0 else {
            let code = errno
            throw TransportError(
                code: .fileSystem,
                message: code == ELOOP
                    ? "cannot download \(Redaction.url(request.url)) to \(path): it is a symlink; remove it"
                    : "cannot open \(path) for the download of \(Redaction.url(request.url)): \(String(cString: strerror(code)))",
                url: request.url, errno: code)
        }
        defer { close(fd) }
        var info = stat()
        let kind = fstat(fd, &info) == 0 ? info.st_mode & S_IFMT : 0
        guard kind == S_IFCHR || (kind == S_IFREG && (info.st_nlink <= 1 || descriptorName)) else {
            throw TransportError(
                code: .fileSystem,
                message:
                    "cannot download \(Redaction.url(request.url)) to \(path): it is not a regular file with one name (a FIFO, a folder, or a file with other hard links); remove it",
                url: request.url, errno: EEXIST)
        }
        return try await download(request, fd: fd, path: path, options: options)
    }

    /// Downloads into the open file `descriptor`, resuming from what it holds as
    /// ``download(_:to:options:)`` does.
    public func download(_ request: HTTPRequest, into descriptor: Int32, options: DownloadOptions) async throws
        -> HTTPResponse
    {
        try await download(
            request, fd: descriptor, path: "an unnamed file (descriptor \(descriptor))", options: options)
    }

    /// Both downloads: `path` names the file in messages.
    private func download(_ request: HTTPRequest, fd: Int32, path: String, options: DownloadOptions) async throws
        -> HTTPResponse
    {
        var received: Int64 = 0
        var etag = options.resumeETag
        // Set once the server has answered a resume with other bytes: no more resumes this call.
        var resumeRefused = false
        // The whole length the answer whose bytes are resumed declared (this call's, or the one
        // the caller kept): a 416 that calls a shorter file whole contradicts it.
        var entityLength: Int64? = options.resumeLength
        var response = try await withRetries(request) { request in
            // Each attempt resumes from what is on disk when the ETag says it is the same entity;
            // an overwrite starts over the old bytes, and cuts the file after the body.
            let onDisk = options.overwrite ? 0 : Int64(lseek(fd, 0, SEEK_END))
            var offset: Int64 = 0
            var request = request
            // A request that names its own range is fetched as asked, never resumed.
            let ownRange = request.headers.keys.contains { $0.lowercased() == "range" }
            if onDisk > 0, let etag, !ownRange, !resumeRefused {
                offset = onDisk
                request.headers["If-Range"] = etag
            } else if onDisk > 0 {
                if let failure = CurlTransfer.emptyFile(fd, path: path, url: request.url) { throw failure }
            }
            _ = lseek(fd, off_t(offset), SEEK_SET)
            let transfer = try CurlTransfer(
                request: request, sink: .file(fd: fd, path: path, offset: offset),
                configuration: self.configuration,
                maxBytes: options.maxBytes, progress: options.progress,
                onResponseStart: options.onResponseStart, onBodyChunk: options.onBodyChunk,
                admitsSize: options.admitsSize)
            do {
                let response = try await self.run(transfer)
                // A resume answered with a shorter (or longer) whole than the answer its bytes came
                // from declared: another entity under the same tag, or a lie; the file is not it.
                if offset > 0, response.statusCode == 206, let entityLength,
                    let total = ResponseExpectation.completeLength(ofContentRange: response.headers["content-range"]),
                    total != entityLength
                {
                    if let failure = CurlTransfer.emptyFile(fd, path: path, url: request.url) { throw failure }
                    etag = nil
                    resumeRefused = true
                    throw TransportError.invalidResponse(
                        request.method, response.url,
                        "its resume says the file is \(total) bytes, but the answer the kept bytes came from said \(entityLength)",
                        statusCode: 206)
                }
                received += response.bytesReceived
                if options.overwrite, let failure = CurlTransfer.cutAtPosition(fd, path: path, url: request.url) {
                    throw failure
                }
                return response
            } catch let error as TransportError where error.statusCode == 416 && offset > 0 {
                // If-Range matched but nothing lies past `offset`: the file on disk is already whole
                // (a run stopped after the last byte), unless the 416 names another entity (a server
                // that ignores If-Range). Anything else there cannot be trusted.
                let answeredETag = transfer.headers["etag"]
                if let range = transfer.headers["content-range"], range.hasPrefix("bytes */"),
                    Int64(range.dropFirst("bytes */".count)) == offset, answeredETag == nil || answeredETag == etag,
                    // Only a length kept from the answer the bytes came from can say the file
                    // is whole: without one, a half file would be believed (it is fetched anew).
                    entityLength == offset
                {
                    return HTTPResponse(
                        statusCode: 206, headers: transfer.headers, url: error.url ?? request.url,
                        resumedFrom: offset, fileSize: offset)
                }
                if let failure = CurlTransfer.emptyFile(fd, path: path, url: error.url ?? request.url) { throw failure }
                throw error
            } catch let error as TransportError where error.code == .invalidResponse {
                // The answer did not fit the request: neither what this attempt wrote nor the bytes
                // it would have continued can be trusted. Dropping both, and the tag, makes the next
                // attempt (and the next run, which finds an empty file) a plain GET.
                received += transfer.bytesReceived
                if let failure = CurlTransfer.emptyFile(fd, path: path, url: error.url ?? request.url) { throw failure }
                etag = nil
                resumeRefused = true
                throw error
            } catch {
                received += transfer.bytesReceived
                if etag == nil, !resumeRefused { etag = transfer.resumableETag }
                if transfer.resumableETag != nil, transfer.resumableETag == etag {
                    entityLength = transfer.entityLength ?? entityLength
                }
                throw error
            }
        }
        response.bytesReceived = received
        return response
    }

    /// Hands the transfer to the loop and waits; task cancellation removes it within milliseconds.
    private func run(_ transfer: CurlTransfer) async throws -> HTTPResponse {
        let loop = loops.min { $0.inFlight.load(ordering: .relaxed) < $1.inFlight.load(ordering: .relaxed) }!
        loop.inFlight.add(1, ordering: .relaxed)
        defer { loop.inFlight.subtract(1, ordering: .relaxed) }
        transfer.group = TransferGroup.current
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                transfer.continuation = continuation
                loop.add(transfer)
            }
        } onCancel: {
            loop.cancel(transfer)
        }
    }

    private func withRetries(
        _ original: HTTPRequest,
        _ attempt: (HTTPRequest) async throws -> HTTPResponse
    ) async throws -> HTTPResponse {
        var number = 1
        // The request as it goes on after redirects to other origins this transport followed
        // itself (``HTTPRequest/redirected(to:)``), and those redirects.
        var current = original
        var followed: [HTTPRedirect] = []
        while true {
            if Task.isCancelled || TransferGroup.current?.isCancelled == true {
                throw TransportError.cancelled(original.url)
            }
            var request = current
            if let adapter = configuration.adapter {
                try await adapter.adapt(&request)
            }
            let policy = original.retry ?? configuration.retry
            do {
                var response = try await attempt(request)
                response.redirects = followed + response.redirects
                // A delivered error status (the caller takes every status) is retried as the
                // thrown one would be; the last attempt's answer is returned as it came.
                guard request.returnsEveryStatus, response.statusCode >= 400 else { return response }
                let retryAfter = response.headers["retry-after"].flatMap { RetryPolicy.parseRetryAfter($0) }
                let error = TransportError.status(response.statusCode, url: response.url, retryAfter: retryAfter)
                guard let delay = policy.delay(after: error, attempt: number, jitter: Double.random(in: 0..<1))
                else { return response }
                try await pause(delay, before: number + 1, of: request, after: error)
                number += 1
            } catch let error as TransportError {
                if let (next, redirect) = error.redirectToOtherOrigin {
                    guard followed.count < configuration.maxRedirects else {
                        throw TransportError(
                            code: .invalidResponse,
                            message:
                                "\(Redaction.url(original.url)) redirected more than \(configuration.maxRedirects) times; check the URL",
                            url: original.url)
                    }
                    followed.append(redirect)
                    // The credentials stay on the origin they were given for; once dropped, they
                    // do not come back (A → B → A).
                    let home = CurlTransfer.curlOrigin(of: original.url.absoluteString)
                    current =
                        home != nil && CurlTransfer.curlOrigin(of: next.absoluteString) == home
                        ? current.followed(to: next) : current.redirected(to: next)
                    continue
                }
                if error.code == .cancelled { throw error }
                if Task.isCancelled { throw TransportError.cancelled(request.url) }
                guard
                    let delay = policy.delay(
                        after: error, attempt: number, jitter: Double.random(in: 0..<1))
                else {
                    throw error
                }
                try await pause(delay, before: number + 1, of: request, after: error)
                number += 1
            }
        }
    }

    /// Logs the retry and sleeps `delay`; cancellation ends the wait as a cancelled request.
    private func pause(_ delay: Duration, before attempt: Int, of request: HTTPRequest, after error: TransportError)
        async throws(TransportError)
    {
        configuration.logger.debug(
            "retrying after transient failure",
            metadata: [
                "transport.url": "\(Redaction.url(request.url))",
                "transport.attempt": "\(attempt - 1)",
                "transport.delay_ms": "\(delay.milliseconds)",
                "transport.error": "\(error.message)",
            ])
        do {
            try await Task.sleep(for: delay.clampedWait)
        } catch {
            throw TransportError.cancelled(request.url)
        }
    }
}
