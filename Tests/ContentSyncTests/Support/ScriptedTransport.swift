import Foundation
import Synchronization
import ToolSupport
import Transport

/// An app-side ``Transport`` that serves a storage folder (an ExampleStorage snapshot) straight
/// from disk, with no sockets: fast enough to run thousands of updates in a test.
///
/// A test scripts it: ``hold()`` makes every request wait at a gate until ``release()`` or until
/// the requesting task is cancelled, and ``delays`` adds a seeded pause (cancellable) before each
/// answer. It honours `If-None-Match` with a `304`, and ``DownloadOptions/maxBytes``.
final class ScriptedTransport: Transport {
    /// The base URL a configuration gives to reach it; nothing is resolved or sent.
    static let baseURL = URL(string: "https://scripted.invalid/storage/")!

    private struct State {
        var root: URL
        var rng: SplitMix64?
        var maxDelayMicroseconds: UInt64 = 0
        var served: [String] = []
        var lockFile: String?
        var unlockedRequests: [String] = []
    }

    private let state: Mutex<State>
    /// The gate every request passes before it is answered.
    let gate = Gate()

    init(serving root: URL) {
        state = Mutex(State(root: root))
    }

    /// Serves another storage folder from the next request on.
    func serve(_ root: URL) {
        state.withLock { $0.root = root }
    }

    /// Pauses each answer for a random 0…`maxMicroseconds` drawn from `seed`.
    func delays(seed: UInt64, maxMicroseconds: UInt64) {
        state.withLock {
            $0.rng = SplitMix64(seed: seed)
            $0.maxDelayMicroseconds = maxMicroseconds
        }
    }

    /// Holds every request at the gate from now on.
    func hold() { gate.close() }

    /// Lets held and later requests through.
    func release() { gate.open() }

    /// The storage-relative paths answered so far, in order.
    var served: [String] { state.withLock { $0.served } }

    /// Checks from now on that every request is made while the update lock of the folder with
    /// this state database is held: a non-blocking `flock` of its lock file must fail. (Were it
    /// to succeed, nobody held the lock, and the probe lets go at once.)
    func requireUpdateLock(statePath: String) {
        state.withLock { $0.lockFile = statePath + ".lock" }
    }

    private static func isLocked(_ lockFile: String) -> Bool {
        let descriptor = open(lockFile, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else { return errno == EWOULDBLOCK }
        flock(descriptor, LOCK_UN)
        return false
    }

    /// Requests made while nobody held the update lock (see ``requireUpdateLock(statePath:)``).
    var unlockedRequests: [String] { state.withLock { $0.unlockedRequests } }

    func data(for request: HTTPRequest) async throws -> HTTPResponse {
        let (file, relative) = try await admit(request)
        guard let body = FileManager.default.contents(atPath: file) else {
            throw TransportError(
                code: .httpStatus, message: "HTTP 404 for \(request.url.absoluteString)", url: request.url,
                statusCode: 404)
        }
        let etag = "\"\(SHA256Hex.of(body).prefix(16))\""
        record(relative)
        if request.headers["If-None-Match"] == etag {
            return HTTPResponse(statusCode: 304, headers: ["etag": etag], url: request.url)
        }
        return HTTPResponse(
            statusCode: 200, headers: ["etag": etag, "content-length": "\(body.count)"], body: body, url: request.url,
            bytesReceived: Int64(body.count), fileSize: Int64(body.count))
    }

    func download(_ request: HTTPRequest, to path: String, options: DownloadOptions) async throws -> HTTPResponse {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            throw TransportError(
                code: .fileSystem, message: "cannot open \(path): errno \(errno)", url: request.url, errno: errno)
        }
        defer { close(descriptor) }
        return try await download(request, into: descriptor, options: options)
    }

