import Foundation

/// Runs `body` with a started ``StorageServer`` serving `root`, and stops the server afterwards,
/// whether `body` returns or throws.
///
/// The StorageServer guide shows it in a compiled test (publishing versions in a test).
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
