import ContentSync
import Foundation
import Logging
import ProcessKit
import ServiceLifecycle
import Transport

/// The daemon: one ``StorageWatcher`` per configured storage, all fetching through one shared
/// transport, in one process. SIGHUP reloads the config file; SIGTERM (a graceful shutdown)
/// suspends running updates and ends. Runs as a swift-service-lifecycle `Service`.
public final class Agent: Service, Sendable {
    /// How the agent runs.
    public struct Options: Sendable {
        /// The storages and agent-wide settings to start with.
        public var configuration: AgentConfiguration
        /// Reads the configuration again on SIGHUP. Default nil: nothing to reload (flags only).
        public var reload: (@Sendable () throws(ConfigurationError) -> AgentConfiguration)?
        /// systemd's notification socket's sender (`READY=1`, `STATUS=…`, `WATCHDOG=1`,
        /// `STOPPING=1`). Default nil.
        public var notify: (@Sendable (String) -> Void)?
        /// How often to ping the watchdog. Default nil: never.
        public var watchdogInterval: Duration?
        /// Per-storage metrics. Default nil.
        public var metrics: AgentMetrics?
        /// Readiness for `/readyz`, and liveness for `/healthz` and the watchdog: with it, each
        /// storage's database is read every ``AgentHealth/beatInterval``, a stall is logged, and
        /// the watchdog is not pinged while one lasts. Default nil.
        public var health: AgentHealth?
        /// The shared transport's settings.
        public var transport = CurlTransport.Configuration()
        /// Where the agent logs (info and up; debug adds the library's lines).
        public var logger: Logger

        /// Options running `configuration`.
        public init(configuration: AgentConfiguration, logger: Logger) {
            self.configuration = configuration
            self.logger = logger
        }
    }

