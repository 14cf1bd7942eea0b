import FileKit
import Foundation
import Transport

/// Brings an item's bytes from where they live: a server, a file, or code that makes them.
/// ``HTTPFetcher`` (on `Transport`) is the default for `http` and `https`, ``FileFetcher`` for
/// `file`; ``ItemLoader/register(_:for:)`` adds others per scheme or context.
public protocol ItemFetching: Sendable {
    /// Fetches `request`. A fetcher that cannot revalidate ignores the validators and returns
    /// ``FetchResponse/Body/fetched(_:)``. Throws for a failure; cancellation ends it early.
    func fetch(_ request: FetchRequest) async throws -> FetchResponse
}

/// What to fetch.
public struct FetchRequest: Sendable {
    /// The item's key.
    public var key: CacheKey
    /// The address with its parameters in the query (nil for a custom key).
    public var url: URL?
    /// Headers to send: the key's varying headers and the caller's.
    public var headers: [String: String]
    /// The stored item's entity tag, for `If-None-Match`.
    public var etag: String?
    /// The stored item's `Last-Modified`, for `If-Modified-Since`.
    public var lastModified: String?
    /// A folder on the cache's file system for scratch files (the cache folder itself), so that
    /// nothing is written anywhere else.
    public var scratchFolder: String
    /// Called with the bytes received against the total, when known.
    public var progress: ProgressHandler?
    /// The largest value the cache can keep (its limit less what the folder itself takes); nil
    /// for no limit. A body declared larger is never staged in the cache folder: the fetcher
    /// reads it into memory instead, and the loader delivers it without keeping it.
    public var keepLimit: Int64?
    /// Retries for this fetch (``LoadingConfiguration/retry``); nil for the transport's.
    public var retry: RetryPolicy?
    /// The time limit of one exchange (``LoadingConfiguration/timeout``); nil for the transport's.
    public var timeout: Duration?
    /// A body larger than this may come back as its staged file (``FetchResponse/Body/file(_:)``)
    /// rather than as one `Data`; nil: always `Data`. The loader sets it to the memory tier's
    /// item limit when its store can keep a file as it is.
    public var fileThreshold: Int64?
    /// False when the loader keeps nothing of the answer, whatever it is (the caller's
    /// `no-store`): a fetcher then makes no copy in the cache folder that would only be dropped.
    public var mayKeep = true

    /// A request for `key` at `url`.
    public init(
        key: CacheKey, url: URL?, headers: [String: String] = [:], etag: String? = nil, lastModified: String? = nil,
        scratchFolder: String, progress: ProgressHandler? = nil
    ) {
        self.key = key
        self.url = url
        self.headers = headers
        self.etag = etag
        self.lastModified = lastModified
        self.scratchFolder = scratchFolder
        self.progress = progress
    }
}

/// What a fetch brought.
public struct FetchResponse: Sendable {
    /// The bytes, or the news that the stored ones are still current.
    public enum Body: Sendable {
        /// New bytes.
        case fetched(Data)
        /// New bytes larger than ``FetchRequest/fileThreshold``, in the file they were
        /// downloaded into (in ``FetchRequest/scratchFolder``, checked as it was written): the
        /// cache names it as the stored value without copying it.
        case file(ValueFile)
        /// `304 Not Modified`: the stored value stands; no body moved.
        case notModified
    }

    /// The body.
    public var body: Body
    /// The HTTP status: 200 unless the fetcher says otherwise (a 404 page, a 410, a 204; a
    /// 304 is ``Body/notModified``).
    public var status: Int
    /// Response headers, names lower-cased (`cache-control`, `etag`, `last-modified`,
    /// `content-type`, `expires`, `age`, `date`, `vary`), lines of one name combined.
    public var headers: [String: String]
    /// Every header line, in order; empty when the fetcher gave only ``headers`` (the loader
    /// then keeps those).
    public var headerFields: [HTTPHeaderField]
    /// Metadata the fetcher derived from the bytes (ImageCache: an image's size and digest),
    /// stored with the item over the caller's ``LoadOptions/metadata`` of the same names.
    public var metadata: [String: String] = [:]
    /// The redirects followed to this response, oldest first: the loader reuses it under the
    /// URL asked for only while each of them may be reused (RFC 9111 §4).
    public var redirects: [HTTPRedirect] = []

