import ContentSync
import FileKit
import Foundation
import Logging
import Synchronization
import Transport

/// One storage's poll loop: check, log, record metrics and readiness, run hooks, and pause as
/// its ``PollSchedule`` says, until asked to stop or stopped by an error that retrying cannot fix.
public final class StorageWatcher: Sendable {
    /// Why a watcher's loop ended without being asked to.
    public struct Stopped: Error, Sendable, CustomStringConvertible {
        /// The storage.
        public var storage: String
        /// The failure that stopped it.
        public var error: SyncError
        /// True when retrying could not fix it; false when `max-failures` ran out.
        public var permanent: Bool
        /// The failures in a row, for `max-failures`.
        public var consecutiveFailures: Int

        /// "storage docs stopped: …".
        public var description: String {
            permanent
                ? "storage \(storage) stopped: retrying cannot fix this: \(error)"
                : "storage \(storage) stopped after \(consecutiveFailures) failed check\(consecutiveFailures == 1 ? "" : "s") in a row: \(error)"
        }
    }

    /// What the agent hears from the loop.
    public struct Callbacks: Sendable {
        /// After the first check, whatever its outcome.
        public var firstCheckDone: @Sendable () -> Void = {}
        /// A one-line status after each check, for systemd's STATUS=.
        public var status: @Sendable (String) -> Void = { _ in }
        /// Before each check.
        public var checkStarting: @Sendable () -> Void = {}
        /// After each check: its report or its error, and how long it took.
        public var checkFinished: @Sendable (Result<SyncReport, SyncError>, Duration) -> Void = { _, _ in }

        /// No callbacks.
        public init() {}
    }

    /// The settings it runs.
    public let settings: StorageSettings
    /// The client it drives.
    public let manager: CacheManager
    /// Uniform in [0, 1): the schedule's jitter and splay draws. The fleet simulation seeds it.
    let random: @Sendable () -> Double
    let logger: Logger
    let metrics: StorageMetrics?
    let health: AgentHealth?
    /// What counts of this watcher's reports to ``health`` (see ``AgentHealth/Registration``).
    let registration: AgentHealth.Registration?
    private let control = Mutex(Control())
    /// Held from the watcher's making to its ``shutdown(keepingMetrics:)``: one watcher per state.
    private let watchLock: RangeLockFile
    /// Held as long: one watcher per folder, whatever its state (``FolderKeeper``).
    private let keeper: FolderKeeper

    private struct Control {
        var stopRequested = false
        var sleeper: Task<Void, any Error>?
        /// The post-update hooks running, stopped (SIGTERM, then SIGKILL) by ``stop()``.
        var hooks: Task<Void, Never>?
        /// A reload's stop: the running check ends whole, its post-update hooks included.
        var hooksFinish = false
    }

