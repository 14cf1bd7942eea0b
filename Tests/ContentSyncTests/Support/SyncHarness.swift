import Foundation
import StorageServer
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// A storage server plus a client folder and state file, in one temporary directory.
struct SyncHarness {
    let server: StorageServer
    let baseURL: URL
    let root: String

    var content: String { root + "/client/content" }
    var state: String { root + "/client/state.sqlite" }

    func configuration(concurrency: Int = 8, fullCheckInterval: Duration? = nil) -> SyncConfiguration {
        var configuration = SyncConfiguration(baseURL: baseURL, contentDirectory: content, stateDatabasePath: state)
        configuration.maxConcurrentDownloads = concurrency
        if let fullCheckInterval { configuration.fullCheckInterval = fullCheckInterval }
        return configuration
    }

    func manager(concurrency: Int = 8, fullCheckInterval: Duration? = nil) throws -> CacheManager {
        try CacheManager(configuration: configuration(concurrency: concurrency, fullCheckInterval: fullCheckInterval))
    }

    /// One update with a fresh manager, as a new process would run it (`fullCheckInterval`:
    /// nil for the default).
    @discardableResult
    func sync(concurrency: Int = 8, fullCheckInterval: Duration? = nil) async throws -> SyncReport {
        try await manager(concurrency: concurrency, fullCheckInterval: fullCheckInterval).checkForUpdates()
    }

    func serve(_ version: String) {
        server.setRoot(ExampleStorageFixture.snapshot(version))
    }

    func tree() throws -> TreeSnapshot {
        try TreeSnapshot.read(content)
    }

    /// Content files the server answered with a body since the last reset (decoded paths below RXCacheContent/).
    func contentDownloads() -> [String] {
        server.requests().filter { $0.path.hasPrefix("/RXCacheContent/") && ($0.status == 200 || $0.status == 206) }
            .map { String($0.path.dropFirst("/RXCacheContent/".count)) }
    }

    /// The staging area's top-level entries, sorted; empty when it does not exist.
    func stagingEntries() -> [String] {
        let root = StagingArea(contentDirectory: content).root
        return ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).sorted()
    }

    /// Removes the twin's folder, as an operator who clears the staging area would: the next
    /// replay builds its tree whole, linking the content folder's files.
    func removeTwinFolder() throws {
        let retired = StagingArea(contentDirectory: content).retired
        #expect(FileManager.default.fileExists(atPath: retired), "there was a twin to remove")
        try FileManager.default.removeItem(atPath: retired)
    }

    func expectTree(is version: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let actual = try tree()
        let expected = ExampleStorageFixture.manifest(version)
        #expect(
            actual == expected, "content differs from \(version): \(actual.difference(from: expected))",
            sourceLocation: sourceLocation)
    }
}

/// Serves `version` of ExampleStorage (or `storageRoot`) and runs `body` with a harness.
func withSyncHarness<T>(
    serving version: String = "1.0", storageRoot: URL? = nil,
    _ body: (SyncHarness) async throws -> T
) async throws -> T {
    try await withTemporaryDirectory { root in
        try FileManager.default.createDirectory(atPath: root + "/client", withIntermediateDirectories: true)
        return try await withStorageServer(root: storageRoot ?? ExampleStorageFixture.snapshot(version)) { server in
            let harness = SyncHarness(server: server, baseURL: server.baseURL!, root: root)
            return try await body(harness)
        }
    }
}

/// Copies an ExampleStorage snapshot to `destination` so a test can damage it.
func copySnapshot(_ version: String, to destination: String) throws -> URL {
    try FileManager.default.copyItem(atPath: ExampleStorageFixture.snapshot(version).path, toPath: destination)
    return URL(fileURLWithPath: destination)
}

/// Replaces text in a storage file.
func rewrite(_ path: String, _ change: (String) -> String) throws {
    let text = try String(contentsOfFile: path, encoding: .utf8)
    try change(text).write(toFile: path, atomically: true, encoding: .utf8)
}

/// Every path below `root`, for "nothing was written outside" checks.
func allPaths(under root: String) -> Set<String> {
    Set((FileManager.default.enumerator(atPath: root)?.allObjects as? [String]) ?? [])
}
