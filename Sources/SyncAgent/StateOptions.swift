import ArgumentParser
import ContentSync
import FileKit
import Foundation

/// The options that name a synced folder and its state file.
struct FolderOptions: ParsableArguments {
    @Option(name: .long, help: "The local folder that mirrors the storage's content.")
    var dir: String

    @Option(
        name: .long,
        help:
            "The state database (default: under $XDG_STATE_HOME/content-sync/, outside --dir; the service's /var/lib/sync-agent/ when only that has one)."
    )
    var state: String?

    var contentDirectory: String { FileSystem.absolutePath(dir) }
    var statePath: String {
        if let state { return FileSystem.absolutePath(state) }
        return Self.statePath(
            default: SyncConfiguration.defaultStatePath(for: contentDirectory),
            underService: ProcessInfo.processInfo.environment["STATE_DIRECTORY"] != nil,
            exists: { FileSystem.exists($0) })
    }

    /// The folder the systemd unit's `StateDirectory=sync-agent` makes.
    static let serviceStateFolder = "/var/lib/sync-agent"

    /// The state database of a folder looked at from outside the service (`status`, `verify`,
    /// `reset` from cron or a shell, where `$STATE_DIRECTORY` is unset): the default one when it
    /// exists, else the service's (`/var/lib/sync-agent/<folder>-<hash>.sqlite`) when that one
    /// does, else the default.
    static func statePath(default path: String, underService: Bool, exists: (String) -> Bool) -> String {
        guard !underService, !exists(path) else { return path }
        let service = serviceStateFolder + "/" + (path as NSString).lastPathComponent
        return exists(service) ? service : path
    }

    /// What the state database says about the folder, or the CLI failure to report.
    func readStatus() async throws -> SyncStatus {
        do {
            return try await SyncStatus.read(statePath: statePath, contentDirectory: contentDirectory)
        } catch {
            throw CLIFailure(error)
        }
    }
}
