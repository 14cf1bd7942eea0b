import ArgumentParser
import ContentSync

/// `sync-agent forget-keys`: drops the signing keys a folder was synced with.
struct ForgetKeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "forget-keys",
        abstract:
            "Forget the --trust-key keys --dir was synced with, so a sync without them accepts an unsigned storage.",
        discussion: """
            Once --dir has been synced with --trust-key, a later sync without it is refused (exit 4): \
            leaving the flag off would accept an unsigned or differently signed storage. This command \
            is the explicit way to accept that. It changes nothing else (version, content, history).
            """)

    @OptionGroup var folder: FolderOptions

    func run() async throws {
        let forgotten: [String]
        do {
            forgotten = try await CacheManager.forgetTrustedKeys(stateDatabasePath: folder.statePath)
        } catch {
            throw CLIFailure(error)
        }
        // Through `output`: a verdict that could not be written fails (exit 5), as `status` does.
        try Console.output(
            (forgotten.isEmpty
                ? "\(folder.contentDirectory) had no trusted keys"
                : "forgot trusted key(s) \(forgotten.joined(separator: ", ")) for \(folder.contentDirectory); the next sync without --trust-key accepts an unsigned storage")
                + "\n")
    }
}
