import ContentSync
import FileKit
import Foundation
import Logging
import Transport

/// What `sync-agent watch` runs: one or more storages, and the agent-wide settings. Made from a
/// config file by ``AgentConfiguration/load(path:environment:)`` or from the command line's flags.
public struct AgentConfiguration: Sendable, Equatable {
    /// The storages, in the file's order. Names are unique.
    public var storages: [StorageSettings]
    /// Where `/metrics`, `/healthz` and `/readyz` are served, as written (`127.0.0.1:9464`,
    /// `:9464`). Default nil: no endpoint.
    public var endpoint: String?
    /// `text`, `journald` or `json`, when the file sets it. Default nil: the command line's, or
    /// journald's when stderr is the journal.
    public var logFormat: String?
    /// The file it came from, if any: reloads read it again.
    public var path: String?

    /// A configuration of `storages`.
    public init(storages: [StorageSettings], endpoint: String? = nil, logFormat: String? = nil, path: String? = nil) {
        self.storages = storages
        self.endpoint = endpoint
        self.logFormat = logFormat
        self.path = path
    }
}

/// One storage the agent keeps a folder in step with.
public struct StorageSettings: Sendable, Equatable {
    /// Names the storage in logs, metrics and hooks: letters, digits, `.`, `_` and `-`.
    public var name: String
    /// The storage folder's URL (the one holding `RXCacheConfig/`).
    public var baseURL: URL
    /// The local folder (absolute).
    public var directory: String
    /// The state database (absolute). Default: ``SyncConfiguration/defaultStatePath(for:)``.
    public var statePath: String
    /// The pause between checks. Default 5 minutes.
    public var interval: Duration = .seconds(300)
    /// Each pause is scaled by a random factor in 1 ± this. Default 0.1.
    public var jitter = 0.1
    /// The first check waits a random part of this. Default 0 (at once).
    public var splay: Duration = .zero
    /// The longest pause after failed checks. Default nil: ``interval``.
    public var maxBackoff: Duration?
    /// Stop the agent after this many failed checks in a row. Default 0: never.
    public var maxFailures = 0
    /// Downloads at once. Default 8.
    public var concurrency = 8
    /// How often a replay lists the whole folder and checks every file
    /// (``SyncConfiguration/fullCheckInterval``). Default 24 hours; zero: every replay.
    public var fullCheckInterval: Duration = .seconds(86_400)
    /// Replace a non-empty folder no state database knows. Default false.
    public var force = false
    /// Request headers, secrets resolved.
    public var headers: [Header] = []
    /// Ed25519 public keys (base64) the status must be signed by, read from their files.
    public var trustedKeys: [String] = []
    /// Run before the switch; a failure vetoes it.
    public var preSwitchHooks: [Hook] = []
    /// Run after an update that changed the version.
    public var postUpdateHooks: [Hook] = []

    /// Settings for `name`, mirroring `baseURL` into `directory`.
    public init(name: String, baseURL: URL, directory: String, statePath: String? = nil) {
        self.name = name
        self.baseURL = baseURL
        self.directory = FileSystem.absolutePath(directory)
        self.statePath =
            statePath.map(FileSystem.absolutePath) ?? SyncConfiguration.defaultStatePath(for: self.directory)
    }

    /// The poll schedule these settings ask for.
    public var schedule: PollSchedule {
        var schedule = PollSchedule(interval: interval, jitter: jitter, maxBackoff: maxBackoff)
        schedule.splay = splay
        return schedule
    }

    /// The client configuration these settings ask for, fetching through `transport` (nil: the
    /// manager's own), logging the library's debug lines to `logger` when given, and the
    /// pre-switch hooks' lines to `hookLogger`.
    public func clientConfiguration(transport: (any Transport)?, logger: Logger?, hookLogger: Logger? = nil)
        -> SyncConfiguration
    {
        // Whatever echoes them back (an origin's redirect, an error page) is masked in every
        // message, log line and stored error from now on.
        Redaction.registerSecrets(secrets)
        var configuration = SyncConfiguration(
            baseURL: baseURL, contentDirectory: directory, stateDatabasePath: statePath)
        configuration.transport = transport
        configuration.maxConcurrentDownloads = concurrency
        configuration.fullCheckInterval = fullCheckInterval
        configuration.allowReplacingUnknownContent = force
        configuration.trustedSigningKeys = trustedKeys
        if let logger { configuration.logger = logger }
        let headers = headers
        if !headers.isEmpty {
            // Only to the storage's own origin: the status may name the archive or the update
            // list on another host, which must not get the storage's token.
            let origin = baseURL.httpOrigin
            configuration.requestAdapter = ClosureRequestAdapter { request in
                guard request.url.httpOrigin == origin else { return }
                for header in headers { request.headers[header.name] = header.value }
            }
        }
        if !preSwitchHooks.isEmpty {
            configuration.beforeSwitch = HookRunner.beforeSwitch(
                preSwitchHooks, storage: name, directory: directory,
                logger: hookLogger ?? logger ?? Logger(label: "sync-agent.hooks"), runner: hookRunner)
        }
        return configuration
    }

    /// The runner of this storage's hooks: their output never shows a header's value, nor the
    /// password (or token) of the base URL's user info.
    public var hookRunner: HookRunner {
        HookRunner(secrets: secrets)
    }

