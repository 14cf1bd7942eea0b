import ArgumentParser
import ContentSync
import FileKit
import Foundation
import Logging
import StorageFormat
import SyncDaemon
import Transport

/// The options `sync` and `watch` share, and the configuration they make.
struct SyncOptions: ParsableArguments {
    @Option(name: .long, help: "The storage folder URL (the one holding RXCacheConfig/ and RXCacheContent/).")
    var baseURL: String?

    @Option(name: .long, help: "The local folder that mirrors the storage's content.")
    var dir: String?

    @Option(name: .long, help: "The state database (default: under $XDG_STATE_HOME/content-sync/, outside --dir).")
    var state: String?

    /// Text, read here: a value that is no number (`1e3`, past Int's range) exits 6 naming the
    /// option, as one out of range does, not ArgumentParser's usage error (64).
    @Option(name: .long, parsing: .unconditional, help: "Downloads at once, 1 to 64 (default 8).")
    var concurrency: String?

    @OptionGroup var request: StorageRequestOptions

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(
            "How often a sync lists the whole --dir and checks every file's identity (inode, size, modification time), repairing what differs, even when the storage has nothing new (default 24h; 0: every sync). Between, it trusts each folder's ctime; `verify` reads every byte, and so finds an edit that kept a file's size and time.",
            valueName: "DURATION"))
    var fullCheckInterval: String?

    @Flag(name: .long, help: "Replace a non-empty --dir that no state file knows about.")
    var force = false

    @Flag(name: .long, help: "Log what happens, to stderr.")
    var verbose = false

    /// Whether any storage flag was given (`watch --config` refuses them).
    var givesStorage: Bool {
        baseURL != nil || dir != nil || state != nil || request.givesAny
            || force || concurrency != nil || fullCheckInterval != nil
    }

    /// The storage the flags describe, named after its folder, or a one-line failure naming the bad option.
    func settings() throws -> StorageSettings {
        guard let baseURL else {
            throw CLIFailure(
                code: 6, message: "missing --base-url: give the storage folder's URL (or, for watch, --config FILE)")
        }
        guard let dir else {
            throw CLIFailure(code: 6, message: "missing --dir: give the local folder to keep in step")
        }
        guard let url = URL(string: baseURL) else {
            throw CLIFailure(
                code: 6,
                message:
                    "--base-url '\(Redaction.text(baseURL))' is not a URL: give the storage folder's, such as https://raw.githubusercontent.com/OWNER/REPO/BRANCH/"
            )
        }
        var settings = StorageSettings(name: "", baseURL: url, directory: dir, statePath: state)
        let name = (settings.directory as NSString).lastPathComponent
        settings.name = name.isEmpty ? "root" : name
        // The same range a config file's `concurrency` takes.
        let given = concurrency ?? "8"
        guard let count = Int(given.trimmingCharacters(in: .whitespaces)), (1...64).contains(count) else {
            throw CLIFailure(
                code: 6,
                message: "--concurrency '\(given)' is out of range: give a whole number of downloads at once, 1 to 64")
        }
        settings.concurrency = count
        if let fullCheckInterval {
            guard let value = DurationText.parse(fullCheckInterval, bareSeconds: true, allowingZero: true) else {
                throw CLIFailure(
                    code: 6,
                    message:
                        "--full-check-interval '\(fullCheckInterval)' is not a duration: give seconds or \(DurationText.help), or 0 for every update"
                )
            }
            settings.fullCheckInterval = value
        }
        settings.force = force
        settings.trustedKeys = try request.trustedKeys()
        settings.headers = try request.headers()
        return settings
    }

    /// A client configuration for `logger`, or a one-line failure naming the bad option.
    func configuration(logger: Logger?) throws -> SyncConfiguration {
        try settings().clientConfiguration(transport: nil, logger: logger)
    }

    /// A stderr logger at `level`, in `format` (by default journald's when stderr is the
    /// journal, text otherwise).
    static func stderrLogger(level: Logger.Level, format: LogFormat = .automatic()) -> Logger {
        var logger = Logger(label: "sync-agent", factory: { _ in AgentLogHandler(format: format) })
        logger.logLevel = level
        return logger
    }
}

