import ArgumentParser
import Foundation
import StorageServer

/// `sync-agent serve`: a storage folder on loopback, the way GitHub raw serves it.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve a storage folder on 127.0.0.1 the way GitHub raw does (files only, ETag, Range), for demos and tests.",
        discussion: "Prints the base URL, then serves until interrupted (Ctrl-C or SIGTERM).")

    @Argument(help: "The storage folder (holding RXCacheConfig/ and RXCacheContent/).")
    var directory: String

    @Option(name: .long, help: "The port; 0 picks a free one.")
    var port: UInt16 = 0

    func run() async throws {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isFolder), isFolder.boolValue else {
            throw CLIFailure(code: 6, message: "\(directory) is not a folder; pass the storage folder to serve")
        }
        let server = StorageServer(root: URL(fileURLWithPath: directory), configuration: .init(port: port))
        let serving = Task {
            try await server.run { url in
                // Unbuffered, so a script reading the URL from a pipe sees it at once.
                Console.standardOutput(url.absoluteString + "\n")
            }
        }
        let interrupt = InterruptHandler { serving.cancel() }
        defer { interrupt.cancel() }
        do {
            try await serving.value
        } catch is CancellationError {
            return
        } catch {
            throw CLIFailure(code: 1, message: "serving \(directory) failed: \(error)")
        }
    }
}