    func download(_ request: HTTPRequest, into descriptor: Int32, options: DownloadOptions) async throws -> HTTPResponse
    {
        let (file, relative) = try await admit(request)
        guard let body = FileManager.default.contents(atPath: file) else {
            throw TransportError(
                code: .httpStatus, message: "HTTP 404 for \(request.url.absoluteString)", url: request.url,
                statusCode: 404)
        }
        if let limit = options.maxBytes, body.count > limit {
            throw TransportError(
                code: .tooLarge, message: "\(relative) is larger than the declared \(limit) bytes", url: request.url)
        }
        let headers = ["content-length": "\(body.count)"]
        options.onResponseStart?(200, headers)
        guard ftruncate(descriptor, 0) == 0 else {
            throw TransportError(
                code: .fileSystem, message: "cannot truncate the download of \(relative): errno \(errno)",
                url: request.url, errno: errno)
        }
        let written = body.withUnsafeBytes { bytes -> Int in
            var done = 0
            while done < bytes.count {
                let count = pwrite(descriptor, bytes.baseAddress! + done, bytes.count - done, off_t(done))
                if count <= 0 { return -1 }
                done += count
            }
            options.onBodyChunk?(bytes)
            return done
        }
        guard written == body.count else {
            throw TransportError(
                code: .fileSystem, message: "cannot write the download of \(relative): errno \(errno)",
                url: request.url, errno: errno)
        }
        record(relative)
        return HTTPResponse(
            statusCode: 200, headers: headers, url: request.url, bytesReceived: Int64(body.count),
            fileSize: Int64(body.count))
    }

    /// Waits at the gate and for the scripted delay; returns the file that answers `request`.
    private func admit(_ request: HTTPRequest) async throws -> (file: String, relative: String) {
        guard await gate.pass() else { throw CancellationError() }
        let (root, pause) = state.withLock { state -> (URL, UInt64) in
            guard state.maxDelayMicroseconds > 0, var rng = state.rng else { return (state.root, 0) }
            let pause = rng.next() % (state.maxDelayMicroseconds + 1)
            state.rng = rng
            return (state.root, pause)
        }
        if pause > 0 { try await Task.sleep(for: .microseconds(pause)) }
        try Task.checkCancellation()
        let path = request.url.path
        guard let start = path.range(of: "/RXCacheConfig/") ?? path.range(of: "/RXCacheContent") else {
            throw TransportError(
                code: .httpStatus, message: "HTTP 404 for \(request.url.absoluteString)", url: request.url,
                statusCode: 404)
        }
        let relative = String(path[path.index(after: start.lowerBound)...])
        if let lockFile = state.withLock({ $0.lockFile }), !Self.isLocked(lockFile) {
            state.withLock { $0.unlockedRequests.append(relative) }
        }
        return (root.path + "/" + relative, relative)
    }

    private func record(_ relative: String) {
        state.withLock { $0.served.append(relative) }
    }
}

extension ScriptedTransport {
    /// A gate that requests wait at while it is closed. A waiting task that is cancelled leaves
    /// at once, told so.
    final class Gate: Sendable {
        private struct State {
            var open = true
            var nextID: UInt64 = 0
            var waiting: [UInt64: CheckedContinuation<Bool, Never>] = [:]
            var cancelledEarly: Set<UInt64> = []
        }

        private let state = Mutex(State())

        func close() { state.withLock { $0.open = false } }

        func open() {
            let waiting = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
                state.open = true
                defer { state.waiting.removeAll() }
                return Array(state.waiting.values)
            }
            for continuation in waiting { continuation.resume(returning: true) }
        }

        /// How many requests wait at the gate now.
        var waitingCount: Int { state.withLock { $0.waiting.count } }

        /// Returns true when let through, false when the waiting task was cancelled.
        func pass() async -> Bool {
            let id = state.withLock { state -> UInt64 in
                state.nextID += 1
                return state.nextID
            }
            return await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                    let answer = state.withLock { state -> Bool? in
                        if state.cancelledEarly.remove(id) != nil { return false }
                        if state.open { return true }
                        state.waiting[id] = continuation
                        return nil
                    }
                    if let answer { continuation.resume(returning: answer) }
                }
            } onCancel: {
                let continuation = state.withLock { state -> CheckedContinuation<Bool, Never>? in
                    if let continuation = state.waiting.removeValue(forKey: id) { return continuation }
                    state.cancelledEarly.insert(id)
                    return nil
                }
                continuation?.resume(returning: false)
            }
        }
    }
}
