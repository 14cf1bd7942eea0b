import ArgumentParser
import ContentSync
internal import DateText
import FileKit
import Foundation
import Logging
import ServiceLifecycle
import StorageFormat
import SyncDaemon
import Transport

/// `sync-agent watch`: the daemon. Checks every storage until SIGTERM or SIGINT.
struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Keep folders in step with storages: check each every --interval until stopped.",
        discussion: """
            One storage from the flags, or several from a YAML file (--config FILE; see `sync-agent \
            check-config --help` for its keys), all in one process sharing one HTTP transport. Runs as \
            a service: SIGTERM or SIGINT suspends running updates (finished downloads are kept) and \
            exits 0; SIGHUP reloads --config, letting running updates finish first. Each pause is \
            jittered (--jitter) so a fleet does not poll in step. A failed check is logged and \
            retried sooner, backing off from 10 s, doubling, up to --max-backoff, also jittered. An \
            error that retrying cannot fix (a bad configuration, an unknown non-empty folder, a \
            refused trust downgrade) stops that storage at once (and the agent, when none is left, \
            with its exit code), and --max-failures N stops the agent after N failures in a row, so \
            systemd's Restart= and alerting see them. Logs go to stderr at info level (--verbose: \
            debug).
            """)

    @OptionGroup var options: SyncOptions

    @Option(
        name: .long,
        help: ArgumentHelp(
            "A YAML file listing the storages to watch, instead of the storage flags.", valueName: "FILE"))
    var config: String?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(
            "Seconds (or 90s, 5m, 1h) between checks (default 5m). An up-to-date check costs one conditional request.",
            valueName: "DURATION"))
    var interval: String?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(
            "Scale each pause by a random factor in 1 ± this fraction (0 to 0.9; default 0.1).", valueName: "FRACTION"))
    var jitter: String?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(
            "Delay the first check by a random part of this (default 0: at once).", valueName: "DURATION"))
    var splay: String?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp("The longest pause after failed checks (default: --interval).", valueName: "DURATION"))
    var maxBackoff: String?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(
            "Exit with the failure's code after this many failed checks in a row (0: never).", valueName: "N"))
    var maxFailures: Int?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Serve /metrics, /healthz and /readyz here (127.0.0.1:9464, or :9464 for loopback). Default: off.",
            valueName: "ADDRESS"))
    var http: String?

    @Option(
        name: .long,
        help: ArgumentHelp(
            "text, journald (a <N> priority prefix; the default when stderr is the journal) or json (one object a line).",
            valueName: "FORMAT"))
    var logFormat: String?

    /// Without --config, a missing --dir does not parse (exit 64, usage follows), as for `sync`.
    func validate() throws {
        if config == nil, options.dir == nil {
            throw ValidationError("missing --dir: give the local folder to keep in step, or --config FILE")
        }
    }

    func run() async throws {
        let configuration = try agentConfiguration()
        try SyncAgent.ensureTasks(storages: configuration.storages.count)
        let format: LogFormat
        if let name = logFormat ?? configuration.logFormat {
            guard let chosen = LogFormat(rawValue: name) else {
                throw CLIFailure(code: 6, message: "--log-format \(name): use text, journald or json")
            }
            format = chosen
        } else {
            format = .automatic()
        }
        let logger = SyncOptions.stderrLogger(level: options.verbose ? .debug : .info, format: format)
        // The last line (the failure `watch` exits with) in the same format; text stays the plain line.
        if format != .text { CLIFailure.fatalLogger.withLock { $0 = logger } }
        var agentOptions = Agent.Options(configuration: configuration, logger: logger)
        if let path = configuration.path {
            agentOptions.reload = { () throws(ConfigurationError) in
                let next = try AgentConfiguration.load(path: path)
                // More storages than the task limit leaves threads for would hang the agent.
                if let shortage = try? SyncAgent.taskShortage(storages: next.storages.count) {
                    throw ConfigurationError(path: path, problems: [ConfigurationProblem(line: nil, message: shortage)])
                }
                return next
            }
        }
        let notifier = SystemdNotifier.fromEnvironment()
        if let notifier {
            agentOptions.notify = { @Sendable message in notifier.send(message) }
        }
        agentOptions.watchdogInterval = SystemdNotifier.watchdogInterval()
        // Always: a stall is logged, and keeps the watchdog from being pinged, without --http too.
        let health = AgentHealth(
            stallLimit: try Self.stallLimit(setting: ProcessInfo.processInfo.environment[Self.stallLimitVariable]).get()
        )
        agentOptions.health = health
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let address = configuration.endpoint {
            let metrics = AgentMetrics()
            agentOptions.metrics = metrics
            let parsed: AgentEndpoint.Address
            do {
                parsed = try AgentEndpoint.Address(parsing: address)
            } catch {
                // The message alone: the code's name (`invalidAddress`) is no help to an operator.
                throw CLIFailure(code: 6, message: "--http: \(error.message)")
            }
            let endpoint = AgentEndpoint(address: parsed, metrics: metrics, health: health, logger: logger)
            // A port in use is a configuration problem, found before any storage starts.
            do {
                try endpoint.checkCanListen()
            } catch {
                throw CLIFailure(code: 6, message: "--http \(address): \(error.message)")
            }
            metrics.bootstrapMetricsSystem()
            services.append(.init(service: endpoint, failureTerminationBehavior: .gracefullyShutdownGroup))
        }
        var metadata: Logger.Metadata = [
            "version": "\(SyncAgent.version)",
            "storages": "\(configuration.storages.map(\.name).joined(separator: ","))",
            "config": "\(configuration.path ?? "flags")", "http": "\(configuration.endpoint ?? "off")",
        ]
        if configuration.storages.count == 1, let only = configuration.storages.first {
            metadata["dir"] = "\(only.directory)"
            metadata["base-url"] = "\(Redaction.url(only.baseURL))"
        }
        logger.info("starting", metadata: metadata)
        // Last, so that a graceful shutdown (last to first) stops the storages while /metrics still serves.
        services.append(
            .init(
                service: Agent(options: agentOptions), successTerminationBehavior: .gracefullyShutdownGroup,
                failureTerminationBehavior: .gracefullyShutdownGroup))
        // SIGTERM and SIGINT through the relay, not the group's Dispatch signal sources (see
        // `InterruptHandler`); a signal before `run()` still shuts the group down once it runs.
        let group = ServiceGroup(configuration: .init(services: services, logger: logger))
        let interrupt = InterruptHandler { Task { await group.triggerGracefulShutdown() } }
        defer { interrupt.cancel() }
        do {
            try await group.run()
        } catch let failure as Agent.Failure {
            throw CLIFailure(failure.stopped.error)
        } catch let error as AgentEndpointError {
            // Taken between the check and the start, or failing later: still one line.
            throw CLIFailure(code: error.code == .listenFailed ? 6 : 1, message: "--http: \(error.message)")
        } catch let error as TransportError {
            // The transport could not start (no thread at a task limit, an option libcurl
            // refused): exit 6, as `sync` does, not the parser's "Error:" and 1.
            throw CLIFailure(code: 6, message: error.message)
        }
    }

    /// The storages to run: the config file's, or the one the flags describe.
    func agentConfiguration() throws -> AgentConfiguration {
        if let config {
            let refused = [
                options.givesStorage
                    ? "--base-url/--dir/--state/--header/--header-env/--trust-key/--force/--concurrency/--full-check-interval"
                    : nil,
                interval.map { _ in "--interval" }, jitter.map { _ in "--jitter" }, splay.map { _ in "--splay" },
                maxBackoff.map { _ in "--max-backoff" }, maxFailures.map { _ in "--max-failures" },
            ].compactMap { $0 }
            guard refused.isEmpty else {
                throw CLIFailure(
                    code: 6,
                    message:
                        "--config \(config) describes the storages; \(refused.joined(separator: ", ")) belong in the file "
                        + "(under the storage, or under defaults:)")
            }
            var loaded: AgentConfiguration
            do {
                loaded = try AgentConfiguration.load(path: config)
            } catch {
                throw error.printedProblems()
            }
            if let http { loaded.endpoint = http }
            return loaded
        }
        var settings = try options.settings()
        if let interval {
            guard let value = DurationText.parse(interval, bareSeconds: true) else {
                throw CLIFailure(
                    code: 6, message: "--interval '\(interval)' is not a duration: give seconds or \(DurationText.help)"
                )
            }
            settings.interval = value
        }
        guard settings.interval >= .seconds(1) else {
            throw CLIFailure(code: 6, message: "--interval must be at least 1 second")
        }
        if let jitter {
            guard let fraction = DecimalText.parse(jitter), fraction <= 0.9 else {
                throw CLIFailure(
                    code: 6, message: "--jitter '\(jitter)' must be a number between 0 and 0.9, such as 0.1 for ±10%")
            }
            settings.jitter = fraction
        }
        if let splay {
            guard let value = DurationText.parse(splay, bareSeconds: true, allowingZero: true) else {
                throw CLIFailure(
                    code: 6, message: "--splay '\(splay)' is not a duration: give seconds or \(DurationText.help)")
            }
            settings.splay = value
        }
        if let maxBackoff {
            guard let value = DurationText.parse(maxBackoff, bareSeconds: true) else {
                throw CLIFailure(
                    code: 6,
                    message: "--max-backoff '\(maxBackoff)' is not a duration: give seconds or \(DurationText.help)")
            }
            guard value >= .seconds(1) else {
                throw CLIFailure(code: 6, message: "--max-backoff '\(maxBackoff)' must be at least 1 second")
            }
            settings.maxBackoff = value
        }
        if let maxFailures {
            guard maxFailures >= 0 else {
                throw CLIFailure(code: 6, message: "--max-failures must be 0 (never) or more")
            }
            settings.maxFailures = maxFailures
        }
        return AgentConfiguration(storages: [settings], endpoint: http)
    }
}

extension WatchCommand {
    /// Sets how long a storage's state database may go without answering before `/healthz`
    /// says 503 and the watchdog is no longer pinged (``AgentHealth/stallLimit``).
    static let stallLimitVariable = "SYNC_AGENT_STALL_LIMIT"

    /// The stall limit given the variable's value: ``AgentHealth/defaultStallLimit`` when unset;
    /// a duration of 1 s to 1 d (`90s`, `5m`, or seconds); anything else is exit 6 naming it.
    static func stallLimit(setting: String?) -> Result<Duration, CLIFailure> {
        guard let setting else { return .success(AgentHealth.defaultStallLimit) }
        guard let limit = DurationText.parse(setting, bareSeconds: true), limit <= .seconds(86_400) else {
            return .failure(
                CLIFailure(
                    code: 6,
                    message:
                        "\(stallLimitVariable)=\(String(setting.prefix(40)).debugDescription) is not a duration from 1s to 1d; "
                        + "give seconds or a whole number with s, m, h or d (90s, 5m, 1d), "
                        + "such as \(DurationText.format(AgentHealth.defaultStallLimit)), or unset it"))
        }
        return .success(limit)
    }
}