    /// A response from its parts.
    public init(body: Body, headers: [String: String] = [:], status: Int = 200) {
        self.body = body
        self.headers = headers
        self.status = status
        self.headerFields = []
    }

    /// A response with its status and every header line (``headers`` is their combination).
    public init(body: Body, status: Int, headerFields: [HTTPHeaderField]) {
        self.body = body
        self.status = status
        self.headerFields = headerFields
        self.headers = HTTPHeaderField.combined(headerFields)
    }

    /// The header lines to keep: ``headerFields``, or ``headers`` as one line a name.
    var fieldsToKeep: [HTTPHeaderField] {
        headerFields.isEmpty
            ? headers.sorted { $0.key < $1.key }.map { HTTPHeaderField(name: $0.key, value: $0.value) }
            : headerFields
    }

    init(_ response: HTTPResponse, body: Body) {
        self.body = body
        self.status = response.statusCode
        self.headers = response.headers
        self.headerFields = response.headerFields
        self.redirects = response.redirects
    }
}

/// The default fetcher: HTTP(S) through a `Transport` (libcurl), with conditional requests.
/// The body streams into an unnamed file in the cache folder, so progress is reported as it
/// arrives and a failed or cancelled fetch leaves nothing.
public struct HTTPFetcher: ItemFetching {
    /// The transport requests go through.
    public let transport: any Transport
    /// The largest body accepted. Default 256 MiB.
    public var maxBytes: Int64

    /// A fetcher on `transport`.
    public init(transport: any Transport, maxBytes: Int64 = 256 << 20) {
        self.transport = transport
        self.maxBytes = maxBytes
    }

    /// A GET of the request's URL, conditional when the request has validators.
    public func fetch(_ request: FetchRequest) async throws -> FetchResponse {
        guard let url = request.url else {
            throw ItemCacheError(
                code: .fetch,
                message: "\(request.key.rawValue) has no URL to fetch; register a fetcher for its context",
                key: request.key)
        }
        var headers = request.headers
        if let etag = request.etag { headers["If-None-Match"] = etag }
        if let lastModified = request.lastModified { headers["If-Modified-Since"] = lastModified }
        var httpRequest = HTTPRequest(url: url, headers: headers, timeout: request.timeout)
        // A 404 or a 503 is an answer to keep or to show, not a transport error.
        httpRequest.returnsEveryStatus = true
        httpRequest.retry = request.retry
        /// The body in memory, within `maxBytes`: one the loader keeps nothing of, or one the
        /// cache cannot keep, or where the folder has no O_TMPFILE.
        func inMemory() async throws -> FetchResponse {
            var memoryRequest = httpRequest
            memoryRequest.maxBodyBytes = maxBytes
            let response: HTTPResponse
            do {
                response = try await transport.data(for: memoryRequest)
            } catch let error as TransportError where error.code == .tooLarge {
                throw ItemCacheError(
                    code: .fetch,
                    message:
                        "\(Redaction.url(url)) sent more than \(maxBytes) bytes; refusing it (HTTPFetcher.maxBytes)",
                    key: request.key, underlying: error)
            }
            request.progress?(
                TransferProgress(received: Int64(response.body.count), expected: Int64(response.body.count)))
            return FetchResponse(response, body: response.isNotModified ? .notModified : .fetched(response.body))
        }
        // A body the loader keeps nothing of (the caller's no-store) is not staged in the cache
        // folder: a copy only to be dropped could fill a small disk.
        guard request.mayKeep, let file = UnnamedFile(in: request.scratchFolder) else { return try await inMemory() }
        // A body the cache cannot keep is not staged in its folder: the transport refuses a
        // declared length over the limit before writing a byte, and the body is read into
        // memory instead (a second request), to be delivered but not kept.
        let stagingLimit = request.keepLimit.map { min($0, maxBytes) } ?? maxBytes
        var options = DownloadOptions(maxBytes: stagingLimit, progress: request.progress)
        options.resumeETag = nil
        let descriptor = file.descriptor
        let response: HTTPResponse
        do {
            response = try await transport.download(httpRequest, into: descriptor, options: options)
        } catch let error as TransportError where error.code == .tooLarge && stagingLimit < maxBytes {
            return try await inMemory()
        } catch let error as TransportError where error.code == .fileSystem {
            // The cache folder's disk, not the network: exit 5's remedy, not exit 3's.
            throw ItemCacheError(
                code: .storage,
                message:
                    "cannot keep the download of \(Redaction.url(url)) in the cache folder \(request.scratchFolder): \(error.message)",
                key: request.key, underlying: error)
        }
        if response.isNotModified { return FetchResponse(response, body: .notModified) }
        if let threshold = request.fileThreshold, response.fileSize > threshold {
            // Large: the file is the value (checked once here), never one Data.
            let size = response.fileSize
            let shown = "the body of \(Redaction.url(url))"
            let checksum = try await BlockingIOPool.shared.run { () throws(FileSystemError) -> UInt32 in
                try ValueFile.checksum(of: descriptor, size: size, shownAs: shown)
            }
            return FetchResponse(
                response, body: .file(ValueFile(staged: file, size: size, checksum: checksum, shownAs: shown)))
        }
        let data = try await BlockingIOPool.shared.run { () throws(FileSystemError) -> Data in
            try DescriptorIO.read(descriptor, count: Int(response.fileSize), path: Redaction.url(url))
        }
        // The file (and its descriptor) lives until here; it vanishes when it closes.
        _ = file.descriptor
        return FetchResponse(response, body: .fetched(data))
    }
}

