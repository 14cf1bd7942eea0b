import Foundation
import StorageServer
import Synchronization
import ToolSupport
import Transport

/// A fresh temporary folder holding `root/` (served by the test server) and `out/` (where
/// downloads land), removed afterwards.
struct Fixture {
    let directory: URL
    var root: URL { directory.appendingPathComponent("root", isDirectory: true) }
    var out: URL { directory.appendingPathComponent("out", isDirectory: true) }

    init(directory: URL) throws {
        self.directory = directory
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
    }

    /// Writes `contents` at `path` below the served root, creating folders.
    func serve(_ path: String, _ contents: Data) throws {
        let url = root.appendingPathComponent(path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try contents.write(to: url)
    }

    /// A path in the download folder.
    func outPath(_ name: String) -> String {
        out.appendingPathComponent(name).path
    }
}

/// Runs `body` with a fresh fixture and a started server on its root, cleaning both up afterwards.
func withServedFixture<T>(
    configuration: StorageServer.Configuration = StorageServer.Configuration(),
    isolation: isolated (any Actor)? = #isolation,
    _ body: (StorageServer, Fixture) async throws -> T
) async throws -> T {
    let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("TransportTests-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let fixture = try Fixture(directory: directory)
    return try await withStorageServer(root: fixture.root, configuration: configuration) { server in
        try await body(server, fixture)
    }
}

/// A transport for tests: retries come quickly so retrying tests stay fast.
func makeTransport(_ configure: (inout CurlTransport.Configuration) -> Void = { _ in }) throws -> CurlTransport {
    var configuration = CurlTransport.Configuration()
    configuration.retry = .quick
    configure(&configuration)
    return try CurlTransport(configuration: configuration)
}

extension RetryPolicy {
    /// Four attempts, 10–50 ms apart.
    static var quick: RetryPolicy {
        var policy = RetryPolicy()
        policy.baseDelay = .milliseconds(10)
        policy.maxDelay = .milliseconds(50)
        return policy
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

/// Collects values from callbacks that run on the transport's I/O thread or in adapters.
final class Recorder<Value: Sendable>: Sendable {
    private let values = Mutex<[Value]>([])

    func append(_ value: Value) {
        values.withLock { $0.append(value) }
    }

    var all: [Value] {
        values.withLock { $0 }
    }
}

/// The contents of the file at `path`, or empty data when it cannot be read.
func fileContents(_ path: String) -> Data {
    FileManager.default.contents(atPath: path) ?? Data()
}
