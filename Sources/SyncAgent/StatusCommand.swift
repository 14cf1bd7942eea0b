import ArgumentParser
import ContentSync
import FileKit
import Foundation
import StorageFormat

/// `sync-agent status`: what the state database says, without touching the network.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the synced version, the state and the last error of --dir.")

    @OptionGroup var folder: FolderOptions

    @Flag(name: .long, help: "Print a JSON object: version (string or null), state, lastError, lastCheck, history, …")
    var json = false

    func run() async throws {
        let status = try await folder.readStatus()
        if json {
            print(try Self.json(status))
            return
        }
        print("folder:     \(status.contentDirectory)")
        print("version:    \(status.version ?? "none (never synced)")")
        print("state:      \(status.state)")
        print("last check: \(status.lastCheck.map { ISO8601DateFormatter().string(from: $0) } ?? "never")")
        if let error = status.lastError { print("last error: \(error)") }
        if let pending = status.pendingVersion { print("pending:    an interrupted update to \(pending); the next sync continues it") }
        print("state file: \(status.stateFile)")
    }

    static func json(_ status: SyncStatus) throws -> String {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        // Encode optionals as explicit nulls: consumers test `"version": null`.
        var object = try JSONSerialization.jsonObject(with: encoder.encode(status)) as? [String: Any] ?? [:]
        for key in ["version", "lastError", "lastErrorCode", "lastCheck", "pendingVersion"] where object[key] == nil {
            object[key] = NSNull()
        }
        let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self)
    }
}
