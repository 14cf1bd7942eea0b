import Foundation
import Synchronization

extension StorageServer {
    /// Whether this instance is listening.
    enum Lifecycle {
        case idle
        case running(Connections, URL)

        var baseURL: URL? {
            guard case .running(_, let url) = self else { return nil }
            return url
        }
    }

    /// Starts listening on 127.0.0.1 and returns the base URL, `http://127.0.0.1:PORT/`.
    ///
    /// The server keeps serving from threads of its own until ``stop()``: callers such as tests
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
        let limits = configuration.limits
        let handler = self.handler
        return try withLifecycle { lifecycle -> Result<URL, StorageServerError> in
            guard case .idle = lifecycle else {
                return .failure(
                    StorageServerError(
                        code: .alreadyStarted,
                        message: "StorageServer for \(root.path) is already running; call stop() before start()"
                    ))
            }
            let connections: Connections
            do throws(Connections.ListenFailure) {
                connections = try Connections(port: port, limits: limits) { request, socket in
                    handler.answer(request, on: socket)
                }
            } catch {
                let reason = String(cString: strerror(error.code))
                return .failure(
                    StorageServerError(
                        code: .listenFailed,
                        message: "127.0.0.1:\(port): could not listen (\(error.call): \(reason)); "
                            + "if the port is in use, pick another or use 0 for any free port",
                        underlying: error
                    ))
            }
            let url = URL(string: "http://127.0.0.1:\(connections.port)/")!
            do {
                try connections.start()
            } catch {
                return .failure(
                    StorageServerError(
                        code: .listenFailed,
                        message: "127.0.0.1:\(port): no thread could be started to accept connections",
                        underlying: error))
            }
            lifecycle = .running(connections, url)
            return .success(url)
        }.get()
    }

    /// Stops listening, closes every connection (stalled ones included) and waits until every
    /// thread of the server has ended. Does nothing when not running.
    public func stop() async {
        let taken = withLifecycle { lifecycle -> Connections? in
            defer { lifecycle = .idle }
            guard case .running(let connections, _) = lifecycle else { return nil }
            return connections
        }
        await taken?.stop()
    }

    /// Starts, reports the base URL to `onListening`, serves until the calling task is cancelled
    /// or ``stop()`` is called, then stops.
    ///
    /// A command-line `serve` cancels the task running this from its SIGINT/SIGTERM handler.
    ///
    /// Running out of descriptors does not stop it: it closes the connection idle the longest,
    /// or waits for one to end. Throws ``StorageServerError/Code/stoppedServing`` only when
    /// accepting fails in a way it cannot wait out.
    public func run(onListening: (URL) -> Void = { _ in }) async throws {
        let url = try await start()
        onListening(url)
        guard
            let connections = withLifecycle({ lifecycle -> Connections? in
                guard case .running(let connections, _) = lifecycle else { return nil }
                return connections
            })
        else { return }
        await withTaskCancellationHandler {
            await connections.ended()
        } onCancel: {
            Task { await connections.stop() }
        }
        let failure = connections.acceptFailure
        await stop()
        guard let failure, !Task.isCancelled else { return }
        throw StorageServerError(
            code: .stoppedServing,
            message:
                "\(url.absoluteString) stopped serving: accept failed: \(String(cString: strerror(failure))); start it again"
        )
    }
}