/// Reads `file://` URLs. Its validator is an entity tag of the file's device, inode, size and
/// modification and change times (with the time as `Last-Modified`, to show), so an unchanged
/// file revalidates without being read, and another file with the same time never passes for
/// it.
public struct FileFetcher: ItemFetching {
    /// A file fetcher.
    public init() {}

    /// The file's bytes, or ``FetchResponse/Body/notModified`` when its entity tag matches the
    /// request's.
    public func fetch(_ request: FetchRequest) async throws -> FetchResponse {
        guard let url = request.url, url.isFileURL else {
            throw ItemCacheError(
                code: .fetch, message: "\(request.key.rawValue) is not a file:// URL", key: request.key)
        }
        // Another machine's file is not this one's (libcurl refuses such a URL too).
        if let host = url.host, !host.isEmpty, host.lowercased() != "localhost" {
            throw ItemCacheError(
                code: .fetch,
                message:
                    "\(Redaction.url(url)) names the host \(host), but a file URL reads this machine's files only; give file:///path",
                key: request.key)
        }
        let path = url.path
        // As messages show it: a path parameter that holds a secret (`;token=…`) is masked, as
        // it is in the key.
        let shown = String(Redaction.text("file://" + path).dropFirst("file://".count))
        let namesFolder = url.hasDirectoryPath && path != "/"
        return try await BlockingIOPool.shared.run { () throws -> FetchResponse in
            func failure(_ problem: String, _ remedy: String) -> ItemCacheError {
                ItemCacheError(
                    code: .fetch, message: "cannot read \(shown): it \(problem); \(remedy)", key: request.key)
            }
            var started = timespec()
            clock_gettime(CLOCK_REALTIME, &started)
            let fd: Int32
            let before: stat
            do throws(SmallTextFile.Refusal) {
                (fd, before) = try SmallTextFile.openRegularFile(path)
            } catch {
                throw failure(error.description, error.remedy)
            }
            defer { close(fd) }
            // `file.txt/` names a folder, which a file is not (open(2) answers ENOTDIR).
            if namesFolder { throw failure("is a file, but the URL ends in '/'", "drop the final '/'") }
            let modified = Self.milliseconds(Self.modificationDate(before))
            // A file changed in the last seconds may still be being written through a shared
            // mapping, whose writes to pages already dirty move neither time: it gets no
            // entity tag (the next load reads it again), and it is read twice, the two reads
            // compared (git's "racily clean" files, the same way).
            func seconds(_ time: timespec) -> Double { Double(time.tv_sec) + Double(time.tv_nsec) / 1e9 }
            let recent = seconds(before.st_ctim) >= seconds(started) - Self.recentSeconds
            var headers = ["last-modified": modified]
            if !recent { headers["etag"] = Self.entityTag(before) }
            // The entity tag, not the time alone: `cp -p`, `rsync -t` and reproducible builds
            // give another file the same time. An item kept before file tags is read once more.
            if !recent, request.etag == headers["etag"] { return FetchResponse(body: .notModified, headers: headers) }
            if let threshold = request.fileThreshold, Int64(before.st_size) > threshold {
                // Large: a file, never one Data (a 3 GB file once took 3 GB of memory).
                let file = try Self.fileValue(
                    fd, before: before, recent: recent, path: shown, request: request, failure: failure)
                return FetchResponse(body: .file(file), headers: headers)
            }
            var data = Data()
            do {
                if before.st_size > 0 {
                    data = try DescriptorIO.read(fd, count: Int(before.st_size), path: shown)
                } else {
                    // A file that states no size (/proc's, /sys's) is read to its end, within a bound.
                    try DescriptorIO.forEachChunk(
                        of: fd, limit: Int64(Self.largestUnsizedFile) + 1, chunkSize: 64 << 10, path: shown
                    ) {
                        data.append(contentsOf: $0)
                        return true
                    }
                    if data.count > Self.largestUnsizedFile {
                        throw failure(
                            "states no size and holds more than \(Self.largestUnsizedFile) bytes",
                            "copy it to a file first")
                    }
                }
            } catch let error as ItemCacheError {
                throw error
            } catch {
                throw failure("cannot be read (\(error))", "check the file")
            }
            // A file written in place while it was read would be a torn value: refused, never kept.
            // (A shorter read with the size and time unchanged is a file that states a size it
            // does not hold, as /sys's do: its bytes are whole.)
            let crc = recent && before.st_size > 0 ? CRC32C.checksum(data) : nil
            guard Self.isUnchanged(fd, since: before, bytes: Int64(data.count), crc: crc, path: shown) else {
                throw failure("changed while it was read", "try again once it is written")
            }
            request.progress?(TransferProgress(received: Int64(data.count), expected: Int64(data.count)))
            return FetchResponse(body: .fetched(data), headers: headers)
        }
    }

