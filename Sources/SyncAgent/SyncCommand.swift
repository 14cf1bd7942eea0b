import ArgumentParser
import ContentSync
import Foundation
import Logging
import Transport

/// `sync-agent sync`: one update, then exit.
struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Bring --dir to the storage's actual version, once.",
        discussion: """
            Exits 0 when --dir holds the storage's actualCacheVersion. Otherwise exits non-zero with a
            one-line reason on stderr: 3 network, 4 the storage's files are invalid or unsafe,
            5 local filesystem or disk space, 6 configuration, 130 interrupted; 1 anything else.
            Interrupting (Ctrl-C) keeps finished downloads: the next run continues from there.
            """)

    @Option(name: .long, help: "The storage folder URL (the one holding RXCacheConfig/ and RXCacheContent/).")
    var baseURL: String

    @OptionGroup var folder: FolderOptions

    @Option(name: .long, help: "Downloads at once.")
    var concurrency: Int = 8

    @Option(name: .long, parsing: .singleValue, help: "An extra request header, 'Name: value' (e.g. an Authorization token). Repeatable.")
    var header: [String] = []

    @Flag(name: .long, help: "Replace a non-empty --dir that no state file knows about.")
    var force = false

    @Flag(name: .long, help: "Log what happens, to stderr.")
    var verbose = false

    func run() async throws {
        guard let url = URL(string: baseURL) else {
            throw CLIFailure(code: 6, message: "--base-url '\(baseURL)' is not a URL")
        }
        var configuration = SyncConfiguration(baseURL: url, contentDirectory: folder.contentDirectory, stateDatabasePath: folder.statePath)
        configuration.maxConcurrentDownloads = max(1, concurrency)
        configuration.allowReplacingUnknownContent = force
        if verbose {
            var logger = Logger(label: "sync-agent", factory: { label in StreamLogHandler.standardError(label: label) })
            logger.logLevel = .debug
            configuration.logger = logger
        }
        let headers = try parseHeaders()
        if !headers.isEmpty {
            configuration.requestAdapter = ClosureRequestAdapter { request in
                for (name, value) in headers { request.headers[name] = value }
            }
        }
        let manager: CacheManager
        do {
            manager = try CacheManager(configuration: configuration)
        } catch {
            throw CLIFailure(error)
        }
        let interactive = isatty(STDERR_FILENO) == 1
        let bar = ProgressBar()
        let events = await manager.events()
        let watcher = Task {
            for await event in events {
                if case .progress(let progress) = event, interactive { bar.update(progress) }
            }
        }
        let interrupt = InterruptHandler { Task { await manager.suspend() } }
        defer {
            interrupt.cancel()
            watcher.cancel()
        }
        do {
            let report = try await manager.checkForUpdates()
            bar.finish()
            if interactive || verbose {
                print(Self.summary(report))
            }
        } catch {
            bar.finish()
            if interrupt.fired {
                throw CLIFailure(code: 130, message: "interrupted; finished downloads are kept and the next run continues")
            }
            throw CLIFailure(error)
        }
    }

    private func parseHeaders() throws -> [(String, String)] {
        try header.map { line in
            guard let colon = line.firstIndex(of: ":") else {
                throw CLIFailure(code: 6, message: "--header '\(line)' is not 'Name: value'")
            }
            return (String(line[..<colon]).trimmingCharacters(in: .whitespaces),
                    String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces))
        }
    }

    static func summary(_ report: SyncReport) -> String {
        switch report.outcome {
        case .upToDate:
            return "up to date at \(report.toVersion)"
        case .restored:
            return "restored \(report.toVersion) from the archive (\(report.filesDownloaded) files, \(ProgressBar.bytes(report.bytesDownloaded)) downloaded)"
        case .replayed:
            var line = "updated \(report.fromVersion.map { "\($0)" } ?? "?") → \(report.toVersion): \(report.changeListsApplied) change list(s), "
                + "\(report.filesDownloaded) file(s) downloaded (\(ProgressBar.bytes(report.bytesDownloaded))), \(report.filesReused) kept"
            if report.filesAlreadyDownloaded > 0 { line += ", \(report.filesAlreadyDownloaded) already downloaded earlier" }
            if !report.warnings.isEmpty { line += ", \(report.warnings.count) warning(s)" }
            return line
        }
    }
}
