import Archive
import FileKit
import Foundation
import Logging
import StorageFormat
import Synchronization
import Transport

/// The library API an embedded app uses: keeps one local folder in step with one storage.
///
/// <doc:EmbeddingTheManager> shows a complete, compiled example; the other articles of the
/// guide cover observing, pausing, reading files, errors and sharing a transport.
///
/// The controls (``checkForUpdates()``, ``suspend()``, ``resume(overridingPolicy:)``,
/// ``togglePlayPause()``, ``reset()``) may be called in any order from any task: each takes
/// effect in the order called, and the last one decides where the manager ends up.
public actor CacheManager {
    /// The configuration the manager was made with.
    public nonisolated let configuration: SyncConfiguration
    private let store: StateStore
    private let transport: any Transport
    /// The transport the manager built itself (no ``SyncConfiguration/transport`` given): it
    /// owns it and ends it in ``shutdown()``. Nil for a transport the app gave.
    private let ownedTransport: CurlTransport?
    private var isShutDown = false
    private let hub = EventHub()
    private var machine = CacheManagerStateMachine()
    /// The state observers were last told.
    private var publishedState: CacheManagerState
    /// Callers of ``checkForUpdates()`` and ``resume(overridingPolicy:)`` waiting for an outcome.
    private var updateWaiters: [UInt64: CheckedContinuation<Result<SyncReport, SyncError>, Never>] = [:]
    /// Cancelled callers, told once the work running when they were cancelled has stopped.
    private var cancelledWaiters: [CheckedContinuation<Result<SyncReport, SyncError>, Never>] = []
    /// Callers of ``reset()`` waiting for it to finish.
    private var resetWaiters: [CheckedContinuation<Result<Void, SyncError>, Never>] = []
    private var nextCaller: UInt64 = 0
    /// Waiting callers whose tasks were cancelled, recorded at once by their cancellation
    /// handlers: every control handles them first, so they take effect in the order they happened.
    private let cancelledCallers = CancelledCallers()
    private var storedLastError: SyncError?
    /// How many control calls have arrived: a test that makes a call in another task waits for
    /// this to grow, so its calls arrive in the order it made them.
    private(set) var controlCalls = 0
    private var logger: Logger { configuration.logger }
    /// The running update's task and the group its transfers join: a stop cancels the group
    /// first, so no queued request of the update starts while its tasks are being cancelled.
    private var runningTransfers: (task: Task<Void, Never>, group: TransferGroup)?

    /// Opens the state database. Nothing is fetched until ``checkForUpdates()``.
    ///
    /// Throws ``SyncError/Code/configuration`` before creating anything when the state database
    /// would lie inside the content folder or its staging folder (``SyncConfiguration/validateLayout()``),
    /// and when the base URL is not a storage's (not http or https, or with a query): a typo
    /// left a new state database behind.
    public init(configuration: SyncConfiguration) throws(SyncError) {
        try configuration.validateLayout()
        _ = try formatWork { () throws(StorageFormatError) in try StorageLayout(baseURL: configuration.baseURL) }
        self.configuration = configuration
        self.store = try StateStore(path: configuration.stateDatabasePath)
        if let transport = configuration.transport {
            self.transport =
                configuration.requestAdapter.map { AdaptingTransport(base: transport, adapter: $0) } ?? transport
            self.ownedTransport = nil
        } else {
            var transportConfiguration = CurlTransport.Configuration()
            transportConfiguration.adapter = configuration.requestAdapter
            transportConfiguration.logger = configuration.logger
            transportConfiguration.maxConnectionsPerHost = max(configuration.maxConcurrentDownloads, 1)
            do {
                let owned = try CurlTransport(configuration: transportConfiguration)
                self.transport = owned
                self.ownedTransport = owned
            } catch {
                throw SyncError(code: .configuration, message: error.message, underlying: error)
            }
        }
        publishedState = machine.publicState
    }

    // MARK: - Observing

    /// A stream of state changes, progress and outcomes. It starts with the current state, so
    /// an observer that subscribes before calling ``checkForUpdates()`` misses nothing. Each call
    /// makes a new stream; it ends when the observer stops iterating.
    public func events() -> AsyncStream<CacheManagerEvent> {
        settleCancelledCallers()
        return hub.stream(startingWith: .stateChanged(machine.publicState))
    }

    /// The current state.
    public var state: CacheManagerState {
        settleCancelledCallers()
        return machine.publicState
    }

    /// The version the content folder holds, or nil before the first successful update.
    public func localVersion() async throws(SyncError) -> CacheVersion? {
        try await store.syncState()?.localVersion.flatMap { try? CacheVersion($0) }
    }

    /// The error of the last failed update, with a readable description; nil after a success.
    public func lastError() async -> SyncError? {
        if let storedLastError { return storedLastError }
        guard let record = try? await store.syncState(), let message = record.lastError else { return nil }
        return SyncError(
            code: record.lastErrorCode.flatMap(SyncError.Code.init(name:)) ?? .fileSystem, message: message)
    }

    /// When the storage last answered a status request (``SyncStatus/lastCheck``; an attempt
    /// that got no answer leaves it).
    public func lastCheck() async throws(SyncError) -> Date? {
        try await store.syncState()?.lastCheck
    }

    /// The most recent update attempts and their outcomes, newest first: checks that found
    /// nothing to do, and cancelled and failed attempts, too. The state database keeps the last
    /// 1,000 (and always the last success). An attempt refused before it began because another
    /// update of the folder held it (``SyncError/Code/busy``) is not recorded: it changed
    /// nothing, and the update that held the folder records its own outcome.
    public func history(limit: Int = 50) async throws(SyncError) -> [UpdateHistoryEntry] {
        try await store.history(limit: limit).map(\.entry)
    }

    /// Forgets the signing keys the folder was synced with, so an update without
    /// ``SyncConfiguration/trustedSigningKeys`` accepts an unsigned storage again. Until then such
    /// an update is refused as ``SyncError/Code/signature``: leaving the keys out is a downgrade
    /// the operator must choose. Returns the key ids forgotten (empty when none were pinned).
    @discardableResult
    public func forgetTrustedKeys() async throws(SyncError) -> [String] {
        try await store.forgetTrustPins()
    }

    /// ``forgetTrustedKeys()`` for the folder whose state database is at `stateDatabasePath`,
    /// without a manager (a command-line tool's way). A missing database has no keys to forget.
    @discardableResult
    public static func forgetTrustedKeys(stateDatabasePath: String) async throws(SyncError) -> [String] {
        guard FileManager.default.fileExists(atPath: stateDatabasePath) else { return [] }
        return try await StateStore(path: stateDatabasePath).forgetTrustPins()
    }

    /// ``reset()`` for `contentDirectory`, whose state database is at `stateDatabasePath`,
    /// without a manager (a command-line tool's way): forgets the state and deletes the folder
    /// and its staging area while holding the update lock. Throws ``SyncError/Code/busy`` when
    /// another process is updating the folder.
    ///
    /// Returns false, deleting nothing of the folder, when no state database exists, it records
    /// no folder (never synced, or reset already), or it records no version synced there (a
    /// first sync that was refused, or failed: its state is forgotten, the folder left as it
    /// is); and refuses
    /// (``SyncError/Code/configuration``) when the database belongs to another folder: a folder
    /// that no state knows about is not the library's to delete.
    @discardableResult
    public static func reset(contentDirectory: String, stateDatabasePath: String) async throws(SyncError) -> Bool {
        guard FileManager.default.fileExists(atPath: stateDatabasePath) else { return false }
        // The same refusals as a sync's (the root or home folder, a state database inside the
        // folder); the URL is not used.
        let layout = SyncConfiguration(
            baseURL: URL(fileURLWithPath: "/"), contentDirectory: contentDirectory, stateDatabasePath: stateDatabasePath
        )
        try layout.validateLayout()
        do {
            return try await resetIntact(layout)
        } catch  where StateStore.isDamage(error) {
            // A damaged database cannot be read to start over, which is what a reset is for.
            return try await resetDamaged(layout, error)
        }
    }

    /// ``reset(contentDirectory:stateDatabasePath:)`` of a database that reads.
    private static func resetIntact(_ layout: SyncConfiguration) async throws(SyncError) -> Bool {
        let stateDatabasePath = layout.stateDatabasePath
        let store = try StateStore(path: layout.stateDatabasePath)
        let staging = StagingArea(contentDirectory: layout.contentDirectory)
        // Not while another process updates the folder.
        let lock = try UpdateLock(
            statePath: store.path, stateFolder: store.folder, contentDirectory: layout.contentDirectory,
            staging: staging)
        defer { withExtendedLifetime(lock) {} }
        // Checked under the lock: a first update running now has no state row yet.
        guard let owner = try await store.syncState()?.contentDirectory else { return false }
        guard owner == layout.contentDirectory else {
            throw SyncError(
                code: .configuration,
                message:
                    "the state database \(stateDatabasePath) belongs to \(owner), not \(layout.contentDirectory); refusing to reset it"
            )
        }
        return try await wipe(layout.contentDirectory, staging: staging, store: store)
    }

    /// ``reset(contentDirectory:stateDatabasePath:)`` when the state database is damaged
    /// (`damage`): under the update lock, its files are deleted and made again, then the
    /// folder and its staging area are wiped as usual. The folder is deleted only when the
    /// database names it (its `syncState` row still reads) or, when that cannot be read, when
    /// the folder has a staging area beside it (it was synced, not a folder of the user's);
    /// otherwise the reset refuses and deletes nothing.
    private static func resetDamaged(_ layout: SyncConfiguration, _ damage: SyncError) async throws(SyncError) -> Bool {
        let path = layout.stateDatabasePath
        let directory = layout.contentDirectory
        let staging = StagingArea(contentDirectory: directory)
        // Looked for before the lock, which makes the staging area for its file.
        try checkDamagedOwner(path, directory, damage, hadStaging: staging.exists())
        let lock = try UpdateLock(statePath: path, contentDirectory: directory, staging: staging)
        defer { withExtendedLifetime(lock) {} }
        for file in [path, path + "-wal", path + "-shm"] where unlink(file) != 0 && errno != ENOENT {
            throw SyncError(
                code: .stateStore,
                message: "cannot delete the damaged state database \(file): \(String(cString: strerror(errno)))")
        }
        let store = try StateStore(path: path)
        try await wipe(directory, staging: staging, store: store, owned: true)
        return true
    }

    /// Refuses the reset of a damaged state database at `path` unless `directory` is its folder:
    /// the database names it (its `syncState` row still reads), or, when it cannot say, the folder
    /// had a staging area beside it before the reset's lock made one (it was synced, not a folder
    /// of the user's), or it does not exist.
    private static func checkDamagedOwner(
        _ path: String, _ directory: String, _ damage: SyncError, hadStaging: Bool
    ) throws(SyncError) {
        let owner = StateStore.recordedFolder(damagedDatabase: path)
        if let owner, owner != directory {
            throw SyncError(
                code: .configuration,
                message:
                    "the state database \(path) belongs to \(owner), not \(directory); refusing to reset it (it is damaged: \(damage.message))"
            )
        }
        guard owner != nil || hadStaging || !FileSystem.exists(directory) else {
            throw SyncError(
                code: .configuration,
                message:
                    "the state database \(path) is damaged and cannot say whether \(directory) is its folder, which has no staging area beside it; refusing to delete the folder: delete the database by hand to start over, and the next sync asks before replacing the folder"
            )
        }
    }

    /// What the state database says about the folder (last attempt, last success, consecutive
    /// failures, pending version, recent history), with this manager's live state.
    public func status(historyLimit: Int = 5) async throws(SyncError) -> SyncStatus {
        let staging = StagingArea(contentDirectory: configuration.contentDirectory)
        let running = UpdateLockProbe.holder(statePath: store.path, stagingRoot: staging.location).map(
            SyncStatus.RunningUpdate.init(processID:))
        var status = try await SyncStatus.read(
            store, contentDirectory: configuration.contentDirectory, running: running,
            historyLimit: historyLimit)
        switch machine.publicState {
        case .working, .suspended, .resetting: status.state = machine.publicState
        case .unknown, .ready, .succeeded, .failed: break
        }
        return status
    }

    // MARK: - Controls

    /// Checks for a newer version and updates when there is one; returns when that is done.
    ///
    /// Joins an update already running; during a reset, waits for the update that follows it.
    /// Throws a ``SyncError`` with code ``SyncError/Code/cancelled`` when the update is suspended
    /// or reset before it finishes (unless a resume or check restarts it first: then this returns
    /// that update's outcome). Cancelling the calling task suspends the update; the call then
    /// throws once the update has stopped.
    @discardableResult
    public func checkForUpdates() async throws(SyncError) -> SyncReport {
        try await awaitUpdate { $0.checkForUpdates() }
    }

    /// Stops the running update and returns once it has stopped; network activity ends within a
    /// second. Finished downloads are kept, and a later ``resume(overridingPolicy:)`` (even in a
    /// new process) skips them. When nothing runs, the manager holds off until resumed.
    public func suspend() async {
        settleCancelledCallers()
        controlCalls += 1
        perform(machine.suspend())
        if let task = machine.runningTask {
            await task.value
        }
    }

    /// Continues after ``suspend()``, and returns the outcome of the update it runs. Joins an
    /// update already running; from any other state it starts one, like ``checkForUpdates()``.
    ///
    /// With `overridingPolicy`, the update it starts ignores the connection policy until it
    /// ends (the user said "continue anyway").
    @discardableResult
    public func resume(overridingPolicy: Bool = false) async throws(SyncError) -> SyncReport {
        try await awaitUpdate { $0.resume(overridingPolicy: overridingPolicy) }
    }

    /// The play/pause button: pauses a running update, resumes a suspended one, and starts a
    /// check from any other state. Returns the new state at once; ``events()`` tells the outcome.
    /// After ``shutdown()`` it starts nothing and returns the state as it is.
    @discardableResult
    public func togglePlayPause() -> CacheManagerState {
        settleCancelledCallers()
        controlCalls += 1
        guard !isShutDown else { return machine.publicState }
        perform(machine.toggle())
        return machine.publicState
    }

    /// Stops any running update and ends the transport the manager built itself (its threads
    /// and connections); a transport given in ``SyncConfiguration/transport`` is left running,
    /// since the app owns it. Call it when the manager is no longer needed: after it, every
    /// update fails as cancelled. Safe to call more than once.
    public func shutdown() async {
        guard !isShutDown else { return }
        isShutDown = true
        await suspend()
        await ownedTransport?.shutdown()
    }

    /// Forgets all state (version, ETags, plan, history) and deletes the content folder and its
    /// staging area, so the next check restores from the archive.
    ///
    /// A running update is stopped first, and the reset holds the folder's update lock while it
    /// deletes, so it never deletes what an update (of this process or another) is writing.
    /// Afterwards the manager is ``CacheManagerState/ready``, unless a check, resume or suspend
    /// was called while the reset ran. Throws ``SyncError/Code/busy`` when another process is
    /// updating the folder.
    public func reset() async throws(SyncError) {
        settleCancelledCallers()
        controlCalls += 1
        let result: Result<Void, SyncError> = await withCheckedContinuation { continuation in
            resetWaiters.append(continuation)
            perform(machine.reset())
        }
        try result.get()
    }

    /// Compares the content folder with the published version's tree digest and lists every
    /// difference; with `repair`, fixes them atomically (integrity extension). Refused with
    /// ``SyncError/Code/busy`` while an update or reset runs.
    public func verify(repair: Bool = false) async throws(SyncError) -> VerifyReport {
        settleCancelledCallers()
        if machine.runningTask != nil {
            throw SyncError(
                code: .busy,
                message: "an update or reset of \(configuration.contentDirectory) is running; verify after it finishes")
        }
        return try await SyncEngine(configuration: configuration, store: store, transport: transport).verifier.verify(
            repair: repair)
    }

    // MARK: - Reading content

    /// `relativePath` checked: it cannot leave the content folder (``SyncError/Code/unsafePath``).
    private static func safePath(_ relativePath: String) throws(SyncError) -> SafeRelativePath {
        do {
            return try SafeRelativePath(validating: relativePath)
        } catch {
            throw SyncError(code: .unsafePath, message: "\(error)", underlying: error)
        }
    }

    /// The path of a synced file, after checking `relativePath` cannot leave the content folder.
    public nonisolated func fileURL(for relativePath: String) throws(SyncError) -> URL {
        URL(fileURLWithPath: try Self.safePath(relativePath).absolute(in: configuration.contentDirectory))
    }

    /// The bytes of a synced file. It is opened name by name below the content folder without
    /// following a symlink, so one planted in the folder is refused rather than read through, as
    /// are a folder, a FIFO and a device (``SyncError/Code/fileSystem``).
    public nonisolated func data(at relativePath: String) throws(SyncError) -> Data {
        let path = try Self.safePath(relativePath)
        do {
            // Opened name by name, no symlink followed: a link planted in the folder reads nothing outside it.
            let (fd, info) = try path.openRegularFile(beneath: configuration.contentDirectory)
            defer { close(fd) }
            return try DescriptorIO.read(
                fd, count: Int(info.st_size), path: path.absolute(in: configuration.contentDirectory))
        } catch {
            throw SyncError(
                code: .fileSystem,
                message:
                    "cannot read '\(relativePath)' from \(configuration.contentDirectory): \(error); is it part of the synced version?",
                underlying: error)
        }
    }

    /// A synced file as UTF-8 text. Throws ``SyncError/Code/decoding`` when it is not.
    public nonisolated func string(at relativePath: String) throws(SyncError) -> String {
        let data = try data(at: relativePath)
        guard let text = String(data: data, encoding: .utf8) else {
            throw SyncError(code: .decoding, message: "'\(relativePath)' is not UTF-8 text")
        }
        return text
    }

    /// A synced JSON file decoded as `T`. Throws ``SyncError/Code/decoding`` when it does not decode.
    public nonisolated func decode<T: Decodable>(
        _ type: T.Type, at relativePath: String,
        using decoder: JSONDecoder = JSONDecoder()
    ) throws(SyncError) -> T {
        let data = try data(at: relativePath)
        do {
            return try decoder.decode(type, from: data)
        } catch {
            throw SyncError(
                code: .decoding, message: "'\(relativePath)' does not decode as \(T.self): \(error)", underlying: error)
        }
    }

    // MARK: - Running the machine

    /// Returns once no update or reset runs, and none is about to start.
    func waitUntilIdle() async {
        while let task = machine.runningTask {
            await task.value
        }
    }

    /// Registers the caller, applies `event`, and waits for the outcome of the update it leads to.
    private func awaitUpdate(_ event: (inout CacheManagerStateMachine) -> CacheManagerStateMachine.Action)
        async throws(SyncError) -> SyncReport
    {
        settleCancelledCallers()
        controlCalls += 1
        guard !Task.isCancelled else {
            throw SyncError(code: .cancelled, message: "the calling task was cancelled before the update started")
        }
        guard !isShutDown else {
            throw SyncError(code: .cancelled, message: "the manager was shut down; make a new one to update again")
        }
        let caller = nextCaller
        nextCaller += 1
        let cancelled = cancelledCallers
        let result: Result<SyncReport, SyncError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                updateWaiters[caller] = continuation
                perform(event(&machine))
            }
        } onCancel: {
            cancelled.insert(caller)
            Task { await self.settleCancelledCallers() }
        }
        return try result.get()
    }

    /// Each cancelled caller still waiting suspends the update, and returns once it has stopped
    /// (so that, as after ``suspend()``, nothing it started still runs).
    private func settleCancelledCallers() {
        for caller in cancelledCallers.takeAll() {
            guard let waiter = updateWaiters.removeValue(forKey: caller) else { continue }
            perform(machine.suspend())
            if machine.runningTask == nil {
                waiter.resume(returning: .failure(Self.callerCancelled))
            } else {
                cancelledWaiters.append(waiter)
            }
        }
    }

    private static let callerCancelled = SyncError(
        code: .cancelled,
        message: "the update was suspended because its caller was cancelled; resume to continue")

    /// The work running when callers were cancelled has stopped: they return now.
    private func releaseCancelledWaiters() {
        let waiters = cancelledWaiters
        cancelledWaiters.removeAll()
        for waiter in waiters { waiter.resume(returning: .failure(Self.callerCancelled)) }
    }

    private func perform(_ action: CacheManagerStateMachine.Action) {
        switch action {
        case .none:
            break
        case .startUpdate(let overridingPolicy):
            var engineConfiguration = configuration
            if overridingPolicy { engineConfiguration.connectionPolicy = .always }
            let engine = SyncEngine(configuration: engineConfiguration, store: store, transport: transport)
            let hub = self.hub
            let policy = engineConfiguration.connectionPolicy
            let transfers = TransferGroup()
            let task = Task {
                let result = await TransferGroup.$current.withValue(transfers) {
                    await Self.update(engine, policy: policy, hub: hub, transfers: transfers)
                }
                self.updateEnded(result)
            }
            runningTransfers = (task, transfers)
            machine.updateStarted(task)
        case .cancelUpdate(let task):
            if let running = runningTransfers, running.task == task { running.group.cancel() }
            task.cancel()
        case .startReset:
            let configuration = configuration
            let store = store
            machine.resetStarted(
                Task {
                    let result = await Self.reset(contentDirectory: configuration.contentDirectory, store: store)
                    self.resetEnded(result)
                })
        }
        publishState()
    }

    /// Tells observers the state when it changed since they were last told.
    private func publishState() {
        let state = machine.publicState
        guard state != publishedState else { return }
        publishedState = state
        logger.debug("cache manager state", metadata: ["sync.state": "\(state.rawValue)"])
        hub.send(.stateChanged(state))
    }

    private func updateEnded(_ result: Result<SyncReport, SyncError>) {
        runningTransfers = nil
        let end = machine.updateEnded(result)
        publishState()
        if let event = end.event {
            switch event {
            case .finished: storedLastError = nil
            case .failed(let error): storedLastError = error
            case .stateChanged, .progress, .connectionNotAllowed, .suspended: break
            }
            hub.send(event)
        }
        if let outcome = end.outcome { deliverToUpdateWaiters(outcome) }
        releaseCancelledWaiters()
        perform(end.next)
    }

    private func resetEnded(_ result: Result<Void, SyncError>) {
        if case .success = result { storedLastError = nil }
        let end = machine.resetEnded()
        publishState()
        let waiters = resetWaiters
        resetWaiters.removeAll()
        for waiter in waiters { waiter.resume(returning: result) }
        if let outcome = end.updateOutcome { deliverToUpdateWaiters(outcome) }
        releaseCancelledWaiters()
        perform(end.next)
    }

    private func deliverToUpdateWaiters(_ outcome: Result<SyncReport, SyncError>) {
        let waiters = updateWaiters.values
        updateWaiters.removeAll()
        for waiter in waiters { waiter.resume(returning: outcome) }
    }

    // MARK: - Work, off the actor

    /// One update, with the connection policy watched beside it; `transfers` is the update's
    /// ``TransferGroup``, cancelled first when the policy stops it.
    private static func update(
        _ engine: SyncEngine, policy: ConnectionPolicy, hub: EventHub, transfers: TransferGroup
    ) async -> Result<SyncReport, SyncError> {
        let stopReason = StopReason()
        return await withTaskGroup(of: Result<SyncReport, SyncError>?.self) { group in
            group.addTask {
                do {
                    return .success(try await engine.update(stopReason: stopReason) { hub.send(.progress($0)) })
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
                        let stop = SyncError(
                            code: .connectionNotAllowed,
                            message: "the connection policy stopped transfers; resume to continue")
                        stopReason.set(stop)
                        return .failure(stop)
                    }
                }
                return nil
            }
            let first = await group.next() ?? nil
            if case .failure(let error) = first, error.code == .connectionNotAllowed {
                // The policy stopped the update: its transfers first, then its tasks; the report
                // waits for the update to wind down.
                transfers.cancel()
                group.cancelAll()
                while await group.next() != nil {}
                return .failure(error)
            }
            group.cancelAll()
            return first ?? .failure(SyncError(code: .cancelled, message: "the update was cancelled"))
        }
    }

    /// Forgets the state and deletes the staging folder, and the content folder when it is the
    /// library's; the caller holds the update lock. Returns whether the content folder went.
    /// Forgets the version, deletes the files, then forgets the rest: a reset killed at any
    /// point leaves a state that still owns the folder, so `reset` runs again, and a sync
    /// restores (the state emptied first left files no state knew, which `reset` would not
    /// touch and `sync` refused without `--force`).
    ///
    /// The content folder is the library's when the state records a version synced there, a
    /// switch to one under way, or a reset of it (`owned` says so for a damaged database, whose
    /// caller decided). A refused first sync records its attempt, and nothing more: the folder
    /// it refused (not empty, never synced) is left alone, as `sync` left it (a `reset` after
    /// such a refusal deleted the user's files).
    @discardableResult
    private static func wipe(_ directory: String, staging: StagingArea, store: StateStore, owned: Bool? = nil)
        async throws(SyncError) -> Bool
    {
        let removing: Bool
        if let owned {
            removing = owned
        } else {
            let record = try await store.syncState()
            let switching = try await store.pendingPlan()?.phase == .switching
            removing = record?.localVersion != nil || switching || record?.state == StateStore.resettingState
        }
        // Marked as resetting only when the folder goes: a reset of a folder left alone that is
        // killed here must not leave a mark that makes the next reset take the folder.
        if removing { try await store.forgetVersion() }
        do {
            try await BlockingWork.files { () throws(FileSystemError) in
                try staging.clear()
                if removing { try FileSystem.removeTree(directory) }
            }
        } catch {
            throw staging.shown(error)
        }
        try await store.reset()
        return removing
    }

    /// Forgets the state and deletes the content and staging folders, holding the update lock.
    /// A database damaged since the manager opened it is emptied in place and migrated again
    /// (its files stay open here), under the same ownership rule as
    /// ``reset(contentDirectory:stateDatabasePath:)``'s.
    private static func reset(contentDirectory directory: String, store: StateStore) async -> Result<Void, SyncError> {
        do throws(SyncError) {
            let staging = StagingArea(contentDirectory: directory)
            let hadStaging = staging.exists()
            // Not while another process updates the folder.
            let lock = try UpdateLock(
                statePath: store.path, stateFolder: store.folder, contentDirectory: directory, staging: staging)
            defer { withExtendedLifetime(lock) {} }
            do {
                try await wipe(directory, staging: staging, store: store)
            } catch  where StateStore.isDamage(error) {
                try checkDamagedOwner(store.path, directory, error, hadStaging: hadStaging)
                try await store.eraseDamaged()
                try await wipe(directory, staging: staging, store: store, owned: true)
            }
            return .success(())
        } catch {
            return .failure(error)
        }
    }
}

/// The ids of waiting callers whose tasks were cancelled. Cancellation handlers run on any
/// thread and cannot enter the actor, so they record here under a lock.
private final class CancelledCallers: Sendable {
    private let ids = Mutex<[UInt64]>([])

    func insert(_ caller: UInt64) {
        ids.withLock { $0.append(caller) }
    }

    func takeAll() -> [UInt64] {
        ids.withLock { ids in
            defer { ids.removeAll() }
            return ids
        }
    }
}