    /// A watcher for `settings`, fetching through `transport` (shared by the agent's storages).
    /// `random` draws the schedule's jitter and splay (default: the system's generator).
    public init(
        settings: StorageSettings, transport: (any Transport)?, logger: Logger,
        metrics: StorageMetrics? = nil, health: AgentHealth? = nil,
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }
    ) throws(SyncError) {
        var logger = logger
        logger[metadataKey: "storage"] = "\(settings.name)"
        self.settings = settings
        self.logger = logger
        self.metrics = metrics
        self.health = health
        self.registration = health?.register(storage: settings.name)
        self.random = random
        self.manager = try CacheManager(
            configuration: settings.clientConfiguration(
                transport: transport, logger: logger.logLevel <= .debug ? logger : nil,
                hookLogger: logger))
        self.watchLock = try Self.takeWatchLock(settings)
        do {
            self.keeper = try FolderKeeper(directory: settings.directory)
        } catch {
            watchLock.unlock(slot: Self.watchLockSlot)
            throw error
        }
        self.stateIdentity = FileSystem.identity(of: settings.statePath)
    }

    /// The state database's device and inode when the watcher opened it.
    private let stateIdentity: (device: Int64, inode: Int64)?

    /// A failure when the state database at the configured path is no longer the one this
    /// watcher holds open (deleted or replaced while the agent ran): its checks went on into the
    /// deleted file, while `status` said "never synced" and a new agent refused the folder.
    private func stateDatabaseGone() -> SyncError? {
        guard let opened = stateIdentity else { return nil }
        if let now = FileSystem.identity(of: settings.statePath), now == opened { return nil }
        return SyncError(
            code: .configuration,
            message:
                "the state database \(settings.statePath) was deleted or replaced while the agent ran; this storage stops, since its records would go into a file nobody reads. Put the database back and restart the agent; or, to start over, reset the folder (sync-agent reset) before restarting"
        )
    }

    /// The byte of the update lock file (`<state>.lock`) a watcher holds, as an open file
    /// description lock: independent of the update's own `flock` on that file, and released by
    /// the kernel when the process dies.
    static let watchLockSlot: Int64 = 0

    /// Whether a watcher holds the watch lock of the state database at `statePath` (a missing
    /// lock file: none). Nothing is created.
    static func watchLockIsHeld(statePath: String) -> Bool {
        let path = statePath + ".lock"
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG, let lock = try? RangeLockFile(path: path)
        else { return false }
        guard let free = try? lock.tryLock(slot: watchLockSlot, exclusive: false) else { return false }
        if free { lock.unlock(slot: watchLockSlot) }
        return !free
    }

    /// Takes the watch lock of `settings`' state, or says which watcher holds it.
    ///
    /// Two `watch` processes on one folder and state both ran: each update waited for the
    /// other's, every change was checked twice and every hook ran twice. A manual `sync` beside
    /// a watcher still works (it takes only the update lock).
    static func takeWatchLock(_ settings: StorageSettings) throws(SyncError) -> RangeLockFile {
        let path = settings.statePath + ".lock"
        let parent = (settings.statePath as NSString).deletingLastPathComponent
        let folder = open(parent.isEmpty ? "." : parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard folder >= 0 else {
            throw SyncError(
                FileSystemError("cannot open the state database's folder", path: parent, syscall: "open", errno: errno))
        }
        defer { close(folder) }
        let lock: RangeLockFile
        do {
            lock = try RangeLockFile(
                in: folder, name: (settings.statePath as NSString).lastPathComponent + ".lock", mode: 0o644, path: path)
        } catch {
            throw SyncError(error)
        }
        let taken: Bool
        do {
            taken = try lock.tryLock(slot: watchLockSlot, exclusive: true)
        } catch {
            throw SyncError(error)
        }
        guard taken else {
            throw SyncError(
                code: .configuration,
                message:
                    "another sync-agent watch already keeps \(settings.directory) in step with the state \(settings.statePath) (it holds the watch lock on \(path)); stop that one first, or give this storage its own dir and state"
            )
        }
        return lock
    }

    /// Asks the loop to end once the running check (if any) finishes; a pause ends at once.
    ///
    /// `stoppingHooks`: the running post-update hooks are stopped too (the agent's shutdown:
    /// a stop waits for no hook's whole timeout, beyond systemd's TimeoutStopSec). A reload
    /// passes false: the check it restarts a storage after is finished whole, hooks included
    /// (a reload during an update once cancelled them, and the version's hooks never ran).
    public func stop(stoppingHooks: Bool = true) {
        let (sleeper, hooks) = control.withLock { control in
            control.stopRequested = true
            control.hooksFinish = !stoppingHooks
            return (control.sleeper, stoppingHooks ? control.hooks : nil)
        }
        sleeper?.cancel()
        hooks?.cancel()
    }

    /// Suspends the running update (finished downloads are kept) and stops: for SIGTERM.
    public func suspend() async {
        stop()
        await manager.suspend()
    }

    /// Ends the manager; call after ``run(callbacks:)`` returned. Its readiness stays as it was:
    /// a storage an error stopped is still named by `/readyz` while it holds no version (the
    /// agent forgets it when a reload drops it). With `keepingMetrics` (a storage an error
    /// stopped), its series stay in `/metrics`, so the failure and the last success stay seen
    /// and the alerts on them fire; otherwise (a reload drops or replaces it) they go.
    public func shutdown(keepingMetrics: Bool = false) async {
        await manager.shutdown()
        keeper.release()
        watchLock.unlock(slot: Self.watchLockSlot)
        if !keepingMetrics { metrics?.remove() }
    }

    private var stopRequested: Bool { control.withLock { $0.stopRequested } }

    /// Reads the state database every ``AgentHealth/beatInterval`` and reports each answer, from
    /// now until the task is cancelled and ``AgentHealth/stopBeats(_:)`` called (a beat after
    /// that is ignored); nil without ``health``. The read is the one `status` makes, through
    /// GRDB's reader queue, where every check's database work goes too.
    private func startBeats() -> Task<Void, Never>? {
        guard let health, let registration else { return nil }
        health.startBeats(registration)
        return Task { [manager] in
            while !Task.isCancelled {
                try? await Task.sleep(for: health.beatInterval)
                // An error (a damaged database) is an answer too: the check reports it.
                _ = try? await manager.localVersion()
                health.beat(registration)
            }
        }
    }

    /// The critical line of a storage that an error retrying cannot fix stops: from its own loop,
    /// or from the agent when the watcher cannot even be made. `logger` carries the storage's name.
    static func logPermanentStop(_ error: any Error, to logger: Logger) {
        logger.critical("stopping this storage: retrying cannot fix this: \(error)")
    }

    /// Checks until ``stop()``; throws ``Stopped`` when an error stops the storage.
    ///
    /// `continuingFailures`: a storage a reload restarted with new settings counts its failures
    /// in a row on from the state database's count, so a reload does not reset `max-failures`
    /// (8 failures in a row with `max-failures: 3` ran on while reloads kept coming).
    public func run(callbacks: Callbacks = Callbacks(), continuingFailures: Bool = false) async throws(Stopped) {
        let beats = startBeats()
        defer {
            // A stopped storage is not stalled.
            beats?.cancel()
            if let registration { health?.stopBeats(registration) }
        }
        var schedule = settings.schedule
        let local = try? await manager.localVersion()
        metrics?.setVersion(local?.text)
        let recorded = try? await manager.status(historyLimit: 1)
        if let metrics, let recorded {
            metrics.restore(
                lastSuccess: recorded.lastSuccess?.finishedAt, consecutiveFailures: recorded.consecutiveFailures)
        }
        if continuingFailures, let recorded { schedule.continuing(failures: recorded.consecutiveFailures) }
        if let registration { health?.setReady(registration, local != nil) }
        let announcer = announceUpdates()
        defer { announcer.cancel() }
        var first = true
        var wait = schedule.initialDelay(random: random())
        while true {
            if wait > .zero {
                let sleeper = Task { [wait] in try await Task.sleep(for: wait.clampedWait) }
                let stopping = control.withLock { control in
                    control.sleeper = sleeper
                    return control.stopRequested
                }
                if stopping { sleeper.cancel() }
                _ = try? await sleeper.value
                control.withLock { $0.sleeper = nil }
            }
            if stopRequested || Task.isCancelled { break }
            if let gone = stateDatabaseGone() {
                Self.logPermanentStop(gone, to: logger)
                throw Stopped(
                    storage: settings.name, error: gone, permanent: true,
                    consecutiveFailures: schedule.consecutiveFailures + 1)
            }
            let started = ContinuousClock.now
            let startedAt = Date()
            callbacks.checkStarting()
            do {
                let report = try await manager.checkForUpdates()
                callbacks.checkFinished(.success(report), ContinuousClock.now - started)
                let summary = ReportText.summary(report)
                logger.info("\(summary)")
                for warning in report.warnings { logger.warning("\(warning)") }
                metrics?.checkSucceeded(report, duration: ContinuousClock.now - started)
                if let registration { health?.setReady(registration, true) }
                wait = schedule.afterSuccess(random: random())
                callbacks.status("\(summary); next check in \(ReportText.seconds(wait))")
                if report.outcome != .upToDate, !settings.postUpdateHooks.isEmpty {
                    let (hooks, name, directory) = (settings.postUpdateHooks, settings.name, settings.directory)
                    let runner = settings.hookRunner
                    let running = Task { [logger] in
                        await HookRunner.afterUpdate(
                            hooks, storage: name, directory: directory, report: report, logger: logger, runner: runner)
                    }
                    let stopping = control.withLock { control in
                        control.hooks = running
                        return control.stopRequested && !control.hooksFinish
                    }
                    if stopping { running.cancel() }
                    await running.value
                    control.withLock { $0.hooks = nil }
                }
            } catch {
                callbacks.checkFinished(.failure(error), ContinuousClock.now - started)
                if stopRequested && (error.code == .cancelled || error.code == .connectionNotAllowed) { break }
                let failures = schedule.consecutiveFailures + 1
                if let metrics {
                    // The state database counts across restarts; the schedule only since this start.
                    let recorded = try? await manager.status(historyLimit: 1)
                    // The attempt this failure ended: what it downloaded before it failed, if it got that far.
                    let attempt = recorded?.lastAttempt.flatMap {
                        $0.outcome != .succeeded && $0.finishedAt >= startedAt.addingTimeInterval(-1) ? $0 : nil
                    }
                    metrics.checkFailed(
                        code: "\(error.code)", consecutiveFailures: max(recorded?.consecutiveFailures ?? 0, failures),
                        bytesDownloaded: attempt?.bytesDownloaded ?? 0, filesDownloaded: attempt?.filesDownloaded ?? 0)
                }
                if PollSchedule.isPermanent(error) {
                    Self.logPermanentStop(error, to: logger)
                    throw Stopped(storage: settings.name, error: error, permanent: true, consecutiveFailures: failures)
                }
                wait = schedule.afterFailure(random: random())
                if settings.maxFailures > 0, failures >= settings.maxFailures {
                    logger.critical(
                        "stopping after \(failures) failed check\(failures == 1 ? "" : "s") in a row: \(error)")
                    throw Stopped(storage: settings.name, error: error, permanent: false, consecutiveFailures: failures)
                }
                logger.error("check failed (\(failures) in a row; next in \(ReportText.seconds(wait))): \(error)")
                callbacks.status(
                    "check failed (\(failures) in a row), next in \(ReportText.seconds(wait)): \(String(describing: error).prefix(200))"
                )
            }
            if first {
                first = false
                callbacks.firstCheckDone()
            }
        }
        logger.info("stopped")
    }

    /// An info line when an update starts (a first restore can take long, and was silent): where
    /// from, and the plan's size. Said at its first download, or at its switch for an update that
    /// downloads nothing (a list of renames, a staged tree resumed).
    private func announceUpdates() -> Task<Void, Never> {
        Task { [manager, logger] in
            var announced = false
            for await event in await manager.events() {
                guard case .progress(let progress) = event else {
                    if case .stateChanged = event { continue }
                    announced = false
                    continue
                }
                switch progress.phase {
                case .downloadingArchive, .downloadingFiles, .extracting, .switching:
                    guard !announced else { continue }
                    announced = true
                    let from = (try? await manager.localVersion())?.description ?? "nothing"
                    logger.info(
                        "update started",
                        metadata: [
                            "from": "\(from)", "to": "\(progress.toVersion?.description ?? "unknown")",
                            "phase": "\(progress.phase)", "files": "\(progress.filesTotal)",
                            "bytes": "\(progress.bytesTotal.map(String.init) ?? "unknown")",
                        ])
                default:
                    continue
                }
            }
        }
    }
}
