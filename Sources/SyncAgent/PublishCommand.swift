import ArgumentParser
import ContentPublishing
import ContentSync
import FileKit
import Foundation
import StorageFormat

/// `sync-agent publish`: build a storage's next version from a folder.
struct PublishCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "publish",
        abstract: "Publish a folder as the storage's next version: change list, update list, archive, status.",
        discussion: """
            Compares the storage's RXCacheContent/ with a snapshot of --content and writes the smallest \
            change list (renames and moves of files and folders found by content hash), appends it to the \
            update list, rebuilds RXCacheContent.zip deterministically, replaces RXCacheContent/, and writes \
            cacheStatus.json last, with integrity data. --init creates a storage from a folder at its \
            first version. Everything is built in <storage>/.content-sync-publish/ first; a publish that was \
            killed is rolled back or completed by running the same command again. One publish per storage \
            at a time: a second one fails at once (exit 6).
            """)

    @Option(name: .long, help: "The storage folder.")
    var storage: String

    @Option(name: .long, help: "The folder holding the new version's content.")
    var content: String

    @Option(name: .long, help: "The new version (greater than the current one).")
    var version: String

    @Option(name: .long, help: "The new minimalCacheVersion (default: unchanged; with --init, --version).")
    var minimal: String?

    @Option(name: .long, help: "Where the storage is published, e.g. https://raw.githubusercontent.com/OWNER/REPO/main/")
    var baseURL: String

    @Flag(name: .long, help: "Print the plan and byte counts; write nothing.")
    var dryRun = false

    @Flag(name: .customLong("init"), help: "Create the storage from --content at its first version.")
    var initialize = false

    @Option(name: .long, help: "Sign cacheStatus.json with this ed25519 private key (from `sync-agent keygen`).")
    var signKey: String?

    @Option(name: .long, help: "Days the signature stays valid; clients refuse an expired status.")
    var signatureDays: Double = 30

    func run() async throws {
        guard let url = URL(string: baseURL) else { throw CLIFailure(code: 6, message: "--base-url '\(baseURL)' is not a URL") }
        let parsedVersion: CacheVersion
        let parsedMinimal: CacheVersion?
        do {
            parsedVersion = try CacheVersion(version)
            parsedMinimal = try minimal.map { try CacheVersion($0) }
        } catch {
            throw CLIFailure(code: 6, message: "\(error)")
        }
        var options = PublishOptions(storage: storage, content: content, version: parsedVersion, minimal: parsedMinimal, baseURL: url)
        options.dryRun = dryRun
        options.initialize = initialize
        if let signKey {
            do {
                options.signingKey = try String(contentsOfFile: signKey, encoding: .utf8)
            } catch {
                throw CLIFailure(code: 6, message: "cannot read --sign-key \(signKey): \(error.localizedDescription)")
            }
            do {
                _ = try SigningKey(fileText: options.signingKey ?? "")
            } catch {
                throw CLIFailure(code: 6, message: "--sign-key \(signKey): \(error.message); make a pair with `sync-agent keygen --out FILE` and pass FILE")
            }
            // An expired (or NaN, or overflowing) lifetime would publish a status every trusting client refuses.
            guard signatureDays.isFinite, signatureDays > 0, signatureDays <= 36_500 else {
                throw CLIFailure(code: 6, message: "--signature-days \(signatureDays) must be above 0 and at most 36500; clients refuse an expired status")
            }
            options.signatureLifetime = .seconds(Int64(signatureDays * 86_400))
        }
        let report: PublishReport
        do {
            report = try Publisher.publish(options)
        } catch {
            throw CLIFailure(error)
        }
        if let recovery = report.recovery {
            print("recovered: \(recovery)")
        }
        if !report.removedLeftovers.isEmpty {
            print("recovered: deleted what an older sync-agent's interrupted publish left: " + report.removedLeftovers.joined(separator: ", "))
        }
        if report.alreadyPublished {
            print("\(report.toVersion) (minimal \(report.minimalVersion)) is already published with this content: nothing to do; "
                  + "\(report.files) files, \(report.folders) folders, \(ProgressBar.bytes(report.contentBytes)), archive \(ProgressBar.bytes(report.archiveBytes))")
            return
        }
        let from = report.fromVersion.map { "\($0)" } ?? "nothing"
        print("\(dryRun ? "would publish" : "published") \(report.toVersion) (minimal \(report.minimalVersion)) over \(from): "
              + "\(report.changes.count) change(s), \(ProgressBar.bytes(report.bytesToDownload)) for a client one version behind; "
              + "\(report.files) files, \(report.folders) folders, \(ProgressBar.bytes(report.contentBytes))"
              + (dryRun ? "" : ", archive \(ProgressBar.bytes(report.archiveBytes))")
              + (report.reusedArchiveEntries > 0 ? " (\(report.reusedArchiveEntries) entries copied from the previous archive)" : ""))
        for change in report.changes {
            print("  " + Change(kind: change, index: 0).description)
        }
    }
}
