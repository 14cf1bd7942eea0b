internal import FlyingFox
internal import FlyingSocks
import Foundation
import Synchronization

extension StorageServer {
    /// Whether a FlyingFox server is listening for this instance.
    enum Lifecycle {
        case idle
        /// The task returns why FlyingFox's `run()` ended: nil when it returned.
        case starting(HTTPServer, Task<(any Error)?, Never>)
        case running(HTTPServer, Task<(any Error)?, Never>, URL)

        var baseURL: URL? {
            guard case .running(_, _, let url) = self else { return nil }
            return url
        }
    }

    /// Starts listening on 127.0.0.1 and returns the base URL, `http://127.0.0.1:PORT/`.
    ///
    /// The server keeps serving from a task of its own until ``stop()``: callers such as tests
    /// need `start()` to return while it serves.
    public func start() async throws -> URL {
        let root = self.root
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root.path, isDirectory: &isFolder), isFolder.boolValue else {
            throw StorageServerError(
                code: .rootNotFound,
                message: "\(root.path): no such folder to serve; create it or pass an existing folder"
            )
        }
        let port = configuration.port
        let address: sockaddr_in
        do {
            address = try .inet(ip4: "127.0.0.1", port: port)
        } catch {
            throw StorageServerError(
                code: .listenFailed, message: "127.0.0.1:\(port): invalid address", underlying: error)
        }
        // FlyingFox's timeout bounds a handler, which includes `.delay` faults; its 15 s default
        // would turn a long delay into a 500.
        let http = HTTPServer(address: address, timeout: 3600, logger: .disabled, handler: handler)
        let outcome = RunOutcome()

        let registered = withLifecycle { lifecycle -> Bool in
            guard case .idle = lifecycle else { return false }
            let task = Task { () -> (any Error)? in
                do {
                    try await http.run()
                    outcome.finish(.failure(CancellationError()))
                    return nil
                } catch {
                    outcome.finish(.failure(error))
                    return error
                }
            }
            lifecycle = .starting(http, task)
            return true
        }
        guard registered else {
            throw StorageServerError(
                code: .alreadyStarted,
                message: "StorageServer for \(root.path) is already running; call stop() before start()"
            )
        }

        do {
            let timeout = Double(configuration.startTimeout.components.seconds)
            // Whichever comes first: listening, or run() ending (say, the port is taken).
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await http.waitUntilListening(timeout: max(1, timeout)) }
                group.addTask { try await outcome.wait() }
                try await group.next()
                group.cancelAll()
            }
        } catch {
            await stop()
            throw StorageServerError(
                code: .listenFailed,
                message:
                    "127.0.0.1:\(port): could not listen; if the port is in use, pick another or use 0 for any free port",
                underlying: error
            )
        }

        guard case .ip4(_, let boundPort)? = await http.listeningAddress,
            let url = URL(string: "http://127.0.0.1:\(boundPort)/")
        else {
            await stop()
            throw StorageServerError(
                code: .listenFailed, message: "127.0.0.1:\(port): listening socket has no IPv4 address")
        }
        let stillOurs = withLifecycle { lifecycle -> Bool in
            guard case .starting(let current, let task) = lifecycle, current === http else { return false }
            lifecycle = .running(http, task, url)
            return true
        }
        guard stillOurs else {
            throw StorageServerError(
                code: .listenFailed, message: "127.0.0.1:\(port): stop() was called while starting")
        }
        return url
    }

    /// Stops listening, closes every connection (stalled ones included) and waits until the server
    /// task has ended. Does nothing when not running.
    public func stop() async {
        let taken = withLifecycle { lifecycle -> (HTTPServer, Task<(any Error)?, Never>)? in
            defer { lifecycle = .idle }
            switch lifecycle {
            case .idle: return nil
            case .starting(let http, let task), .running(let http, let task, _): return (http, task)
            }
        }
        guard let (http, task) = taken else { return }
        await http.stop(timeout: 0)
        task.cancel()
        _ = await task.value
    }

    /// Starts, reports the base URL to `onListening`, serves until the calling task is cancelled
    /// or ``stop()`` is called, then stops.
    ///
    /// A command-line `serve` cancels the task running this from its SIGINT/SIGTERM handler.
    ///
    /// Throws ``StorageServerError/Code/stoppedServing`` when the server stops by itself (it
    /// cannot accept another connection: out of descriptors): `serve` exited 0 without a word,
    /// and its port closed, when a local user opened connections until the limit.
    public func run(onListening: (URL) -> Void = { _ in }) async throws {
        let url = try await start()
        onListening(url)
        let task = withLifecycle { lifecycle -> Task<(any Error)?, Never>? in
            guard case .running(_, let task, _) = lifecycle else { return nil }
            return task
        }
        var ended: (any Error)?
        if let task {
            ended = await withTaskCancellationHandler {
                await task.value
            } onCancel: {
                task.cancel()
            }
        }
        let stoppedByCaller =
            Task.isCancelled
            || withLifecycle { lifecycle in
                if case .running(_, let current, _) = lifecycle, current == task { return false }
                return true
            }
        await stop()
        guard !stoppedByCaller else { return }
        var reason = "its listener ended"
        var remedy = "start it again"
        if case .failed(let call, let code, let text)? = ended as? SocketError {
            reason = "\(call) failed: \(text)"
            if code == EMFILE || code == ENFILE {
                remedy =
                    "raise the open-file limit (ulimit -n, now \(Self.openFileLimit())) or serve fewer clients at once"
            }
        } else if let ended {
            reason = "\(ended)"
        }
        throw StorageServerError(
            code: .stoppedServing,
            message: "\(url.absoluteString) stopped serving: \(reason); \(remedy)", underlying: ended)
    }

    /// The soft open-file limit, for the message.
    private static func openFileLimit() -> String {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return "unknown" }
        return "\(limit.rlim_cur)"
    }
}

/// The end of FlyingFox's `run()`, awaited by `start()` alongside `waitUntilListening`, so that a
/// bind failure is reported at once instead of after the listen timeout.
private final class RunOutcome: Sendable {
    private struct Values {
        var result: Result<Void, any Error>?
        var waiter: CheckedContinuation<Void, any Error>?
        var isCancelled = false
    }

    private let values = Mutex(Values())

    func finish(_ result: Result<Void, any Error>) {
        let waiter = values.withLock { values -> CheckedContinuation<Void, any Error>? in
            values.result = result
            defer { values.waiter = nil }
            return values.waiter
        }
        waiter?.resume(with: result)
    }

    func wait() async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let ready = values.withLock { values -> Result<Void, any Error>? in
                    if let result = values.result { return result }
                    if values.isCancelled { return .failure(CancellationError()) }
                    values.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            let waiter = values.withLock { values -> CheckedContinuation<Void, any Error>? in
                values.isCancelled = true
                defer { values.waiter = nil }
                return values.waiter
            }
            waiter?.resume(throwing: CancellationError())
        }
    }
}