    /// A file over the request's ``FetchRequest/fileThreshold`` as a ``ValueFile``, read in
    /// chunks: copied into an unnamed file in the cache folder when the cache can keep it (the
    /// store then names the copy), else checked where it is (delivered, not kept: the copy would
    /// only pass the cache's limit). Either way a change while it is read is refused.
    private static func fileValue(
        _ fd: Int32, before: stat, recent: Bool, path: String, request: FetchRequest,
        failure: (String, String) -> ItemCacheError
    ) throws(ItemCacheError) -> ValueFile {
        let size = Int64(before.st_size)
        /// `crc`: the bytes' checksum, which a second read must give for a recent file.
        func checkUnchanged(read: Int64, crc: UInt32? = nil) throws(ItemCacheError) {
            guard read == size, isUnchanged(fd, since: before, bytes: size, crc: recent ? crc : nil, path: path)
            else { throw failure("changed while it was read", "try again once it is written") }
        }
        func unreadable(_ error: FileSystemError) -> ItemCacheError {
            failure("cannot be read (\(error))", "check the file")
        }
        // A copy the cache would not keep (too large, or the caller's no-store) is not made.
        let fits = request.mayKeep && request.keepLimit.map { size <= $0 } ?? true
        if fits, let staged = UnnamedFile(in: request.scratchFolder) {
            var crc: UInt32 = 0
            var writeFailure: Int32?
            let read: Int64
            do {
                read = try DescriptorIO.forEachChunk(of: fd, limit: size, path: path) { chunk in
                    if let code = DescriptorIO.writeAll(staged.descriptor, chunk) {
                        writeFailure = code
                        return false
                    }
                    crc = CRC32C.checksum(chunk, continuing: crc)
                    return true
                }
            } catch {
                throw unreadable(error)
            }
            if let writeFailure {
                let error = FileSystemError(
                    "cannot write", path: request.scratchFolder, syscall: "write", errno: writeFailure)
                throw ItemCacheError(
                    code: .storage,
                    message: "cannot keep the copy of \(path) in the cache folder \(request.scratchFolder): \(error)",
                    key: request.key, underlying: error)
            }
            try checkUnchanged(read: read, crc: crc)
            request.progress?(TransferProgress(received: size, expected: size))
            return ValueFile(staged: staged, size: size, checksum: crc, shownAs: path)
        }
        let checksum: UInt32
        do {
            checksum = try ValueFile.checksum(of: fd, size: size, shownAs: path)
        } catch {
            // A short read is a file that shrank while it was read.
            if error.errno == EIO { try checkUnchanged(read: -1) }
            throw unreadable(error)
        }
        try checkUnchanged(read: size, crc: checksum)
        let own = dup(fd)
        guard own >= 0 else { throw failure("cannot be kept open (dup: errno \(errno))", "raise the open-file limit") }
        request.progress?(TransferProgress(received: size, expected: size))
        return ValueFile(descriptor: own, size: size, checksum: checksum, shownAs: path, changedCode: .fetch)
    }

