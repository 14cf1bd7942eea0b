import Archive
import FileKit
import StorageFormat
import Foundation
import Logging
import Transport

/// The library API an embedded app uses: keeps one local folder in step with one storage.
///
/// ```swift
/// let manager = try CacheManager(configuration: SyncConfiguration(
///     baseURL: URL(string: "https://raw.githubusercontent.com/m1a7/DemoCacheStorage/master/")!,
///     contentDirectory: "/var/lib/myapp/content"))
/// Task { for await event in await manager.events() { print(event) } }
/// let report = try await manager.checkForUpdates()
/// let recipe: Recipe = try manager.decode(Recipe.self, at: "recipes/pasta.json")
/// ```
public actor CacheManager {
    public nonisolated let configuration: SyncConfiguration
    private let store: StateStore
    private let transport: any Transport
    private let hub = EventHub()
    private var machine = CacheManagerStateMachine()
    private var running: Task<SyncReport, any Error>?
    private var overridePolicy = false
    private var storedLastError: SyncError?

    /// Opens the state database. Nothing is fetched until ``checkForUpdates()``.
    ///
    /// Throws ``SyncError/Code/configuration`` before creating anything when the state database
    /// would lie inside the content folder or its staging folder (``SyncConfiguration/validateLayout()``).
    public init(configuration: SyncConfiguration) throws(SyncError) {
        try configuration.validateLayout()
        self.configuration = configuration
        self.store = try StateStore(path: configuration.stateDatabasePath)
        if let transport = configuration.transport {
            self.transport = configuration.requestAdapter.map { AdaptingTransport(base: transport, adapter: $0) } ?? transport
        } else {
            var transportConfiguration = CurlTransport.Configuration()
            transportConfiguration.adapter = configuration.requestAdapter
            transportConfiguration.logger = configuration.logger
            transportConfiguration.maxConnectionsPerHost = max(configuration.maxConcurrentDownloads, 1)
            do {
                self.transport = try CurlTransport(configuration: transportConfiguration)
            } catch {
                throw SyncError(code: .configuration, message: error.message, underlying: error)
            }
        }
        machine.loaded()
    }

    // MARK: - Observing

    /// A stream of state changes, progress and outcomes. Each call makes a new stream; it ends
    /// when the observer stops iterating.
    public func events() -> AsyncStream<CacheManagerEvent> {
        hub.stream()
    }

    /// The current state.
    public var state: CacheManagerState { machine.state }

    /// The version the content folder holds, or nil before the first successful update.
    public func localVersion() async throws(SyncError) -> CacheVersion? {
        try await store.syncState()?.localVersion.flatMap { try? CacheVersion($0) }
    }

    /// The error of the last failed update, with a readable description; nil after a success.
    public func lastError() async -> SyncError? {
        if let storedLastError { return storedLastError }
        guard let record = try? await store.syncState(), let message = record.lastError else { return nil }
        return SyncError(code: record.lastErrorCode.flatMap(SyncError.Code.init(name:)) ?? .fileSystem, message: message)
    }

    /// When the storage was last asked for its status.
    public func lastCheck() async throws(SyncError) -> Date? {
        try await store.syncState()?.lastCheck
    }

    /// The most recent updates and their outcomes, newest first.
    public func history(limit: Int = 50) async throws(SyncError) -> [UpdateHistoryRecord] {
        try await store.history(limit: limit)
    }

    // MARK: - Controls

    /// Checks for a newer version and updates when there is one; returns when that is done.
    /// Joins an update already running. Throws a ``SyncError`` with code `cancelled` when the
    /// update is suspended before it finishes; cancelling the calling task suspends it.
    @discardableResult
    public func checkForUpdates() async throws(SyncError) -> SyncReport {
        perform(machine.checkForUpdates())
        let result: Result<SyncReport, SyncError> = await withTaskCancellationHandler {
            do throws(SyncError) {
                return .success(try await awaitRunning())
            } catch {
                return .failure(error)
            }
        } onCancel: {
            Task { await self.suspend() }
        }
        return try result.get()
    }

    /// Stops the running update; network activity ends within a second. Finished downloads
    /// are kept, and a later ``resume(overridingPolicy:)`` (even in a new process) skips them.
    public func suspend() async {
        perform(machine.suspend())
        if let running {
            _ = try? await running.value
        }
    }

    /// Continues after ``suspend()``. With `overridingPolicy`, the connection policy is ignored
    /// until the update ends (the user said "continue anyway").
    public func resume(overridingPolicy: Bool = false) {
        overridePolicy = overridingPolicy
        perform(machine.resume())
    }

    /// The play/pause button: pauses a running update, resumes a suspended one, and starts a
    /// check from any other state. Returns the new state.
    @discardableResult
    public func togglePlayPause() -> CacheManagerState {
        perform(machine.toggle())
        return machine.state
    }

    /// Forgets all state (version, ETags, plan, history) and deletes the content folder and its
    /// staging area, so the next check restores from the archive.
    public func reset() async throws(SyncError) {
        await suspend()
        let staging = StagingArea(contentDirectory: configuration.contentDirectory)
        let directory = configuration.contentDirectory
        // Not while another process updates the folder.
        let lock = try UpdateLock(statePath: store.path, contentDirectory: directory, stagingRoot: staging.root)
        defer { withExtendedLifetime(lock) {} }
        try await store.reset()
        try await BlockingWork.files { () throws(FileSystemError) in
            try staging.clear()
            try FileSystem.removeTree(directory)
        }
        storedLastError = nil
        machine.reset()
        hub.send(.stateChanged(machine.state))
    }

    /// Compares the content folder with the published version's tree digest and lists every
    /// difference; with `repair`, fixes them atomically (integrity extension). Refused while an
    /// update runs.
    public func verify(repair: Bool = false) async throws(SyncError) -> VerifyReport {
        if running != nil {
            throw SyncError(code: .configuration, message: "an update is running; verify after it finishes")
        }
        return try await SyncEngine(configuration: configuration, store: store, transport: transport).verifier.verify(repair: repair)
    }

    // MARK: - Reading content

    /// The path of a synced file, after checking `relativePath` cannot leave the content folder.
    public nonisolated func fileURL(for relativePath: String) throws(SyncError) -> URL {
        do {
            let path = try SafeRelativePath(validating: relativePath)
            return URL(fileURLWithPath: path.absolute(in: configuration.contentDirectory))
        } catch {
            throw SyncError(code: .unsafePath, message: "\(error)", underlying: error)
        }
    }

    /// The bytes of a synced file.
    public nonisolated func data(at relativePath: String) throws(SyncError) -> Data {
        let url = try fileURL(for: relativePath)
        do {
            return try Data(contentsOf: url)
        } catch {
            throw SyncError(code: .fileSystem,
                            message: "cannot read '\(relativePath)' from \(configuration.contentDirectory): \(error.localizedDescription); is it part of the synced version?",
                            underlying: error)
        }
    }

    /// A synced file as UTF-8 text.
    public nonisolated func string(at relativePath: String) throws(SyncError) -> String {
        let data = try data(at: relativePath)
        guard let text = String(data: data, encoding: .utf8) else {
            throw SyncError(code: .fileSystem, message: "'\(relativePath)' is not UTF-8 text")
        }
        return text
    }

    /// A synced JSON file decoded as `T`.
    public nonisolated func decode<T: Decodable>(_ type: T.Type, at relativePath: String,
                                                 using decoder: JSONDecoder = JSONDecoder()) throws(SyncError) -> T {
        let data = try data(at: relativePath)
        do {
            return try decoder.decode(type, from: data)
        } catch {
            throw SyncError(code: .fileSystem, message: "'\(relativePath)' does not decode as \(T.self): \(error)", underlying: error)
        }
    }

    // MARK: - Running updates

    private func perform(_ action: CacheManagerStateMachine.Action) {
        hub.send(.stateChanged(machine.state))
        switch action {
        case .none:
            break
        case .cancelUpdate:
            running?.cancel()
        case .startUpdate:
            guard running == nil else { return }
            startUpdate()
        }
    }

    private func startUpdate() {
        var engineConfiguration = configuration
        if overridePolicy { engineConfiguration.connectionPolicy = .always }
        let engine = SyncEngine(configuration: engineConfiguration, store: store, transport: transport)
        let hub = self.hub
        let policy = engineConfiguration.connectionPolicy
        running = Task {
            let outcome: Result<SyncReport, SyncError> = await withTaskGroup(of: Result<SyncReport, SyncError>?.self) { group in
                group.addTask {
                    do {
                        return .success(try await engine.update { hub.send(.progress($0)) })
                    } catch {
                        return .failure(SyncError.wrap(error))
                    }
                }
                group.addTask {
                    // The policy watcher: about four looks a second while the update runs.
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .milliseconds(250))
                        if Task.isCancelled { return nil }
                        if !(await policy.allowsTransfers()) {
                            return .failure(SyncError(code: .connectionNotAllowed,
                                                      message: "the connection policy stopped transfers; resume to continue"))
                        }
                    }
                    return nil
                }
                let first = await group.next() ?? nil
                group.cancelAll()
                if case .failure(let error) = first, error.code == .connectionNotAllowed {
                    // Wait for the update to wind down before reporting.
                    while await group.next() != nil {}
                    return .failure(error)
                }
                return first ?? .failure(SyncError(code: .cancelled, message: "the update was cancelled"))
            }
            self.updateEnded(outcome)
            return try outcome.get()
        }
    }

    private func updateEnded(_ outcome: Result<SyncReport, SyncError>) {
        running = nil
        overridePolicy = false
        switch outcome {
        case .success(let report):
            storedLastError = nil
            machine.updateEnded(succeeded: true, cancelled: false)
            hub.send(.finished(report))
        case .failure(let error) where error.code == .connectionNotAllowed:
            _ = machine.connectionNotAllowed()
            machine.updateEnded(succeeded: false, cancelled: true)
            hub.send(.connectionNotAllowed)
        case .failure(let error):
            let cancelled = error.code == .cancelled
            if !cancelled { storedLastError = error }
            machine.updateEnded(succeeded: false, cancelled: cancelled)
            hub.send(.failed(error))
        }
        hub.send(.stateChanged(machine.state))
    }

    private func awaitRunning() async throws(SyncError) -> SyncReport {
        guard let running else {
            throw SyncError(code: .cancelled, message: "the manager is suspended; resume it to update")
        }
        do {
            return try await running.value
        } catch {
            throw SyncError.wrap(error)
        }
    }
}
