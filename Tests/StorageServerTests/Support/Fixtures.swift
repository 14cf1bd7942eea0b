import Foundation
import ToolSupport

@testable import StorageServer

/// Runs `body` with a fresh, empty folder that is removed afterwards.
func withTemporaryDirectory<T>(
    isolation: isolated (any Actor)? = #isolation,
    _ body: (URL) async throws -> T
) async throws -> T {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("StorageServerTests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    return try await body(directory)
}

/// A folder tree to serve, plus a scratch folder for curl's output, both inside one temporary
/// folder.
struct Fixture {
    let directory: URL
    var root: URL { directory.appendingPathComponent("root", isDirectory: true) }
    var scratch: URL { directory.appendingPathComponent("scratch", isDirectory: true) }

    init(directory: URL) throws {
        self.directory = directory
        try FileManager.default.createDirectory(
            at: directory.appendingPathComponent("root"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(
            at: directory.appendingPathComponent("scratch"), withIntermediateDirectories: true)
    }

    /// Writes `contents` at `path` below `base` (the served root by default), creating folders.
    @discardableResult
    func write(_ path: String, _ contents: Data, under base: URL? = nil) throws -> URL {
        let url = (base ?? root).appendingPathComponent(path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try contents.write(to: url)
        return url
    }

    @discardableResult
    func write(_ path: String, _ text: String, under base: URL? = nil) throws -> URL {
        try write(path, Data(text.utf8), under: base)
    }
}

/// Runs `body` with a fixture and a started server on its root, cleaning both up afterwards.
func withServedFixture<T>(
    configuration: StorageServer.Configuration = StorageServer.Configuration(),
    isolation: isolated (any Actor)? = #isolation,
    prepare: (Fixture) throws -> Void = { _ in },
    _ body: (StorageServer, Fixture) async throws -> T
) async throws -> T {
    try await withTemporaryDirectory { directory in
        let fixture = try Fixture(directory: directory)
        try prepare(fixture)
        return try await withStorageServer(root: fixture.root, configuration: configuration) { server in
            try await body(server, fixture)
        }
    }
}

/// Pseudo-random bytes that differ from run to run, so equal bytes mean a real copy.
func randomBytes(_ count: Int) -> Data {
    // One system random seed, then SplitMix64: the system generator costs a getrandom(2) call
    // per 8 bytes, and megabytes of those on the two cooperative threads starve the loopback
    // servers of every test running beside.
    var system = SystemRandomNumberGenerator()
    var random = SplitMix64(seed: system.next())
    var data = Data(count: count)
    data.withUnsafeMutableBytes { random.fill($0) }
    return data
}