    /// Whether the file open as `fd` is still the one `before` describes (its entity tag), and,
    /// given the `crc` of its first `bytes` bytes, a second read of them gives it (a recent
    /// file, which a shared mapping may write without moving its times).
    private static func isUnchanged(_ fd: Int32, since before: stat, bytes: Int64, crc: UInt32?, path: String) -> Bool {
        var after = stat()
        guard fstat(fd, &after) == 0, entityTag(after) == entityTag(before) else { return false }
        guard let crc else { return true }
        return (try? ValueFile.checksum(of: fd, size: bytes, shownAs: path)) == crc
    }

    /// A file's entity tag: its device, inode, size, modification and change times. The change
    /// time is the kernel's (no `utimensat` sets it back), so a file written while it was read is
    /// caught even when the writer then restores the modification time, and a file put in its
    /// place (another inode) never passes for it.
    static func entityTag(_ status: stat) -> String {
        func nanoseconds(_ time: timespec) -> String { "\(time.tv_sec).\(time.tv_nsec)" }
        return "\"\(status.st_dev)-\(status.st_ino)-\(status.st_size)-\(nanoseconds(status.st_mtim))-"
            + "\(nanoseconds(status.st_ctim))\""
    }

    /// How recent a change makes a file "racily clean": within 2 s of the read.
    static let recentSeconds = 2.0

    /// The most a file that states no size (a `/proc` file) is read to: 16 MiB.
    static let largestUnsizedFile = 16 << 20

    private static func modificationDate(_ status: stat) -> Date {
        Date(timeIntervalSince1970: Double(status.st_mtim.tv_sec) + Double(status.st_mtim.tv_nsec) / 1e9)
    }

    /// A modification time as the validator's text: whole milliseconds since the epoch, or the
    /// number as it is for a time no `Int64` of milliseconds holds (tmpfs keeps times to 2⁶³
    /// seconds).
    static func milliseconds(_ date: Date) -> String {
        let milliseconds = (date.timeIntervalSince1970 * 1000).rounded(.towardZero)
        if let whole = Int64(exactly: milliseconds) { return "\(whole)" }
        return "\(milliseconds)"
    }
}

/// A fetcher made of a closure: content generated locally, or an app's own source.
public struct ClosureFetcher: ItemFetching {
    private let body: @Sendable (FetchRequest) async throws -> Data

    /// A fetcher that returns what `body` makes for each request.
    public init(_ body: @escaping @Sendable (FetchRequest) async throws -> Data) {
        self.body = body
    }

    /// What the closure makes for the request.
    public func fetch(_ request: FetchRequest) async throws -> FetchResponse {
        let data = try await body(request)
        request.progress?(TransferProgress(received: Int64(data.count), expected: Int64(data.count)))
        return FetchResponse(body: .fetched(data))
    }
}
