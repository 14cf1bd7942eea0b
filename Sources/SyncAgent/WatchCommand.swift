import ArgumentParser
import ContentSync
import FileKit
import Foundation
import SyncDaemon
import StorageFormat
import Logging
import ServiceLifecycle
import UnixSignals

/// `sync-agent watch`: the daemon. Checks every --interval until SIGTERM or SIGINT.
struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Keep --dir in step with the storage: check every --interval seconds until stopped.",
        discussion: """
            Runs as a service: SIGTERM or SIGINT suspends the running update (finished downloads are \
            kept) and exits 0. Each pause is jittered (--jitter) so a fleet does not poll in step. A \
            failed check is logged and retried sooner, backing off from 10 s, doubling, up to \
            --max-backoff, also jittered. An error that retrying cannot fix (a bad configuration, an \
            unknown non-empty --dir, a refused trust downgrade) stops the agent at once with its exit \
            code, and --max-failures N stops it after N failures in a row, so systemd's Restart= and \
            alerting see them. Logs go to stderr at info level (--verbose: debug).
            """)

    @OptionGroup var options: SyncOptions

    @Option(name: .long, help: "Seconds between checks. An up-to-date check costs one conditional request.")
    var interval: Double = 300

    @Option(name: .long, help: ArgumentHelp("Scale each pause by a random factor in 1 ± this fraction (0 to 0.9).", valueName: "FRACTION"))
    var jitter: Double = 0.1

    @Option(name: .long, help: ArgumentHelp("The longest pause after failed checks (default: --interval).", valueName: "SECONDS"))
    var maxBackoff: Double?

    @Option(name: .long, help: ArgumentHelp("Exit with the failure's code after this many failed checks in a row (0: never).", valueName: "N"))
    var maxFailures = 0

    @Option(name: .long, help: ArgumentHelp("text, journald (a <N> priority prefix; the default when stderr is the journal) or json (one object a line).",
                                            valueName: "FORMAT"))
    var logFormat: String?

    func run() async throws {
        guard interval >= 1 else { throw CLIFailure(code: 6, message: "--interval must be at least 1 second") }
        guard (0...0.9).contains(jitter) else { throw CLIFailure(code: 6, message: "--jitter must be between 0 and 0.9, such as 0.1 for ±10%") }
        if let maxBackoff, maxBackoff < 1 { throw CLIFailure(code: 6, message: "--max-backoff must be at least 1 second") }
        guard maxFailures >= 0 else { throw CLIFailure(code: 6, message: "--max-failures must be 0 (never) or more") }
        let format: LogFormat
        if let logFormat {
            guard let chosen = LogFormat(rawValue: logFormat) else {
                throw CLIFailure(code: 6, message: "--log-format \(logFormat): use text, journald or json")
            }
            format = chosen
        } else {
            format = .automatic()
        }
        let logger = SyncOptions.stderrLogger(level: options.verbose ? .debug : .info, format: format)
        let configuration = try options.configuration(logger: options.verbose ? logger : nil)
        let manager: CacheManager
        do {
            manager = try CacheManager(configuration: configuration)
        } catch {
            throw CLIFailure(error)
        }
        let schedule = PollSchedule(interval: .milliseconds(Int64(interval * 1000)), jitter: jitter,
                                    maxBackoff: maxBackoff.map { .milliseconds(Int64($0 * 1000)) })
        let service = SyncService(manager: manager, schedule: schedule, maxFailures: maxFailures, logger: logger,
                                  notifier: SystemdNotifier.fromEnvironment(), watchdogInterval: SystemdNotifier.watchdogInterval())
        logger.info("starting", metadata: ["dir": "\(configuration.contentDirectory)", "storage": "\(configuration.baseURL.absoluteString)",
                                           "interval": "\(interval)s", "jitter": "\(jitter)", "version": "\(SyncAgent.version)"])
        let group = ServiceGroup(configuration: .init(
            services: [.init(service: service, successTerminationBehavior: .gracefullyShutdownGroup)],
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
        try await group.run()
    }
}

/// Periodic checks as a swift-service-lifecycle `Service`.
struct SyncService: Service {
    let manager: CacheManager
    let schedule: PollSchedule
    /// Stop after this many failures in a row (0: never).
    let maxFailures: Int
    let logger: Logger
    /// systemd's notification socket (`Type=notify`), when there is one.
    var notifier: SystemdNotifier? = nil
    /// How often to ping systemd's watchdog, when it is on.
    var watchdogInterval: Duration? = nil

    func run() async throws {
        var schedule = schedule
        var ready = false
        // The watchdog proves the process is alive and its scheduler runs; it pings beside the
        // checks, so a long restore does not look like a hang.
        let watchdog = notifier.flatMap { notifier in
            watchdogInterval.map { interval in
                Task {
                    while !Task.isCancelled {
                        notifier.send("WATCHDOG=1")
                        try? await Task.sleep(for: interval)
                    }
                }
            }
        }
        // An info line when an update starts downloading (a first restore can take long, and
        // was silent): where from, and the plan's size.
        let updates = Task { [manager, logger] in
            var announced = false
            for await event in await manager.events() {
                guard case .progress(let progress) = event else {
                    if case .stateChanged = event { continue }
                    announced = false
                    continue
                }
                switch progress.phase {
                case .downloadingArchive, .downloadingFiles, .extracting:
                    guard !announced else { continue }
                    announced = true
                    let from = (try? await manager.localVersion())?.description ?? "nothing"
                    logger.info("update started", metadata: ["from": "\(from)", "phase": "\(progress.phase)", "files": "\(progress.filesTotal)",
                                                            "bytes": "\(progress.bytesTotal.map(String.init) ?? "unknown")"])
                default:
                    continue
                }
            }
        }
        // SIGHUP reloads the configuration: with flags only there is nothing to re-read, and
        // the agent goes on (it used to die with exit 129).
        let hangups = Task { [logger] in
            for await _ in await UnixSignalsSequence(trapping: .sighup) {
                logger.notice("SIGHUP: the configuration comes from the command line only; nothing to reload, running on")
            }
        }
        defer {
            hangups.cancel()
            updates.cancel()
            watchdog?.cancel()
            notifier?.send("STOPPING=1")
        }
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            let wait: Duration
            do {
                let report = try await withGracefulShutdownHandler {
                    try await manager.checkForUpdates()
                } onGracefulShutdown: {
                    Task { await manager.suspend() }
                }
                logger.info("\(SyncCommand.summary(report))")
                wait = schedule.afterSuccess(random: Double.random(in: 0..<1))
                notifier?.send("STATUS=\(SyncCommand.summary(report)); next check in \(Self.seconds(wait))")
            } catch {
                if Task.isShuttingDownGracefully { break }
                if PollSchedule.isPermanent(error) {
                    logger.critical("stopping: retrying cannot fix this: \(error)")
                    throw CLIFailure(error)
                }
                wait = schedule.afterFailure(random: Double.random(in: 0..<1))
                if maxFailures > 0, schedule.consecutiveFailures >= maxFailures {
                    logger.critical("stopping after \(schedule.consecutiveFailures) failed check\(schedule.consecutiveFailures == 1 ? "" : "s") in a row: \(error)")
                    throw CLIFailure(error)
                }
                logger.error("check failed (\(schedule.consecutiveFailures) in a row; next in \(Self.seconds(wait))): \(error)")
                notifier?.send("STATUS=check failed (\(schedule.consecutiveFailures) in a row), next in \(Self.seconds(wait)): \(String(describing: error).prefix(200))")
            }
            // systemd's start completes with the first check, whatever its outcome.
            if !ready {
                ready = true
                notifier?.send("READY=1")
            }
            // Sleeps until the next check; a graceful shutdown ends the sleep at once.
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: wait) }
        }
        logger.info("stopped")
    }

    /// "12.3 s".
    static func seconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return String(format: "%.1f s", Double(seconds) + Double(attoseconds) / 1e18)
    }
}
