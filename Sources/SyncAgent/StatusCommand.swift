import ArgumentParser
import ContentSync
import FileKit
import Foundation
import StorageFormat

/// `sync-agent status`: what the state database says, without touching the network.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the synced version, the state and the last error of --dir.",
        discussion: """
            Reads the state database only (no network). The state is "working" while an update,
            verify or reset of --dir runs, in any process; otherwise the state the last attempt
            ended in. Also shows the last attempt, the last success and how many attempts in a
            row failed.
            """)

    @OptionGroup var folder: FolderOptions

    @Flag(name: .long, help: "Print a JSON object: version (string or null), state, runningUpdate, lastError, lastErrorCode, lastCheck, lastAttempt, lastSuccess, consecutiveFailures, history, …")
    var json = false

    func run() async throws {
        let status = try await folder.readStatus()
        if json {
            print(try Self.json(status))
            return
        }
        print(Self.text(status))
    }

    /// The human-readable status, one fact a line.
    static func text(_ status: SyncStatus) -> String {
        let time = { (date: Date) in ISO8601DateFormatter().string(from: date) }
        var lines = ["folder:       \(status.contentDirectory)",
                     "version:      \(status.version ?? "none (never synced)")"]
        if let running = status.runningUpdate {
            lines.append("state:        working: process \(running.processID) is updating it now")
        } else {
            lines.append("state:        \(status.state.rawValue)")
        }
        lines.append("last check:   \(status.lastCheck.map(time) ?? "never")")
        if let attempt = status.lastAttempt {
            lines.append("last attempt: \(time(attempt.finishedAt)) \(describe(attempt))")
        }
        if let success = status.lastSuccess, success != status.lastAttempt {
            lines.append("last success: \(time(success.finishedAt)) \(describe(success))")
        }
        if status.consecutiveFailures > 0 {
            lines.append("failures:     \(status.consecutiveFailures) in a row")
        }
        if let error = status.lastError { lines.append("last error:   \(error)") }
        if !status.trustedKeyIDs.isEmpty { lines.append("trusted keys: \(status.trustedKeyIDs.joined(separator: ", ")) (a sync without them is refused)") }
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
        for key in ["version", "runningUpdate", "lastError", "lastErrorCode", "lastCheck", "lastAttempt", "lastSuccess", "pendingVersion"]
        where object[key] == nil {
            object[key] = NSNull()
        }
        let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self)
    }
}
