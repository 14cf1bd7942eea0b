import Foundation

/// Runs `body` with a started ``StorageServer`` serving `root`, and stops the server afterwards,
/// whether `body` returns or throws.
///
/// ```swift
/// try await withStorageServer(root: dir) { server in
///     let url = server.url(for: "index.json")
///     …
/// }
/// ```
public func withStorageServer<T>(
    root: URL,
    configuration: StorageServer.Configuration = StorageServer.Configuration(),
    isolation: isolated (any Actor)? = #isolation,
    _ body: (StorageServer) async throws -> T
) async throws -> T {
    let server = StorageServer(root: root, configuration: configuration)
    _ = try await server.start()
    do {
        let result = try await body(server)
        await server.stop()
        return result
    } catch {
        await server.stop()
        throw error
    }
}
