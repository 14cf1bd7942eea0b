import Foundation
import StorageServer
import Testing

/// `sync-agent publish` between processes: the storage lock and what recovery prints.
@Suite("sync-agent publish keeps one publish per storage and says what it recovered", .timeLimit(.minutes(3)))
struct PublishCommandTests {
    static let base = "https://publish.invalid/store/"

    func publish(_ version: String, storage: String, scratch: String, initialize: Bool = false) async throws
        -> CommandResult
    {
        var arguments = [
            "publish", "--storage", storage, "--content",
            SyncAgentCLITests.exampleStorage + "/\(version)/RXCacheContent",
            "--version", version, "--base-url", Self.base,
        ]
        if initialize { arguments.append("--init") }
        return try await SyncAgentBinary.run(arguments, scratch: scratch)
    }

    @Test func aPublishOfAStorageAnotherProcessIsPublishingExitsSixAtOnceNamingThatProcess() async throws {
        try await withScratch { scratch in
            let storage = scratch + "/storage"
            let first = try await publish("1.0", storage: storage, scratch: scratch, initialize: true)
            #expect(first.status == 0, "\(first.stderr)")
            let status = try String(contentsOfFile: storage + "/RXCacheConfig/cacheStatus.json", encoding: .utf8)
            // This test process holds the lock a running publish would hold.
            let fd = open(storage, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            #expect(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
            let refused = try await publish("1.1", storage: storage, scratch: scratch)
            #expect(refused.status == 6)
            #expect(
                refused.stderr
                    == "sync-agent: another publish of \(storage) is running (process \(getpid())); wait for it to finish, or stop it\n"
            )
            #expect(try String(contentsOfFile: storage + "/RXCacheConfig/cacheStatus.json", encoding: .utf8) == status)
            close(fd)
            let second = try await publish("1.1", storage: storage, scratch: scratch)
            #expect(second.status == 0, "\(second.stderr)")
            #expect(second.stdout.hasPrefix("published 1.1 (minimal 1.0) over 1.0:"))
            let again = try await publish("1.1", storage: storage, scratch: scratch)
            #expect(
                again.status == 0
                    && again.stdout.hasPrefix("1.1 (minimal 1.0) is already published with this content: nothing to do")
            )
        }
    }

    /// --init over a folder holding a storage's entries but no status (someone's files, or a
    /// storage whose status was lost) is refused and touches nothing; other files (a README) are
    /// no obstacle.
    @Test(arguments: [
        "RXCacheContent/mine.txt", "RXCacheContent.zip", "RXCacheConfig/listOfURLsToUpdatesByVersion.json",
    ])
    func initOverAStoragesEntriesWithoutAStatusIsRefused(_ entry: String) async throws {
        try await withScratch { scratch in
            let storage = scratch + "/storage"
            let path = storage + "/" + entry
            try FileManager.default.createDirectory(
                atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try Data("precious".utf8).write(to: URL(fileURLWithPath: path))
            let refused = try await publish("1.0", storage: storage, scratch: scratch, initialize: true)
            #expect(refused.status == 6, "\(refused.stderr)")
            let shown = entry.hasPrefix("RXCacheContent/") ? "RXCacheContent" : entry
            #expect(refused.stderr.contains(shown) && refused.stderr.contains("move them aside"), "\(refused.stderr)")
            #expect(try String(contentsOfFile: path, encoding: .utf8) == "precious")
            #expect(!FileManager.default.fileExists(atPath: storage + "/RXCacheConfig/cacheStatus.json"))

            let other = scratch + "/other"
            try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
            try Data("# storage".utf8).write(to: URL(fileURLWithPath: other + "/README.md"))
            let fine = try await publish("1.0", storage: other, scratch: scratch, initialize: true)
            #expect(fine.status == 0, "\(fine.stderr)")
            #expect(try String(contentsOfFile: other + "/README.md", encoding: .utf8) == "# storage")
        }
    }

    /// A bad version names the flag it came from: `--version abc` and `--minimal ""` alike.
    @Test(arguments: [(["--version", "abc"], "--version: "), (["--version", "2.0", "--minimal", ""], "--minimal: ")])
    func aBadVersionNamesItsFlag(_ flags: [String], prefix: String) async throws {
        try await withScratch { scratch in
            var arguments = [
                "publish", "--storage", scratch + "/storage", "--content",
                SyncAgentCLITests.exampleStorage + "/1.0/RXCacheContent", "--base-url", Self.base, "--init",
            ]
            arguments += flags
            if !flags.contains("--version") { arguments += ["--version", "1.0"] }
            let result = try await SyncAgentBinary.run(arguments, scratch: scratch)
            #expect(result.status == 6, "\(result.stderr)")
            #expect(result.stderr.contains(prefix), "\(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: scratch + "/storage"))
        }
    }

    /// Refused with or without --sign-key (outside audit: without one, `nan` passed unseen).
    @Test(arguments: ["0", "-1", "nan", "inf", "1e300", "1e-9", "0.0416", "0x10", "1e1", "+30", " 30"], [true, false])
    func aSignatureLifetimeThatWouldExpireOrOverflowIsRefused(days: String, signing: Bool) async throws {
        try await withScratch { scratch in
            let key = scratch + "/key"
            #expect(try await SyncAgentBinary.run(["keygen", "--out", key], scratch: scratch).status == 0)
            let result = try await SyncAgentBinary.run(
                [
                    "publish", "--storage", scratch + "/storage", "--content",
                    SyncAgentCLITests.exampleStorage + "/1.0/RXCacheContent",
                    "--version", "1.0", "--base-url", Self.base, "--init",
                    "--signature-days=" + days,
                ] + (signing ? ["--sign-key", key] : []), scratch: scratch)
            #expect(result.status == 6, "\(result.stderr)")
            #expect(result.stderr.contains("--signature-days"))
            #expect(!FileManager.default.fileExists(atPath: scratch + "/storage"))
        }
    }

    @Test func aPublishSaysWhatItDidAboutAnInterruptedOne() async throws {
        try await withScratch { scratch in
            let storage = scratch + "/storage"
            #expect(try await publish("1.0", storage: storage, scratch: scratch, initialize: true).status == 0)
            // What a publish killed while staging leaves: a work folder with a staging journal.
            let work = storage + "/.content-sync-publish"
            try FileManager.default.createDirectory(
                atPath: work + "/stage/RXCacheContent", withIntermediateDirectories: true)
            let journal =
                #"{"format": 1, "phase": "staging", "pid": 1, "fromVersion": "1.0", "toVersion": "1.1", "minimalVersion": "1.0", "createdFolders": [], "steps": []}"#
            try journal.write(toFile: work + "/journal.json", atomically: false, encoding: .utf8)
            let result = try await publish("1.1", storage: storage, scratch: scratch)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(
                result.stdout.hasPrefix(
                    "recovered: an interrupted publish of 1.1 had installed nothing; deleted its work folder\npublished 1.1"
                ))
            #expect(!FileManager.default.fileExists(atPath: work))
        }
    }

    /// A storage moved to another base publishes on, and says so on stderr, --quiet or not.
    @Test func aChangedBaseURLWarnsThatTheMinimalVersionWasRaisedAndARerunChangesNothing() async throws {
        try await withScratch { scratch in
            let storage = scratch + "/storage"
            let moved = "https://cdn.invalid/storage/"
            let old = Self.base
            #expect(try await publish("1.0", storage: storage, scratch: scratch, initialize: true).status == 0)
            #expect(try await publish("1.1", storage: storage, scratch: scratch).status == 0)
            let arguments = [
                "publish", "--storage", storage, "--content", SyncAgentCLITests.exampleStorage + "/1.2/RXCacheContent",
                "--version", "1.2", "--base-url", moved,
            ]
            let statusPath = storage + "/RXCacheConfig/cacheStatus.json"
            let before = try String(contentsOfFile: statusPath, encoding: .utf8)

            let dryRun = try await SyncAgentBinary.run(arguments + ["--dry-run"], scratch: scratch)
            #expect(dryRun.status == 0, "\(dryRun.stderr)")
            #expect(dryRun.stdout.hasPrefix("would publish 1.2 (minimal 1.1) over 1.1:"), "\(dryRun.stdout)")
            #expect(
                dryRun.stderr
                    == "warning: the base URL changed from \(old) to \(moved): clients configured with \(old) see 1.2 only if \(old) "
                    + "serves this storage too. The minimal version would be raised from 1.0 to 1.1, so clients below 1.1 restore from the archive: "
                    + "the change lists up to 1.1 name paths under \(old), which clients configured with \(moved) refuse. A mistyped base URL "
                    + "(another scheme, host, branch or folder) is the usual cause of an unintended change; if the storage did not move, "
                    + "pass --base-url \(old)\n")
            #expect(try String(contentsOfFile: statusPath, encoding: .utf8) == before)

            let published = try await SyncAgentBinary.run(
                arguments + ["--minimal", "1.0", "--quiet"], scratch: scratch)
            #expect(published.status == 0, "\(published.stderr)")
            #expect(published.stdout.isEmpty)
            #expect(
                published.stderr
                    == "warning: the base URL changed from \(old) to \(moved): clients configured with \(old) see 1.2 only if \(old) "
                    + "serves this storage too. --minimal 1.0 was raised to 1.1, so clients below 1.1 restore from the archive: "
                    + "the change lists up to 1.1 name paths under \(old), which clients configured with \(moved) refuse. A mistyped base URL "
                    + "(another scheme, host, branch or folder) is the usual cause of an unintended change; if the storage did not move, "
                    + "publish the next version with --base-url \(old)\n")
            let status = try String(contentsOfFile: statusPath, encoding: .utf8)
            #expect(
                status.contains(#""minimalCacheVersion" : "1.1""#) && status.contains(moved + "RXCacheContent.zip"),
                "\(status)")

            // The same command again: nothing to do, the raise still said.
            let again = try await SyncAgentBinary.run(arguments + ["--minimal", "1.0"], scratch: scratch)
            #expect(again.status == 0, "\(again.stderr)")
            #expect(
                again.stdout.hasPrefix("1.2 (minimal 1.1) is already published with this content: nothing to do"),
                "\(again.stdout)")
            #expect(
                again.stderr
                    == "warning: --minimal 1.0 was raised to 1.1: the change lists up to 1.1 name paths under another base URL "
                    + "than \(moved), which clients refuse, so clients below 1.1 restore from the archive\n")
            #expect(try String(contentsOfFile: statusPath, encoding: .utf8) == status)
        }
    }

    /// The library names the option at fault; the CLI names its flag.
    @Test(arguments: [
        (
            ["--content", "/nonexistent-content-folder"],
            "--content: the content folder /nonexistent-content-folder is not a folder"
        ),
        (["--minimal", "9.0"], "--minimal: the minimal version 9.0 is greater than the new version 1.0"),
    ])
    func aFailureBlamingAnOptionNamesItsFlag(override: [String], expected: String) async throws {
        try await withScratch { scratch in
            var arguments = [
                "publish", "--storage", scratch + "/storage", "--content",
                SyncAgentCLITests.exampleStorage + "/1.0/RXCacheContent",
                "--version", "1.0", "--base-url", Self.base, "--init",
            ]
            if let index = arguments.firstIndex(of: override[0]) {
                arguments[index + 1] = override[1]
            } else {
                arguments += override
            }
            let result = try await SyncAgentBinary.run(arguments, scratch: scratch)
            #expect(result.status == 6, "\(result.stderr)")
            #expect(result.stderr.hasPrefix("sync-agent: " + expected), "\(result.stderr)")
        }
    }

    /// Publishing the same version again with --sign-key re-signs its status (an expired
    /// signature renewed, an unsigned status signed), the rest of the storage untouched, and the
    /// expiry is never before the time the status was written, however short the lifetime.
    @Test func theSameVersionIsReSignedAndNoSignatureIsBornExpired() async throws {
        try await withScratch { scratch in
            let storage = scratch + "/storage"
            let key = scratch + "/key"
            #expect(try await SyncAgentBinary.run(["keygen", "--out", key], scratch: scratch).status == 0)
            #expect(try await publish("1.0", storage: storage, scratch: scratch, initialize: true).status == 0)
            let statusPath = storage + "/RXCacheConfig/cacheStatus.json"
            let archive = FileManager.default.contents(atPath: storage + "/RXCacheContent.zip")
            let list = FileManager.default.contents(
                atPath: storage + "/RXCacheConfig/listOfURLsToUpdatesByVersion.json")
            func expiry() throws -> Date? {
                let status = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: statusPath)))
                let text = ((status as? [String: Any])?["signature"] as? [String: Any])?["expires"] as? String
                return text.flatMap { ISO8601DateFormatter().date(from: $0) }
            }
            #expect(try expiry() == nil)
            func resign(days: String, dryRun: Bool = false) async throws -> CommandResult {
                try await SyncAgentBinary.run(
                    [
                        "publish", "--storage", storage, "--content",
                        SyncAgentCLITests.exampleStorage + "/1.0/RXCacheContent", "--version", "1.0",
                        "--base-url", Self.base, "--sign-key", key, "--signature-days", days,
                    ] + (dryRun ? ["--dry-run"] : []), scratch: scratch)
            }
            let dry = try await resign(days: "30", dryRun: true)
            #expect(dry.status == 0 && dry.stdout.contains("would re-sign its status"), "\(dry.stdout) \(dry.stderr)")
            #expect(try expiry() == nil, "a dry run writes nothing")

            let before = Date()
            // One hour and a fraction of a second: the shortest lifetime taken, rounded up.
            let short = try await resign(days: "0.0416667")
            #expect(short.status == 0, "\(short.stderr)")
            #expect(short.stdout.contains("re-signed its status (key id "), "\(short.stdout)")
            let first = try #require(try expiry())
            #expect(
                first >= before.addingTimeInterval(3_600), "the expiry is after the publish started, never rounded down"
            )

            let renewed = try await resign(days: "30")
            #expect(renewed.status == 0, "\(renewed.stderr)")
            let second = try #require(try expiry())
            #expect(second.timeIntervalSince(before) > 29 * 86_400)
            #expect(FileManager.default.contents(atPath: storage + "/RXCacheContent.zip") == archive)
            #expect(
                FileManager.default.contents(atPath: storage + "/RXCacheConfig/listOfURLsToUpdatesByVersion.json")
                    == list)
            // The re-signed status is what a trusting client accepts.
            try await withStorageServer(root: URL(fileURLWithPath: storage)) { server async throws in
                let synced = try await SyncAgentBinary.run(
                    [
                        "sync", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/content",
                        "--state", scratch + "/state.sqlite", "--trust-key", key + ".pub",
                    ], scratch: scratch)
                #expect(synced.status == 0, "\(synced.stderr)")
            }
        }
    }

    /// A user or password in --base-url would be written into the storage's public files: it is
    /// refused (exit 6, the secret not shown), and a refused --init leaves no folder behind.
    @Test(arguments: ["https://ghp_TOKEN123@publish.invalid/store/", "https://u:ghp_TOKEN123@publish.invalid/store/"])
    func credentialsInTheBaseURLAreRefusedAndARefusedInitLeavesNothing(base: String) async throws {
        try await withScratch { scratch in
            let storage = scratch + "/new/deeper/storage"
            let result = try await SyncAgentBinary.run(
                [
                    "publish", "--storage", storage, "--content",
                    SyncAgentCLITests.exampleStorage + "/1.0/RXCacheContent", "--version", "1.0", "--base-url", base,
                    "--init",
                ], scratch: scratch)
            #expect(result.status == 6, "\(result.stderr)")
            #expect(result.stderr.contains("--base-url") && result.stderr.contains("user or password"))
            #expect(!(result.stdout + result.stderr).contains("ghp_TOKEN123"))
            #expect(!FileManager.default.fileExists(atPath: scratch + "/new"))
            // Another refusal after the folders were made (the minimal above the version): none stay.
            let minimal = try await SyncAgentBinary.run(
                [
                    "publish", "--storage", storage, "--content",
                    SyncAgentCLITests.exampleStorage + "/1.0/RXCacheContent", "--version", "1.0", "--base-url",
                    Self.base, "--init", "--minimal", "1.1",
                ], scratch: scratch)
            #expect(minimal.status == 6, "\(minimal.stderr)")
            #expect(!FileManager.default.fileExists(atPath: scratch + "/new"))
        }
    }
}
