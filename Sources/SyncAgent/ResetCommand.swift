import ArgumentParser
import ContentSync
import SyncDaemon

/// `sync-agent reset`: forgets a folder's state and deletes its content, so the next sync
/// restores it from the archive.
struct ResetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reset",
        abstract: "Forget the state of --dir and delete its content, so the next sync restores it from the archive.",
        discussion: """
            The way past a refused rollback (a storage that went back to an older version) or a \
            folder verify cannot repair. Asks for no confirmation: --dir is required. Deletes \
            --dir and its staging area and empties the state database (trusted keys are kept; \
            see forget-keys). A folder with no state database, or where it records no synced version \
            (a first sync that was refused or failed), is left alone. Exits 6 while \
            another update, verify or reset of --dir runs.
            """)

    @OptionGroup var folder: FolderOptions

    func run() async throws {
        let removed: Bool
        do {
            try FolderKeeper.refuseIfKeptByAnother(directory: folder.contentDirectory, statePath: folder.statePath)
            removed = try await CacheManager.reset(
                contentDirectory: folder.contentDirectory, stateDatabasePath: folder.statePath)
        } catch {
            throw CLIFailure(error)
        }
        // Through `output`: a verdict that could not be written fails (exit 5), as `status` does.
        try Console.output(
            (removed
                ? "removed \(folder.contentDirectory) and its state in \(folder.statePath); the next sync restores it from the archive"
                : "\(folder.contentDirectory) holds no version synced according to \(folder.statePath); nothing removed")
                + "\n")
    }
}
