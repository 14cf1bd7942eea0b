import ArgumentParser
import ContentSync
import FileKit
import Foundation
import StorageFormat
import SyncDaemon
import Transport

/// `sync-agent verify`: check a mirror against the published tree digest.
struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract:
            "Check --dir against the storage's published tree digest and list every difference; --repair fixes them.",
        discussion: """
            Needs a storage published with the integrity extension (sync-agent publish writes it). \
            Exits 0 when the folder matches (after --repair, if given), 7 when differences remain, \
            and like sync for other failures. The storage URL is the one the last sync used, or --base-url. \
            A storage that needs headers, or that --dir was synced from with --trust-key, takes the same \
            --header, --header-env and --trust-key options as sync.
            """)

    @OptionGroup var folder: FolderOptions

    @Option(name: .long, help: "The storage URL (default: the one the last sync of --dir used).")
    var baseURL: String?

    @Flag(name: .long, help: "Fix the differences: re-fetch what differs, delete what is extra, switch atomically.")
    var repair = false

    @OptionGroup var request: StorageRequestOptions

    func run() async throws {
        let status = try await folder.readStatus()
        guard let text = baseURL ?? status.baseURL, let url = URL(string: text) else {
            throw CLIFailure(
                code: 6,
                message: "no storage URL recorded for \(folder.contentDirectory); pass --base-url or sync first")
        }
        // The state database keeps a URL's password or token masked: fetching with the mask would fail.
        if baseURL == nil, url.user == Redaction.mask || url.password == Redaction.mask {
            throw CLIFailure(
                code: 6,
                message: "the storage URL recorded for \(folder.contentDirectory), \(text), had a password or token, "
                    + "which the state database does not keep; pass --base-url with it")
        }
        var settings = StorageSettings(
            name: "", baseURL: url, directory: folder.contentDirectory, statePath: folder.statePath)
        settings.trustedKeys = try request.trustedKeys()
        settings.headers = try request.headers()
        let report: VerifyReport
        do {
            try FolderKeeper.refuseIfKeptByAnother(directory: folder.contentDirectory, statePath: folder.statePath)
            let manager = try CacheManager(configuration: settings.clientConfiguration(transport: nil, logger: nil))
            report = try await manager.verify(repair: repair)
        } catch {
            throw CLIFailure(error)
        }
        // The differences are the answer: a failed write (a full disk) exits 5, as `status` does,
        // never 0 with the result lost.
        for difference in report.differences { try Console.output(difference + "\n") }
        if report.matches {
            try Console.output(
                (report.repaired > 0
                    ? "repaired \(report.repaired) path(s): \(folder.contentDirectory) now matches \(report.version)"
                    : "\(folder.contentDirectory) matches \(report.version)") + "\n")
        } else {
            throw CLIFailure(
                code: 7,
                message:
                    "\(report.differences.count) difference(s) from \(report.version); run with --repair to fix them")
        }
    }
}