/// What a command that talks to a storage sends with its requests and requires of its status:
/// the options `sync`, `watch` and `verify` share.
struct StorageRequestOptions: ParsableArguments {
    @Option(
        name: .long, parsing: .singleValue,
        help: "An extra request header, 'Name: value'. Repeatable. Not for secrets: see --header-env.")
    var header: [String] = []

    @Option(
        name: .long, parsing: .singleValue,
        help: ArgumentHelp(
            "A header whose value is the environment variable VARIABLE's, such as 'Authorization: GITHUB_AUTH' (a token stays off the command line and out of logs). Repeatable.",
            valueName: "Name: VARIABLE"))
    var headerEnv: [String] = []

    @Option(
        name: .long, parsing: .singleValue,
        help: "Require cacheStatus.json signed by this ed25519 public key file (from `sync-agent keygen`). Repeatable.")
    var trustKey: [String] = []

    /// Whether any of these options was given.
    var givesAny: Bool { !header.isEmpty || !headerEnv.isEmpty || !trustKey.isEmpty }

    /// The public keys of the --trust-key files, each checked now so that a wrong file is named.
    func trustedKeys() throws -> [String] {
        try trustKey.map(Self.trustedKey(at:))
    }

    /// The --header and --header-env headers, in that order, or a one-line failure naming the bad one.
    func headers() throws -> [StorageSettings.Header] {
        let split = { (flag: String, line: String, number: Int) throws -> (String, String) in
            guard let colon = line.firstIndex(of: ":") else {
                // A --header line is never quoted back: without its colon, all of it may be the secret.
                let shown =
                    flag == "--header-env" && StorageSettings.Header.isVariableName(line)
                    ? "'\(line)'" : "number \(number + 1)"
                throw CLIFailure(
                    code: 6,
                    message:
                        "\(flag) \(shown) has no ':': give it as '\(flag == "--header" ? "Name: value" : "Name: VARIABLE")'"
                )
            }
            return (
                String(line[..<colon]).trimmingCharacters(in: .whitespaces),
                String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
            )
        }
        let checked = { (flag: String, header: StorageSettings.Header) throws -> StorageSettings.Header in
            if let problem = StorageSettings.Header.problem(name: header.name, value: header.value) {
                throw CLIFailure(code: 6, message: "\(flag) \(header.name): \(problem)")
            }
            return header
        }
        var headers = try header.enumerated().map { number, line in
            let (name, value) = try split("--header", line, number)
            return try checked("--header", StorageSettings.Header(name: name, value: value, source: "--header"))
        }
        headers += try headerEnv.enumerated().map { number, line in
            let (name, variable) = try split("--header-env", line, number)
            guard StorageSettings.Header.isVariableName(variable) else {
                // Not quoted back: a value given by mistake where the name belongs is a secret.
                throw CLIFailure(
                    code: 6,
                    message: "--header-env \(name): what follows ':' must be the name of an environment variable "
                        + "(letters, digits and _), not the header's value; put the value in a variable and give its name"
                )
            }
            guard let value = ProcessInfo.processInfo.environment[variable], !value.isEmpty else {
                throw CLIFailure(
                    code: 6,
                    message: "--header-env '\(line)': the environment variable \(variable) is not set (or empty); "
                        + "export it, or under systemd set it in the unit's EnvironmentFile=")
            }
            return try checked(
                "--header-env", StorageSettings.Header(name: name, value: value, source: "env \(variable)"))
        }
        return headers
    }

    /// The public key in the file at `path`, checked now so that a wrong file is named with its flag.
    static func trustedKey(at path: String) throws -> String {
        do {
            return try TrustedKeyFile.read(path)
        } catch {
            throw CLIFailure(code: 6, message: "--trust-key \(error)")
        }
    }
}