    /// Why the agent stopped: the failure of the storage that stopped it.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        /// The storage's stop.
        public var stopped: StorageWatcher.Stopped
        /// The stop's description.
        public var description: String { stopped.description }
    }

    let options: Options

    /// An agent with `options`.
    public init(options: Options) {
        self.options = options
    }

    /// Sends `WATCHDOG=1` every `interval` while no storage of `health` is stalled, until cancelled.
    static func feedWatchdog(
        _ notify: @Sendable (String) -> Void, every interval: Duration, unlessStalled health: AgentHealth?
    ) async {
        while !Task.isCancelled {
            if health?.stalledStorages().isEmpty ?? true { notify("WATCHDOG=1") }
            try? await Task.sleep(for: interval.clampedWait)
        }
    }

    /// Logs when a storage's database stops answering (an error, once) and when it answers
    /// again (info), until cancelled.
    static func reportStalls(_ health: AgentHealth, watchdog: Bool, to logger: Logger) async {
        var stalled: Set<String> = []
        while !Task.isCancelled {
            try? await Task.sleep(for: health.beatInterval)
            let now = Set(health.stalledStorages().map(\.storage))
            if !now.subtracting(stalled).isEmpty, let description = health.stallDescription() {
                logger.error(
                    "\(description)\(watchdog ? "; systemd's watchdog is not pinged while it lasts" : "")",
                    metadata: ["stalled": "\(now.sorted().joined(separator: ","))"])
            }
            for storage in stalled.subtracting(now).sorted() {
                logger.info("the state database answers again", metadata: ["storage": "\(storage)"])
            }
            stalled = now
        }
    }

    private enum Event: Sendable {
        case firstCheck(String, Int)
        case status(String, Int, String)
        case ended(String, Int, StorageWatcher.Stopped?)
        case reload
        case shutdown
    }

    private struct Running {
        let watcher: StorageWatcher
        let generation: Int
    }

    /// Runs every storage until a graceful shutdown, or until a storage's failure stops the agent
    /// (``Failure``): `max-failures` ran out, or every storage stopped on permanent errors.
    public func run() async throws {
        let logger = options.logger
        var transportConfiguration = options.transport
        if logger.logLevel <= .debug { transportConfiguration.logger = logger }
        let transport = try CurlTransport(configuration: transportConfiguration)
        let (events, continuation) = AsyncStream<Event>.makeStream()
        var configuration = options.configuration
        var running: [String: Running] = [:]
        /// Storages waiting to start until the running one they share a name, a dir or a state
        /// with has ended: a changed storage's new settings, or one a reload added or renamed
        /// while its predecessor finishes its check (each holds its state's watch lock).
        var replacements: [String: StorageSettings] = [:]
        var stopped: [String: StorageWatcher.Stopped] = [:]
        var awaitingFirstCheck = Set(configuration.storages.map(\.name))
        var statuses: [String: String] = [:]
        var generation = 0
        var shuttingDown = false
        var failure: StorageWatcher.Stopped?

        /// The running storage that `settings` must wait for: the same name, dir or state.
        func blocker(of settings: StorageSettings) -> String? {
            func same(_ one: String, _ other: String) -> Bool {
                (one as NSString).standardizingPath == (other as NSString).standardizingPath
            }
            return running.first { name, current in
                name == settings.name || same(current.watcher.settings.directory, settings.directory)
                    || same(current.watcher.settings.statePath, settings.statePath)
            }?.key
        }

        /// `continuing`: a reload's restart of a running storage, whose failures in a row count on.
        func start(_ settings: StorageSettings, continuing: Bool = false, in group: inout TaskGroup<Void>) {
            logger.info(
                "starting storage",
                metadata: [
                    "storage": "\(settings.name)", "dir": "\(settings.directory)",
                    "base-url": "\(Redaction.url(settings.baseURL))",
                    "interval": "\(DurationText.format(settings.interval))", "jitter": "\(settings.jitter)",
                    "headers": "\(settings.headers.map(\.description).joined(separator: ", "))",
                ])
            generation += 1
            let id = generation
            let watcher: StorageWatcher
            do {
                watcher = try StorageWatcher(
                    settings: settings, transport: transport, logger: logger,
                    metrics: options.metrics?.storage(named: settings.name), health: options.health)
            } catch {
                // As a watcher's own permanent failure: a clear line, and /readyz names the storage.
                var storageLogger = logger
                storageLogger[metadataKey: "storage"] = "\(settings.name)"
                StorageWatcher.logPermanentStop(error, to: storageLogger)
                options.health?.setReady(storage: settings.name, false)
                // Counted, so /metrics shows the storage and its failure (the alerts fire).
                options.metrics?.storage(named: settings.name).checkFailed(
                    code: "\(error.code)", consecutiveFailures: 1)
                continuation.yield(
                    .ended(
                        settings.name, id,
                        StorageWatcher.Stopped(
                            storage: settings.name, error: error, permanent: true,
                            consecutiveFailures: 1)))
                running[settings.name] = nil
                return
            }
            running[settings.name] = Running(watcher: watcher, generation: id)
            stopped[settings.name] = nil
            var callbacks = StorageWatcher.Callbacks()
            callbacks.firstCheckDone = { continuation.yield(.firstCheck(settings.name, id)) }
            callbacks.status = { continuation.yield(.status(settings.name, id, $0)) }
            group.addTask {
                do throws(StorageWatcher.Stopped) {
                    try await watcher.run(callbacks: callbacks, continuingFailures: continuing)
                    continuation.yield(.ended(settings.name, id, nil))
                } catch {
                    continuation.yield(.ended(settings.name, id, error))
                }
            }
        }

        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                for settings in configuration.storages {
                    start(settings, in: &group)
                }
                if let relay = SignalRelay.shared {
                    // Through the relay (a handler and a pipe): a Dispatch signal source can lose it.
                    let hangups = relay.arrivals(of: SIGHUP)
                    group.addTask {
                        for await _ in hangups { continuation.yield(.reload) }
                    }
                }
                if let notify = options.notify, let interval = options.watchdogInterval {
                    // Proves the process is alive, its scheduler runs and every storage's
                    // database answers; it pings beside the checks, so a long restore does not
                    // look like a hang, but not through a stall, so systemd restarts the agent.
                    group.addTask { [health = options.health] in
                        await Self.feedWatchdog(notify, every: interval, unlessStalled: health)
                    }
                }
                if let health = options.health {
                    group.addTask { [logger, watchdog = options.notify != nil && options.watchdogInterval != nil] in
                        await Self.reportStalls(health, watchdog: watchdog, to: logger)
                    }
                }
                for await event in events {
                    switch event {
                    case .firstCheck(let name, let id):
                        guard running[name]?.generation == id else { continue }
                        if awaitingFirstCheck.remove(name) != nil, awaitingFirstCheck.isEmpty {
                            // systemd's start completes once every storage has checked once.
                            options.notify?("READY=1")
                        }
                    case .status(let name, let id, let text):
                        guard running[name]?.generation == id else { continue }
                        statuses[name] = text
                        options.notify?("STATUS=" + Self.status(statuses, count: configuration.storages.count))
                    case .ended(let name, let id, let stop):
                        if let current = running[name] {
                            guard current.generation == id else { continue }
                            running[name] = nil
                            // A storage an error stopped keeps its series: its Failing and Stale
                            // alerts must still fire. So does one a reload replaces: its
                            // replacement counts on (they once restarted at 0, losing the update
                            // the replaced one had just made).
                            await current.watcher.shutdown(
                                keepingMetrics: stop?.permanent == true || replacements[name] != nil)
                        }
                        if let stop {
                            stopped[name] = stop
                            statuses[name] = "stopped: \(String(describing: stop.error).prefix(200))"
                            if !stop.permanent { failure = stop }
                            if failure == nil, running.isEmpty, replacements.isEmpty { failure = stop }
                            if awaitingFirstCheck.remove(name) != nil, awaitingFirstCheck.isEmpty {
                                options.notify?("READY=1")
                            }
                        }
                        if !shuttingDown, failure == nil {
                            for waiting in replacements.values.sorted(by: { $0.name < $1.name })
                            where blocker(of: waiting) == nil {
                                replacements[waiting.name] = nil
                                start(waiting, continuing: true, in: &group)
                            }
                        }
                        if failure != nil, !shuttingDown {
                            // max-failures ran out, or nothing runs any more: stop the rest, exit non-zero.
                            shuttingDown = true
                            for other in running.values { await other.watcher.suspend() }
                        }
                        if running.isEmpty && (shuttingDown || replacements.isEmpty) {
                            continuation.finish()
                        }
                    case .reload:
                        guard !shuttingDown else { continue }
                        guard let reload = options.reload else {
                            logger.notice(
                                "SIGHUP: the configuration comes from the command line only; nothing to reload, running on"
                            )
                            continue
                        }
                        let next: AgentConfiguration
                        do {
                            next = try reload()
                        } catch {
                            logger.error(
                                "SIGHUP: the config file has problems; running on with the previous configuration:\n\(error)"
                            )
                            options.notify?(
                                "STATUS=reload failed: "
                                    + LogText.escaped(String(String(describing: error).prefix(300))))
                            continue
                        }
                        let change = Self.difference(from: configuration, to: next)
                        if next.endpoint != configuration.endpoint || next.logFormat != configuration.logFormat {
                            logger.warning("SIGHUP: http and log-format changes take effect when the agent restarts")
                        }
                        for name in change.removed {
                            replacements[name] = nil
                            running[name]?.watcher.stop(stoppingHooks: false)
                            stopped[name] = nil
                            statuses[name] = nil
                            options.metrics?.storage(named: name).remove()
                            options.health?.remove(storage: name)
                        }
                        for settings in next.storages {
                            if change.changed.contains(settings.name), running[settings.name] != nil {
                                // The running check finishes first; the replacement starts when it ends.
                                replacements[settings.name] = settings
                                running[settings.name]?.watcher.stop(stoppingHooks: false)
                            } else if replacements[settings.name] != nil {
                                // Still waiting: it starts with its newest settings.
                                replacements[settings.name] = settings
                            } else if running[settings.name] == nil {
                                if let other = blocker(of: settings) {
                                    // Renamed, or given a removed storage's dir or state: it starts
                                    // when that one's running check has ended.
                                    logger.info(
                                        "storage waits for \(other) to stop: they share a dir or state",
                                        metadata: ["storage": "\(settings.name)"])
                                    replacements[settings.name] = settings
                                } else {
                                    // New, or stopped earlier: a reload is how an operator retries after a fix.
                                    start(settings, in: &group)
                                }
                            }
                        }
                        configuration.storages = next.storages
                        logger.notice(
                            "SIGHUP: reloaded \(next.path ?? "the configuration")",
                            metadata: [
                                "added": "\(change.added.joined(separator: ","))",
                                "removed": "\(change.removed.joined(separator: ","))",
                                "changed": "\(change.changed.joined(separator: ","))",
                                "unchanged": "\(change.unchanged.count)",
                            ])
                        if running.isEmpty, replacements.isEmpty { continuation.finish() }
                    case .shutdown:
                        shuttingDown = true
                        replacements = [:]
                        if running.isEmpty { continuation.finish() }
                        for current in running.values { await current.watcher.suspend() }
                    }
                }
                group.cancelAll()
            }
        } onGracefulShutdown: {
            continuation.yield(.shutdown)
        }
        await transport.shutdown()
        options.notify?("STOPPING=1")
        if let failure { throw Failure(stopped: failure) }
    }

    /// systemd's STATUS= line: the one storage's status, or each storage's, most recent first.
    /// One line: the notification is `KEY=value` lines, and an error quoting a storage's newline
    /// would otherwise send `READY=1` or `STOPPING=1` of its own.
    static func status(_ statuses: [String: String], count: Int) -> String {
        if count == 1, let only = statuses.values.first { return LogText.escaped(only) }
        return LogText.escaped(
            statuses.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: "; ").prefix(1000)
                .description)
    }

    /// What a reload changes, by storage name.
    struct Difference: Equatable {
        var added: [String] = []
        var removed: [String] = []
        var changed: [String] = []
        var unchanged: [String] = []
    }

    static func difference(from old: AgentConfiguration, to new: AgentConfiguration) -> Difference {
        var difference = Difference()
        let before = Dictionary(old.storages.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let after = Set(new.storages.map(\.name))
        for settings in new.storages {
            switch before[settings.name] {
            case nil: difference.added.append(settings.name)
            case settings?: difference.unchanged.append(settings.name)
            default: difference.changed.append(settings.name)
            }
        }
        difference.removed = old.storages.map(\.name).filter { !after.contains($0) }
        return difference
    }
}
