import ArgumentParser
import ContentSync
import FileKit

/// The options that name a synced folder and its state file.
struct FolderOptions: ParsableArguments {
    @Option(name: .long, help: "The local folder that mirrors the storage's content.")
    var dir: String

    @Option(name: .long, help: "The state database (default: under $XDG_STATE_HOME/content-sync/, outside --dir).")
    var state: String?

    var contentDirectory: String { FileSystem.absolutePath(dir) }
    var statePath: String {
        state.map(FileSystem.absolutePath) ?? SyncConfiguration.defaultStatePath(for: contentDirectory)
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
