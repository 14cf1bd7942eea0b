import ArgumentParser
import ContentSync
import FileKit
import Foundation
import StorageFormat
import Logging
import ServiceLifecycle

/// `sync-agent watch`: the daemon. Checks every --interval until SIGTERM or SIGINT.
struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Keep --dir in step with the storage: check every --interval seconds until stopped.",
        discussion: """
            Runs as a service: SIGTERM or SIGINT suspends the running update (finished downloads are
            kept) and exits 0. A failed check is logged and retried sooner, backing off from 10 s up
            to --interval. Logs go to stderr at info level (--verbose: debug).
            """)

    @OptionGroup var options: SyncOptions

    @Option(name: .long, help: "Seconds between checks. An up-to-date check costs one conditional request.")
    var interval: Double = 300

    func run() async throws {
        guard interval >= 1 else { throw CLIFailure(code: 6, message: "--interval must be at least 1 second") }
        let logger = SyncOptions.stderrLogger(level: options.verbose ? .debug : .info)
        let configuration = try options.configuration(logger: options.verbose ? logger : nil)
        let manager: CacheManager
        do {
            manager = try CacheManager(configuration: configuration)
        } catch {
            throw CLIFailure(error)
        }
        let service = SyncService(manager: manager, interval: .milliseconds(Int64(interval * 1000)), logger: logger)
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
    let interval: Duration
    let logger: Logger

    func run() async throws {
        var retryDelay: Duration = .seconds(10)
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            var wait = interval
            do {
                let report = try await withGracefulShutdownHandler {
                    try await manager.checkForUpdates()
                } onGracefulShutdown: {
                    Task { await manager.suspend() }
                }
                logger.info("\(SyncCommand.summary(report))")
                retryDelay = .seconds(10)
            } catch {
                if Task.isShuttingDownGracefully { break }
                logger.error("check failed: \(error)")
                wait = min(retryDelay, interval)
                retryDelay = min(retryDelay * 2, interval)
            }
            // Sleeps until the next check; a graceful shutdown ends the sleep at once.
            let pause = wait
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
        }
        logger.info("stopped")
    }
}
