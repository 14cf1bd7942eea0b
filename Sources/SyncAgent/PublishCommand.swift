import ArgumentParser
import ContentPublishing
import ContentSync
internal import DateText
import FileKit
import Foundation
import StorageFormat
import Transport

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
            at a time: a second one fails at once (exit 6). It warns on stderr, and still publishes, when a \
            signed storage would become unsigned (clients that trust a key refuse it as a trust downgrade), \
            when the previous status named URLs outside --base-url, and when --base-url is not the base the \
            storage was published with. A storage moved to another base raises its minimal version to the \
            previous version (also above --minimal): the earlier change lists name paths under the old base, \
            so clients further behind restore from the archive.

            --upload REMOTE:PATH then copies the storage there with rclone (its configuration from \
            rclone.conf or RCLONE_CONFIG_* variables), under the publish's lock, one rclone run per step: \
            the content, archive and manifest, then the change lists, then the update list, and \
            cacheStatus.json last. It copies and never deletes: clients that are behind still need older \
            change lists and files. Unchanged files are skipped by hash when the remote has one; without \
            hashes the content is sent in full, since rclone would compare sizes only. If a step fails \
            (exit 11) the status was not uploaded, so clients still see the remote's previous version: run \
            the same command again, which finds the version published and uploads it. The remote is checked \
            before anything is published.
            """)

    @Option(name: .long, help: "The storage folder.")
    var storage: String

    @Option(name: .long, help: "The folder holding the new version's content.")
    var content: String

    @Option(name: .long, parsing: .unconditional, help: "The new version (greater than the current one).")
    var version: String

    @Option(
        name: .long, parsing: .unconditional,
        help: "The new minimalCacheVersion (default: unchanged; with --init, --version).")
    var minimal: String?

    @Option(
        name: .long, help: "Where the storage is published, e.g. https://raw.githubusercontent.com/OWNER/REPO/main/")
    var baseURL: String

    @Flag(name: .long, help: "Print the plan and byte counts; write nothing.")
    var dryRun = false

    @Flag(name: .customLong("init"), help: "Create the storage from --content at its first version.")
    var initialize = false

    @Option(name: .long, help: "Sign cacheStatus.json with this ed25519 private key (from `sync-agent keygen`).")
    var signKey: String?

    @Option(
        name: .long, parsing: .unconditional,
        help: "Days the signature stays valid, from 0.0417 (an hour) to 36500; clients refuse an expired status.")
    var signatureDays = "30"

    @Flag(
        name: .long,
        help:
            "Print nothing but errors and warnings (by default the summary, the changes and each upload step go to stdout)."
    )
    var quiet = false

    @Flag(name: .long, help: "Also print how long each step of the publish took (to stderr).")
    var verbose = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Then copy the storage with rclone to this remote, cacheStatus.json last.", valueName: "REMOTE:PATH"))
    var upload: String?

    @Option(
        name: .long,
        help: ArgumentHelp("The rclone program --upload runs: a name looked up on PATH, or a path.", valueName: "PATH"))
    var rclone = "rclone"

    func run() async throws {
        guard let url = URL(string: baseURL) else {
            throw CLIFailure(
                code: 6,
                message:
                    "--base-url '\(Redaction.text(baseURL))' is not a URL: give the storage folder's, such as https://raw.githubusercontent.com/OWNER/REPO/BRANCH/"
            )
        }
        let parsedVersion: CacheVersion
        let parsedMinimal: CacheVersion?
        do {
            parsedVersion = try CacheVersion(version)
        } catch {
            throw CLIFailure(code: 6, message: "--version: \(error)")
        }
        do {
            parsedMinimal = try minimal.map { try CacheVersion($0) }
        } catch {
            throw CLIFailure(code: 6, message: "--minimal: \(error)")
        }
        var options = PublishOptions(
            storage: storage, content: content, version: parsedVersion, minimal: parsedMinimal, baseURL: url)
        options.dryRun = dryRun
        options.initialize = initialize
        // Checked with or without --sign-key (outside audit: `nan` passed unseen without one).
        // An expired (or NaN, or overflowing) lifetime would publish a status every trusting
        // client refuses, and so would one shorter than an hour: hosting caches (GitHub raw
        // keeps a file 5 minutes), uploads and clients' clocks need that margin.
        // Decimal only: `Double` also reads `0x10` (sixteen), `1e1`, `nan` and `inf`.
        guard let days = DecimalText.parse(signatureDays), days >= 1.0 / 24, days <= 36_500 else {
            throw CLIFailure(
                code: 6,
                message:
                    "--signature-days '\(signatureDays)' must be a number of days of at least 0.0417 (one hour: hosting caches, uploads and clients' clocks need that margin) and at most 36500; clients refuse an expired status"
            )
        }
        if let signKey {
            do {
                options.signingKey = try SmallTextFile.read(signKey)
            } catch {
                throw CLIFailure(
                    code: 6,
                    message:
                        "--sign-key \(signKey) \(error); give the private key file from `sync-agent keygen --out FILE`")
            }
            do {
                _ = try SigningKey(fileText: options.signingKey ?? "")
            } catch {
                throw CLIFailure(
                    code: 6,
                    message:
                        "--sign-key \(signKey): \(error.message); make a pair with `sync-agent keygen --out FILE` and pass FILE"
                )
            }
            // Rounded up to a whole second: a lifetime under one is still a second, never none.
            options.signatureLifetime = .seconds(Int64((days * 86_400).rounded(.up)))
        }
        let report: PublishReport
        do {
            // Blocking work (hashing, archiving, rclone runs) stays off the cooperative threads.
            let (upload, rclone, quiet) = (upload, rclone, quiet)
            report = try await BlockingIOPool.shared.run { [options] () throws -> PublishReport in
                var options = options
                // The remote is checked first: a typo in it must not leave a version published here only.
                options.uploader = try upload.map {
                    try RcloneUploader.prepare(remote: $0, rclone: rclone, quiet: quiet)
                }
                return try Publisher.publish(options)
            }
        } catch let failure as CLIFailure {
            throw failure
        } catch let failure as PublishError {
            // Published here but not uploaded: what the publish did is still said, then the failure.
            if let published = failure.report { show(published, baseURL: url) }
            throw CLIFailure(failure)
        } catch {
            throw CLIFailure(error)
        }
        show(report, baseURL: url)
    }

    /// Prints the warnings (stderr) and, unless --quiet, what the publish did.
    func show(_ report: PublishReport, baseURL url: URL) {
        if verbose {
            for phase in report.phases {
                Console.standardError("phase \(phase.name): \(String(format: "%.1f", phase.seconds * 1000)) ms\n")
            }
            if report.indexedContentFiles + report.keptContentFiles > 0 {
                Console.standardError(
                    "reused: \(report.indexedContentFiles) published files read from the index, "
                        + "\(report.keptContentFiles) kept from the retired version\n")
            }
        }
        for warning in Self.warnings(
            report, storage: storage, baseURL: url, dryRun: dryRun, minimalGiven: minimal != nil)
        {
            // They quote base URLs, which may carry a password.
            Console.standardError("warning: \(Redaction.text(warning))\n")
        }
        guard !quiet else { return }
        if let recovery = report.recovery {
            Console.print("recovered: \(recovery)")
        }
        if !report.removedLeftovers.isEmpty {
            Console.print(
                "recovered: deleted what an older sync-agent's interrupted publish left: "
                    + report.removedLeftovers.joined(separator: ", "))
        }
        let uploaded =
            report.uploaded
            ? "; uploaded to \(upload ?? "")" : dryRun && upload != nil ? "; would upload to \(upload ?? "")" : ""
        if report.alreadyPublished {
            let done: String
            if let until = report.resignedUntil {
                let key = report.signatureKeyID.map { " (key id \($0))" } ?? ""
                done =
                    "\(dryRun ? "would re-sign" : "re-signed") its status\(key), valid until "
                    + InternetDateTime.formatWholeSeconds(until)
            } else {
                done = report.uploaded ? "nothing to publish" : "nothing to do"
            }
            Console.print(
                "\(report.toVersion) (minimal \(report.minimalVersion)) is already published with this content: "
                    + done + "; "
                    + "\(report.files) files, \(report.folders) folders, \(ProgressBar.bytes(report.contentBytes)), archive \(ProgressBar.bytes(report.archiveBytes))"
                    + uploaded)
            return
        }
        let from = report.fromVersion.map { "\($0)" } ?? "nothing"
        Console.print(
            "\(dryRun ? "would publish" : "published") \(report.toVersion) (minimal \(report.minimalVersion)) over \(from): "
                + "\(report.changes.count) change(s), \(ProgressBar.bytes(report.bytesToDownload)) for a client one version behind; "
                + "\(report.files) files, \(report.folders) folders, \(ProgressBar.bytes(report.contentBytes))"
                + (dryRun ? "" : ", archive \(ProgressBar.bytes(report.archiveBytes))")
                + (report.reusedArchiveEntries > 0
                    ? " (\(report.reusedArchiveEntries) entries copied from the previous archive)" : "")
                + uploaded)
        for change in report.changes {
            Console.print("  " + Change(kind: change, index: 0).description)
        }
    }

    /// What the operator should know about a publish that went through: a signed storage made
    /// unsigned or signed by another key, a storage moved to another base (and the minimal
    /// version raised for it), and a status whose URLs were under another base.
    static func warnings(_ report: PublishReport, storage: String, baseURL: URL, dryRun: Bool, minimalGiven: Bool)
        -> [String]
    {
        var warnings: [String] = []
        let version = report.toVersion
        let from = report.fromVersion.map { "\($0)" } ?? "their version"
        let status = "\(storage)/RXCacheConfig/cacheStatus.json"
        if let previous = report.previousSignatureKeyID {
            if report.signatureKeyID == nil {
                warnings.append(
                    "the previous \(status) was signed (key id \(previous)) and \(version)'s \(dryRun ? "would not be" : "is not"): "
                        + "clients that trust a key will refuse \(version) as a trust downgrade and stay at \(from). "
                        + "Sign with --sign-key FILE, the private key of \(previous) (from `sync-agent keygen`)"
                        + (dryRun ? "" : "; publish the next version signed to bring those clients along"))
            } else if let current = report.signatureKeyID, current != previous {
                warnings.append(
                    "the previous \(status) was signed by key id \(previous) and \(version)'s is signed by \(current): "
                        + "clients that trust only \(previous) will refuse \(version); give them the new public key (--trust-key) too"
                )
            }
        }
        if report.signatureKeyID != nil, report.fromVersion != nil, !report.previousStatusVerified,
            report.resignedUntil == nil
        {
            warnings.append(
                "the previous \(status) carries no signature of this key (unsigned, another key's, or changed since), so its change lists and update list were taken as they are and are now signed: "
                    + "if this is the first signed publish or a key change, nothing is wrong; if others may write \(storage), compare RXCacheConfig/ with your own copy"
            )
        }
        let raised = dryRun ? "would be raised" : "was raised"
        if let previousBase = report.previousBaseURL {
            let old = previousBase.absoluteString
            let minimal = report.minimalVersion
            let floor =
                report.requestedMinimalVersion.map { asked in
                    minimalGiven
                        ? "--minimal \(asked) \(raised) to \(minimal)"
                        : "The minimal version \(raised) from \(asked) to \(minimal)"
                } ?? "The minimal version is \(minimal)"
            warnings.append(
                "the base URL changed from \(old) to \(baseURL.absoluteString): clients configured with \(old) see \(version) "
                    + "only if \(old) serves this storage too. \(floor), so clients below \(minimal) restore from the archive: "
                    + "the change lists up to \(from) name paths under \(old), which clients configured with \(baseURL.absoluteString) refuse. "
                    + "A mistyped base URL (another scheme, host, branch or folder) is the usual cause of an unintended change; "
                    + "if the storage did not move, "
                    + (dryRun ? "pass --base-url \(old)" : "publish the next version with --base-url \(old)"))
        } else if let asked = report.requestedMinimalVersion {
            let minimal = report.minimalVersion
            warnings.append(
                "\(minimalGiven ? "--minimal" : "the minimal version") \(asked) \(raised) to \(minimal): "
                    + "the change lists up to \(minimal) name paths under another base URL than \(baseURL.absoluteString), "
                    + "which clients refuse, so clients below \(minimal) restore from the archive")
        }
        if !report.previousURLsOutsideBase.isEmpty {
            let urls = report.previousURLsOutsideBase.map(\.absoluteString).joined(separator: ", ")
            warnings.append(
                "the previous \(status) named URLs outside --base-url \(baseURL.absoluteString) (\(urls)): "
                    + "clients will fetch \(version)'s update list and archive under \(baseURL.absoluteString) instead. "
                    + "If the storage did not move, --base-url is likely mistyped (another scheme, host, branch or folder)"
            )
        }
        return warnings
    }
}
