import Foundation
import Testing
import Transport

@testable import ContentSync

/// A ``CacheManager`` whose transport is a ``ScriptedTransport`` serving an ExampleStorage
/// snapshot, with its content folder and state file in a fresh temporary directory.
struct ScriptedManagerFixture {
    let root: String
    let transport: ScriptedTransport
    let manager: CacheManager

    var content: String { root + "/client/content" }
    var state: String { root + "/client/state.sqlite" }

    func configuration() -> SyncConfiguration {
        Self.configuration(root: root, transport: transport)
    }

    static func configuration(root: String, transport: ScriptedTransport) -> SyncConfiguration {
        var configuration = SyncConfiguration(
            baseURL: ScriptedTransport.baseURL, contentDirectory: root + "/client/content",
            stateDatabasePath: root + "/client/state.sqlite")
        configuration.transport = transport
        configuration.maxConcurrentDownloads = 4
        return configuration
    }

    /// A second manager of the same folder, as another process would open it.
    func secondManager() throws -> CacheManager {
        try CacheManager(configuration: configuration())
    }

    func serve(_ version: String) {
        transport.serve(ExampleStorageFixture.snapshot(version))
    }

    func expectTree(is version: String, _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation)
        throws
    {
        let actual = try TreeSnapshot.read(content)
        let expected = ExampleStorageFixture.manifest(version)
        #expect(
            actual == expected,
            "\(comment.map { "\($0): " } ?? "")content differs from \(version): \(actual.difference(from: expected))",
            sourceLocation: sourceLocation)
    }

    /// Waits until `condition` holds for the manager's state, polling; records an issue after 20 s.
    @discardableResult
    func waitForState(
        _ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation,
        _ condition: (CacheManagerState) -> Bool
    ) async throws -> CacheManagerState {
        for _ in 0..<2000 {
            let state = await manager.state
            if condition(state) { return state }
            try await Task.sleep(for: .milliseconds(10))
        }
        let state = await manager.state
        Issue.record("the state stayed \(state)\(comment.map { ": \($0)" } ?? "")", sourceLocation: sourceLocation)
        return state
    }

    /// Holds the transport's requests, starts a check of `manager` in a task, and returns it
    /// once the update waits at the gate: an update running, for the controls to act on.
    func startHeldUpdate(_ manager: CacheManager, sourceLocation: SourceLocation = #_sourceLocation) async throws
        -> Task<SyncReport, any Error>
    {
        transport.hold()
        let update = Task { try await manager.checkForUpdates() }
        try await waitForHeldRequest(sourceLocation: sourceLocation)
        return update
    }

    /// Waits until at least one request waits at the transport's gate.
    func waitForHeldRequest(sourceLocation: SourceLocation = #_sourceLocation) async throws {
        for _ in 0..<2000 {
            if transport.gate.waitingCount > 0 { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("no request reached the transport", sourceLocation: sourceLocation)
    }
}

/// Runs `body` with a manager of a fresh folder whose transport serves `version` of ExampleStorage.
func withScriptedManager<T>(serving version: String = "1.0", _ body: (ScriptedManagerFixture) async throws -> T)
    async throws -> T
{
    try await withTemporaryDirectory { root in
        try FileManager.default.createDirectory(atPath: root + "/client", withIntermediateDirectories: true)
        let transport = ScriptedTransport(serving: ExampleStorageFixture.snapshot(version))
        let manager = try CacheManager(
            configuration: ScriptedManagerFixture.configuration(root: root, transport: transport))
        return try await body(ScriptedManagerFixture(root: root, transport: transport, manager: manager))
    }
}
