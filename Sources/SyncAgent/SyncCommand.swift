import ArgumentParser
import ContentSync
import FileKit
import Foundation
import StorageFormat
import SyncDaemon

/// `sync-agent sync`: one update, then exit.
struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Bring --dir to the storage's actual version, once.",
        discussion: """
            Exits 0 when --dir holds the storage's actualCacheVersion. Otherwise exits non-zero with a \
            one-line reason on stderr: 3 network, 4 the storage's files are invalid or unsafe, \
            5 local filesystem or disk space, 6 configuration, 130 interrupted; 1 anything else. \
            Interrupting (Ctrl-C) keeps finished downloads: the next run continues from there. \
            On success it prints a one-line summary (--quiet: nothing), and each warning \
            (files repaired, a change list's tolerated mistake, a recovered interruption) on stderr \
            as 'warning: …', --quiet or not; on a terminal a progress bar \
            shows the phase, bytes, rate and time left while it works. --verbose logs each phase as it \
            ends and, on success, prints where the time went on stderr \
            (phases: local check 0.001 s, status 0.004 s, plan 0.120 s, …).
            """)

    @OptionGroup var options: SyncOptions

    @Flag(name: .long, help: "Print nothing on success (by default a one-line summary goes to stdout).")
    var quiet = false

    /// A missing --dir does not parse (exit 64, usage follows), as the README's exit codes say.
    func validate() throws {
        if options.dir == nil { throw ValidationError("missing --dir: give the local folder to keep in step") }
    }

    func run() async throws {
        let configuration = try options.configuration(
            logger: options.verbose ? SyncOptions.stderrLogger(level: .debug) : nil)
        let manager: CacheManager
        do {
            // Not over a folder a watcher keeps with another state database.
            try FolderKeeper.refuseIfKeptByAnother(
                directory: configuration.contentDirectory, statePath: configuration.stateDatabasePath)
            manager = try CacheManager(configuration: configuration)
        } catch {
            throw CLIFailure(error)
        }
        let interactive = isatty(STDERR_FILENO) == 1
        let bar = ProgressBar()
        // Subscribe only when a bar is drawn: an unread stream still costs a wake-up per event.
        let events: AsyncStream<CacheManagerEvent>? = interactive ? await manager.events() : nil
        let watcher = Task {
            guard let events else { return }
            for await event in events {
                if case .progress(let progress) = event { bar.update(progress) }
            }
        }
        let interrupt = InterruptHandler { Task { await manager.suspend() } }
        defer {
            interrupt.cancel()
            watcher.cancel()
        }
        let report: SyncReport
        do {
            report = try await manager.checkForUpdates()
            bar.finish()
        } catch {
            bar.finish()
            if interrupt.fired {
                throw CLIFailure(
                    code: 130, message: "interrupted; finished downloads are kept and the next run continues")
            }
            throw CLIFailure(error)
        }
        // Through `output`: a summary that could not be written fails (exit 5), as `status` does
        // (after the warnings and timings, which go to stderr all the same).
        let unwritten = Result { if !quiet { try Console.output(Self.summary(report) + "\n") } }
        for warning in report.warnings {
            Console.standardError("warning: \(warning)\n")
        }
        if options.verbose {
            Console.standardError(ReportText.phases(report) + "\n")
        }
        try unwritten.get()
    }

    static func summary(_ report: SyncReport) -> String { ReportText.summary(report) }
}