    /// The header values and URL passwords of this storage, longest first (a whole value is
    /// masked before the token inside it).
    var secrets: [String] {
        let secrets = headers.flatMap(\.secretParts) + Redaction.userInfoSecrets(of: baseURL)
        return Array(Set(secrets)).sorted { $0.count > $1.count }
    }

    /// A request header. Its value may be a secret: ``description`` never shows it.
    public struct Header: Sendable, Equatable, CustomStringConvertible {
        /// The header's name.
        public var name: String
        /// The value sent.
        public var value: String
        /// Where the value came from, for logs: `env GITHUB_TOKEN`, `file /etc/…`, or `literal`.
        public var source: String
        /// The part of ``value`` read from the environment or a file, without its `prefix:`
        /// (`ghp_…` of `token ghp_…`): what a hook's environment holds. Nil: all of ``value``.
        public var secret: String?

        /// A header `name: value` read from `source`; `secret` is the part a prefix was put before.
        public init(name: String, value: String, source: String = "literal", secret: String? = nil) {
            self.name = name
            self.value = value
            self.source = source
            self.secret = secret
        }

        /// What a log must never show of this header: the value, the part read from the
        /// environment or a file, and the last word of a value with a scheme (`Bearer abc…`,
        /// `token ghp_…`), which a hook's own variable may hold alone.
        var secretParts: [String] {
            Redaction.secretParts(ofHeaderValue: value) + (secret.map { [$0] } ?? [])
        }

        /// The headers the engine sets per request beside the transport's framing ones
        /// (`HTTPRequest.framingHeaderNames`), lower-cased: `If-None-Match: *` or `Range` had
        /// every answer refused as not the one asked.
        static let managedNames: Set<String> = [
            "range", "if-range", "if-match", "if-none-match", "if-modified-since", "if-unmodified-since",
            "accept-encoding",
        ]

        /// Whether `text` can be the name of an environment variable (a letter or `_`, then
        /// letters, digits and `_`; at most 255 bytes). Anything else given where a variable's
        /// name belongs may be the secret itself, given by mistake: it is never quoted back.
        public static func isVariableName(_ text: String) -> Bool {
            guard let first = text.utf8.first, text.utf8.count <= 255,
                first == UInt8(ascii: "_") || (first | 0x20 >= UInt8(ascii: "a") && first | 0x20 <= UInt8(ascii: "z"))
            else { return false }
            return text.utf8.allSatisfy { byte in
                byte == UInt8(ascii: "_") || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                    || (byte | 0x20 >= UInt8(ascii: "a") && byte | 0x20 <= UInt8(ascii: "z"))
            }
        }

        /// What is wrong with a header `name: value`, or nil: the transport's rule
        /// (`HTTPRequest.headerProblem`: an HTTP token, no framing header, no control character
        /// in the value), and no header the engine sets itself (``managedNames``). The flags and
        /// the config file both check with it.
        public static func problem(name: String, value: String) -> String? {
            if managedNames.contains(name.lowercased()) {
                return
                    "\(name) is set by sync-agent itself for each request (ranges, conditional requests and their codings); give only headers of your own, such as Authorization"
            }
            return HTTPRequest.headerProblem(name: name, value: value)
        }

        /// `Authorization: <from env GITHUB_TOKEN>`: the value is never shown.
        public var description: String { "\(name): <from \(source)>" }
    }
}

/// A problem in a config file, with the line and column it is at.
public struct ConfigurationProblem: Sendable, Equatable, CustomStringConvertible {
    /// The line, from 1; nil for the file as a whole.
    public var line: Int?
    /// The column, from 1.
    public var column: Int?
    /// What is wrong and how to fix it.
    public var message: String

    /// A problem at `line`:`column`.
    public init(line: Int?, column: Int? = nil, message: String) {
        self.line = line
        self.column = column
        self.message = message
    }

    /// `line 7, column 5: …`.
    public var description: String {
        guard let line else { return message }
        return column.map { "line \(line), column \($0): \(message)" } ?? "line \(line): \(message)"
    }
}

/// A config file that cannot be used: every problem found, each with its line.
public struct ConfigurationError: Error, Sendable, CustomStringConvertible {
    /// The file.
    public var path: String
    /// What is wrong, in the file's order: the first 500 found.
    public var problems: [ConfigurationProblem]
    /// How many more problems were found and not listed.
    public var unlisted = 0
    /// How many problems were found in all.
    public var count: Int { problems.count + unlisted }

    /// An error for `path`.
    public init(path: String, problems: [ConfigurationProblem]) {
        self.path = path
        self.problems = problems
    }

    /// One line a problem: `agent.yaml:7:5: storages.docs.interval: …`, as compilers print them.
    public var description: String {
        problems.map { problem in
            let place = [problem.line.map(String.init), problem.column.map(String.init)].compactMap { $0 }.joined(
                separator: ":")
            return place.isEmpty ? "\(path): \(problem.message)" : "\(path):\(place): \(problem.message)"
        }.joined(separator: "\n")
            + (unlisted > 0
                ? "\n\(path): and \(unlisted) more problems, not listed; fix these first, then run check-config again"
                : "")
    }
}
