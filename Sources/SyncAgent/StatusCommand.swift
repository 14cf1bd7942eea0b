import ArgumentParser
import ContentSync
internal import DateText
import FileKit
import Foundation
import StorageFormat
import SyncDaemon

/// `sync-agent status`: what the state database says, without touching the network.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the synced version, the state and the last error of --dir.",
        discussion: """
            Reads the state database only (no network). The state is "working" while an update, \
            verify or reset of --dir runs, in any process; otherwise the state the last attempt \
            ended in. Also shows the last attempt, the last success and how many attempts in a \
            row failed.

            With --check (for cron, Nagios or a Kubernetes probe), exits 9 after the status, with \
            one line on stderr saying why, when the last attempt failed, when the folder never \
            synced successfully, or when the last success is older than --max-age; 0 otherwise.
            """)

    @OptionGroup var folder: FolderOptions

    @Flag(
        name: .long,
        help:
            "Print a JSON object: version (string or null), state, runningUpdate, lastError, lastErrorCode, lastCheck, lastAttempt, lastSuccess, consecutiveFailures, history, …"
    )
    var json = false

    @Flag(
        name: .long,
        help:
            "Exit 9 when the last attempt failed, the folder never synced, or the last success is older than --max-age."
    )
    var check = false

    @Option(
        name: .long, parsing: .unconditional,
        help:
            "With --check: the oldest last success that passes, in seconds or with s, m, h or d (3600, 90s, 15m, 2h, 1d)."
    )
    var maxAge: String?

    func run() async throws {
        let maxAge = try maxAge.map(Self.duration(_:))
        if maxAge != nil, !check {
            throw CLIFailure(code: 6, message: "--max-age needs --check")
        }
        let status = try await folder.readStatus()
        try Console.output((json ? try Self.json(status) : Self.text(status)) + "\n")
        if check, let failure = Self.checkFailure(status, maxAge: maxAge, now: Date()) {
            throw CLIFailure(code: 9, message: "check failed: " + failure)
        }
    }

    /// Why `status --check` fails for `status` at `now`, or nil when it passes.
    static func checkFailure(_ status: SyncStatus, maxAge: Duration?, now: Date) -> String? {
        if status.state == .failed {
            return "the last attempt failed" + (status.lastErrorCode.map { " (\($0))" } ?? "")
                + (status.lastError.map { ": \($0)" } ?? "")
        }
        guard let success = status.lastSuccess else {
            return "\(status.contentDirectory) never synced successfully"
        }
        if let maxAge {
            let age = now.timeIntervalSince(success.finishedAt)
            if age > Double(maxAge.components.seconds) {
                return
                    "the last success, \(InternetDateTime.formatWholeSeconds(success.finishedAt)), is \(Int(age))s old, over --max-age \(maxAge.components.seconds)s"
            }
        }
        return nil
    }

    /// `3600`, `90s`, `15m`, `2h`, `1d` as a duration (bare seconds, as every other duration
    /// flag takes them); anything else is a one-line failure (exit 6).
    static func duration(_ text: String) throws -> Duration {
        guard let duration = DurationText.parse(text, bareSeconds: true) else {
            throw CLIFailure(
                code: 6, message: "--max-age '\(text)' is not a duration: give seconds or \(DurationText.help)")
        }
        return duration
    }

    /// The human-readable status, one fact a line.
    static func text(_ status: SyncStatus) -> String {
        let time = { (date: Date) in InternetDateTime.formatWholeSeconds(date) }
        var lines = [
            "folder:       \(status.contentDirectory)",
            "version:      \(status.version ?? "none (never synced)")",
        ]
        if let running = status.runningUpdate {
            lines.append("state:        working: process \(running.processID) is updating it now")
        } else {
            lines.append("state:        \(status.state.rawValue)")
        }
        // When the storage last answered; attempts it did not answer are the last attempt's line.
        let unanswered = status.lastAttempt == nil ? "never" : "never answered (see the last attempt)"
        lines.append("last check:   \(status.lastCheck.map(time) ?? unanswered)")
        if let attempt = status.lastAttempt {
            lines.append("last attempt: \(time(attempt.finishedAt)) \(describe(attempt))")
        }
        if let success = status.lastSuccess, success != status.lastAttempt {
            lines.append("last success: \(time(success.finishedAt)) \(describe(success))")
        }
        if status.consecutiveFailures > 0 {
            lines.append("failures:     \(status.consecutiveFailures) in a row")
        }
        // One fact a line: the error quotes what the storage wrote, newlines included.
        if let error = status.lastError { lines.append("last error:   \(LogText.escaped(error))") }
        if !status.trustedKeyIDs.isEmpty {
            lines.append(
                "trusted keys: \(status.trustedKeyIDs.joined(separator: ", ")) (a sync without them is refused)")
        }
        if let pending = status.pendingVersion {
            lines.append("pending:      an interrupted update to \(pending); the next sync continues it")
        }
        lines.append("state file:   \(status.stateFile)")
        return lines.joined(separator: "\n")
    }

    /// "replay 1.0 → 1.2 succeeded", "check failed (network)".
    static func describe(_ entry: UpdateHistoryEntry) -> String {
        var text = entry.kind.rawValue
        if entry.kind != .check, let to = entry.toVersion {
            text += " \(entry.fromVersion.map { "\($0) → " } ?? "")\(to)"
        }
        text += " \(entry.outcome.rawValue)"
        if entry.outcome == .failed || entry.outcome == .cancelled, let code = entry.errorCode { text += " (\(code))" }
        return text
    }

    static func json(_ status: SyncStatus) throws -> String {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        // Encode optionals as explicit nulls: consumers test `"version": null`.
        var object = try JSONSerialization.jsonObject(with: encoder.encode(status)) as? [String: Any] ?? [:]
        for key in [
            "version", "runningUpdate", "lastError", "lastErrorCode", "lastCheck", "lastAttempt", "lastSuccess",
            "pendingVersion",
        ]
        where object[key] == nil {
            object[key] = NSNull()
        }
        let data = try JSONSerialization.data(
            withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self)
    }
}
