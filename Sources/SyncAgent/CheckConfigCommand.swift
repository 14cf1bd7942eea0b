import ArgumentParser
import Foundation
import SyncDaemon
import Transport

extension ConfigurationError {
    /// Prints every problem on its own line of stderr (`FILE:LINE:COLUMN: message`, redacted and
    /// escaped as a ``CLIFailure`` line is) and returns the failure that ends the command: exit 6
    /// with their count.
    func printedProblems() -> CLIFailure {
        for line in description.split(separator: "\n", omittingEmptySubsequences: false) {
            Console.standardError(LogText.escaped(Redaction.text(String(line))) + "\n")
        }
        return CLIFailure(code: 6, message: "\(count) problem\(count == 1 ? "" : "s") in \(path)")
    }
}

/// `sync-agent check-config FILE`: validates a `watch --config` file without running it.
struct CheckConfigCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-config",
        abstract: "Validate a watch --config file: print what it runs, or each problem with its line (exit 6).",
        discussion: """
            The file is YAML. Top-level keys: storages (required: a mapping of storage names to their \
            settings), defaults (settings every storage inherits), http (the /metrics, /healthz and \
            /readyz address, off when absent) and log-format (text, journald or json). A storage \
            takes base-url and dir (required), state, interval, jitter, splay, max-backoff, \
            max-failures, concurrency, force, headers, trust-key and hooks. A header's value is a \
            string, or {env: VARIABLE} or {file: PATH} for a secret, with an optional prefix (such as \
            "token "); secrets are read when the file is loaded and never printed. hooks has \
            pre-switch and post-update lists of {command: [/path/to/program, arg, …], timeout: 60s}. \
            Keys may be written with - or _ (base-url, base_url), storages may also be a list of \
            mappings that each carry name:, and JSON, being YAML, works too. Relative paths are taken \
            from the file's folder. Secrets and hook programs are checked \
            here as the agent would (run it as the service's user, with its environment). \
            docs/operations.md has the full reference.
            """)

    @Argument(help: ArgumentHelp("The config file.", valueName: "FILE"))
    var file: String

    func run() throws {
        guard !file.isEmpty else {
            throw CLIFailure(code: 6, message: "the config file's path is empty; give the path of the file to check")
        }
        let configuration: AgentConfiguration
        do {
            configuration = try AgentConfiguration.load(path: file)
        } catch {
            throw error.printedProblems()
        }
        // Through `output`: a verdict that could not be written fails (exit 5), as `status` does.
        try Console.output(
            "\(file): OK, \(configuration.storages.count) storage\(configuration.storages.count == 1 ? "" : "s")"
                + (configuration.endpoint.map { "; http on \($0)" } ?? "; http off") + "\n")
        for storage in configuration.storages {
            var line =
                "  \(storage.name): \(Redaction.url(storage.baseURL)) → \(storage.directory) (state \(storage.statePath)); "
                + "every \(DurationText.format(storage.interval)) ±\(Int((storage.jitter * 100).rounded()))%"
            if storage.splay > .zero { line += ", splay \(DurationText.format(storage.splay))" }
            if storage.maxFailures > 0 { line += ", stop after \(storage.maxFailures) failures" }
            if !storage.headers.isEmpty {
                line += "; headers \(storage.headers.map(\.description).joined(separator: ", "))"
            }
            if !storage.trustedKeys.isEmpty { line += "; \(storage.trustedKeys.count) trusted key(s)" }
            let hooks = storage.preSwitchHooks.count + storage.postUpdateHooks.count
            if hooks > 0 {
                line +=
                    "; hooks: \(storage.preSwitchHooks.count) pre-switch, \(storage.postUpdateHooks.count) post-update"
            }
            try Console.output(line + "\n")
        }
    }
}
