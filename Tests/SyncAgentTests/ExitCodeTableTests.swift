import CLinux
import ContentSync
import Foundation
import StorageServer
import Testing

@testable import SyncAgent

/// Every row of the README's exit-code table, against the real binary: each code comes from the
/// kind of failure the table names, so scripts can tell whose fault a failure was.
@Suite("sync-agent exits with the README's code for each kind of failure", .timeLimit(.minutes(3)))
struct ExitCodeTableTests {
    static let example = SyncAgentCLITests.exampleStorage

    func sync(_ base: URL, _ scratch: String, _ extra: [String] = []) async throws -> CommandResult {
        try await SyncAgentBinary.run(
            [
                "sync", "--base-url", base.absoluteString, "--dir", scratch + "/content",
                "--state", scratch + "/state.sqlite",
            ] + extra, scratch: scratch)
    }

    func expect(
        _ result: CommandResult, exits code: Int32, mentioning text: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(result.status == code, "stderr: \(result.stderr)", sourceLocation: sourceLocation)
        #expect(
            result.stderr.hasPrefix("sync-agent: ") && result.stderr.split(separator: "\n").count == 1,
            "one line on stderr: \(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stderr.contains(text), "stderr: \(result.stderr)", sourceLocation: sourceLocation)
    }

    /// Starts a sync of `scratch/content` whose archive download the server holds for 10 minutes
    /// (the tests end it with a signal), and returns once the archive was asked for: the update
    /// is running, holding its locks.
    func startHeldSync(_ server: StorageServer, _ scratch: String) async throws -> ChildProcess {
        server.injectFault(.delay(seconds: 600), forPath: "/RXCacheContent.zip")
        let process = try ChildProcess(
            SyncAgentBinary.path,
            [
                "sync", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/content",
                "--state", scratch + "/state.sqlite",
            ], stderr: scratch + "/err")
        // A held request is logged only when answered: its arrival is what shows the update runs.
        for _ in 0..<600 where server.requestsInProgress(forPath: "/RXCacheContent.zip") == 0 {
            try await Task.sleep(for: .milliseconds(50))
        }
        if server.requestsInProgress(forPath: "/RXCacheContent.zip") != 1 {
            process.send(SIGKILL)
            _ = await process.exitStatus()
            Issue.record("the held sync never asked for the archive: \(server.requests().map(\.path))")
            throw CancellationError()
        }
        return process
    }

    /// A copy of an ExampleStorage version that a test may damage.
    func storageCopy(_ version: String, _ scratch: String) throws -> String {
        let path = scratch + "/storage-\(version)"
        try FileManager.default.copyItem(atPath: Self.example + "/" + version, toPath: path)
        return path
    }

    @Test func zeroWhenTheFolderHoldsTheActualVersion() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.2")) { server async throws in
                #expect(try await sync(server.baseURL!, scratch).status == 0)
                #expect(try await sync(server.baseURL!, scratch).status == 0, "and when already up to date")
            }
        }
    }

    @Test func threeForTheNetwork() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: scratch)) { server async throws in
                expect(
                    try await sync(server.baseURL!.appendingPathComponent("nowhere/"), scratch), exits: 3,
                    mentioning: "404")
            }
        }
    }

    @Test func fourForAMalformedStatus() async throws {
        try await withScratch { scratch in
            let storage = try storageCopy("1.2", scratch)
            try Data("{\"actualCacheVersion\": \"\"".utf8).write(
                to: URL(fileURLWithPath: storage + "/RXCacheConfig/cacheStatus.json"))
            try await withStorageServer(root: URL(fileURLWithPath: storage)) { server async throws in
                expect(try await sync(server.baseURL!, scratch), exits: 4, mentioning: "cacheStatus.json")
            }
        }
    }

    @Test func fourForAnEmptyVersionSaidAsEmpty() async throws {
        try await withScratch { scratch in
            let storage = try storageCopy("1.2", scratch)
            let path = storage + "/RXCacheConfig/cacheStatus.json"
            var status =
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as! [String: Any]
            status["actualCacheVersion"] = ""
            try JSONSerialization.data(withJSONObject: status).write(to: URL(fileURLWithPath: path))
            try await withStorageServer(root: URL(fileURLWithPath: storage)) { server async throws in
                let result = try await sync(server.baseURL!, scratch)
                expect(result, exits: 4, mentioning: "\"actualCacheVersion\" is empty")
                #expect(!result.stderr.contains("found a string"))
            }
        }
    }

    @Test func fourForAnIntegrityMismatch() async throws {
        try await withScratch { scratch in
            let storage = try storageCopy("1.2", scratch)
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.0")) { server async throws in
                #expect(try await sync(server.baseURL!, scratch).status == 0)
                // docs/Guide Notes.md is replayed in 1.2 with its hash published; serve other bytes.
                let tampered = try #require(
                    FileManager.default.enumerator(atPath: storage + "/RXCacheContent")?.allObjects as? [String]
                )
                .filter { $0.hasSuffix(".md") }
                for file in tampered {
                    try Data("tampered".utf8).write(to: URL(fileURLWithPath: storage + "/RXCacheContent/" + file))
                }
                server.setRoot(URL(fileURLWithPath: storage))
                expect(try await sync(server.baseURL!, scratch), exits: 4, mentioning: "integrity")
            }
        }
    }

    @Test func fourForAMissingSignatureUnderTrustKey() async throws {
        try await withScratch { scratch in
            let keygen = try await SyncAgentBinary.run(
                ["keygen", "--out", scratch + "/publisher.key"], scratch: scratch)
            #expect(keygen.status == 0)
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.2")) { server async throws in
                expect(
                    try await sync(server.baseURL!, scratch, ["--trust-key", scratch + "/publisher.key.pub"]),
                    exits: 4, mentioning: "signed")
            }
        }
    }

    @Test func fourForAFileOverItsDeclaredSize() async throws {
        try await withScratch { scratch in
            let storage = try storageCopy("1.2", scratch)
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.0")) { server async throws in
                #expect(try await sync(server.baseURL!, scratch).status == 0)
                // Every .md the 1.2 lists fetch grows past the size they declare.
                for file in try #require(
                    FileManager.default.enumerator(atPath: storage + "/RXCacheContent")?.allObjects as? [String])
                where file.hasSuffix(".md") {
                    try Data(repeating: 0x41, count: 100_000).write(
                        to: URL(fileURLWithPath: storage + "/RXCacheContent/" + file))
                }
                server.setRoot(URL(fileURLWithPath: storage))
                expect(try await sync(server.baseURL!, scratch), exits: 4, mentioning: "declared")
            }
        }
    }

    @Test func fiveForTheLocalFilesystemOrItsState() async throws {
        try await withScratch { scratch in
            try Data("this is not a database, it is a text file of some length".utf8)
                .write(to: URL(fileURLWithPath: scratch + "/state.sqlite"))
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.2")) { server async throws in
                expect(try await sync(server.baseURL!, scratch), exits: 5, mentioning: "state database")
            }
        }
    }

    @Test func sixForTheConfiguration() async throws {
        try await withScratch { scratch in
            expect(
                try await sync(URL(string: "ftp://example.com/storage/")!, scratch), exits: 6, mentioning: "base URL")
            // A port no TCP connection can have is the option's fault, not the network's (3).
            expect(
                try await sync(URL(string: "http://127.0.0.1:199010/storage/")!, scratch), exits: 6,
                mentioning: "outside 1–65535")
            let inside = try await SyncAgentBinary.run(
                [
                    "sync", "--base-url", "http://127.0.0.1:9/", "--dir", scratch + "/content",
                    "--state", scratch + "/content/state.sqlite",
                ], scratch: scratch)
            expect(inside, exits: 6, mentioning: "inside the content folder")
            // Out-of-range --concurrency, as a config file's `concurrency` is refused.
            // A value that is no whole number exits 6 too, not ArgumentParser's 64.
            for value in ["0", "-1", "65", "9223372036854775807", "9223372036854775808", "1e3", "eight"] {
                expect(
                    try await sync(URL(string: "http://127.0.0.1:9/")!, scratch, ["--concurrency=\(value)"]), exits: 6,
                    mentioning: "--concurrency '\(value)' is out of range")
            }
            // publish's bad --base-url is a bad option value too, not a bad storage.
            try FileManager.default.createDirectory(atPath: scratch + "/new", withIntermediateDirectories: true)
            let publish = try await SyncAgentBinary.run(
                [
                    "publish", "--storage", scratch + "/storage", "--content", scratch + "/new", "--version", "1.0",
                    "--base-url", "ftp://example.com/storage/", "--dry-run",
                ], scratch: scratch)
            expect(publish, exits: 6, mentioning: "--base-url")
            // A symlink in the content: exit 6, writing nothing (docs/protocol.md §8.5).
            #expect(symlink("/etc/passwd", scratch + "/new/pw.txt") == 0)
            let linked = try await SyncAgentBinary.run(
                [
                    "publish", "--init", "--storage", scratch + "/storage", "--content", scratch + "/new", "--version",
                    "1.0", "--base-url", "http://127.0.0.1:9/s/",
                ], scratch: scratch)
            expect(linked, exits: 6, mentioning: "is a symlink or special file")
            #expect(!FileManager.default.fileExists(atPath: scratch + "/storage/RXCacheConfig"))
        }
    }

    @Test func sixWhenAnotherUpdateOfTheFolderRuns() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.2")) { server async throws in
                let process = try await startHeldSync(server, scratch)
                async let status = process.exitStatus()
                // Another state file, the same folder: refused at once, naming how to find the holder.
                let second = try await SyncAgentBinary.run(
                    [
                        "sync", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/content",
                        "--state", scratch + "/other.sqlite",
                    ], scratch: scratch)
                expect(second, exits: 6, mentioning: "another update of")
                #expect(second.stderr.contains("sync-agent status"), "the CLI's own hint: \(second.stderr)")
                let running = try await SyncAgentBinary.run(
                    ["status", "--dir", scratch + "/content", "--state", scratch + "/state.sqlite"],
                    scratch: scratch)
                #expect(running.stdout.contains("is updating it now"), "status: \(running.stdout)")
                let json = try await SyncAgentBinary.run(
                    ["status", "--dir", scratch + "/content", "--state", scratch + "/state.sqlite", "--json"],
                    scratch: scratch)
                let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
                #expect(object?["state"] as? String == "working", "status --json: \(json.stdout)")
                #expect(
                    (object?["runningUpdate"] as? [String: Any])?["processID"] as? Int != nil,
                    "status --json: \(json.stdout)")
                process.send(SIGINT)
                #expect(await status == 130)
                server.clearFaults()
            }
        }
    }

    @Test func sixWhenAResetMeetsARunningUpdate() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.2")) { server async throws in
                let process = try await startHeldSync(server, scratch)
                async let status = process.exitStatus()
                let reset = try await SyncAgentBinary.run(
                    ["reset", "--dir", scratch + "/content", "--state", scratch + "/state.sqlite"],
                    scratch: scratch)
                expect(reset, exits: 6, mentioning: "another update of")
                #expect(FileManager.default.fileExists(atPath: scratch + "/state.sqlite"), "nothing was reset")
                process.send(SIGINT)
                #expect(await status == 130)
                server.clearFaults()
            }
        }
    }

    @Test func nineWhenAStatusCheckFails() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: scratch)) { server async throws in
                #expect(try await sync(server.baseURL!.appendingPathComponent("nowhere/"), scratch).status == 3)
                let check = try await SyncAgentBinary.run(
                    ["status", "--check", "--dir", scratch + "/content", "--state", scratch + "/state.sqlite"],
                    scratch: scratch)
                expect(check, exits: 9, mentioning: "check failed")
                // An attempt was made, but the storage never answered: not "never" checked.
                let text = try await SyncAgentBinary.run(
                    ["status", "--dir", scratch + "/content", "--state", scratch + "/state.sqlite"], scratch: scratch)
                #expect(text.stdout.contains("last check:   never answered (see the last attempt)"), "\(text.stdout)")
                #expect(text.stdout.contains("last attempt: "), "\(text.stdout)")
            }
        }
    }

    /// Only `watch` with a config file's pre-switch hooks meets a veto, and it exits with the
    /// error once `--max-failures` checks in a row failed: the built binary's exit 10 is checked
    /// by `WatchConfigTests`' hook test (`max-failures: 1`); the mapping itself is checked here.
    @Test func tenWhenAPreSwitchHookVetoes() {
        let failure = CLIFailure(
            SyncError(
                code: .vetoed,
                message: "the switch to version 1.4 was vetoed: pre-switch hook 'check' exited with status 3"))
        #expect(failure.code == 10)
        #expect(failure.message.contains("pre-switch hook 'check'"))
    }

    @Test func sixtyFourForACommandLineThatDoesNotParse() async throws {
        try await withScratch { scratch in
            let result = try await SyncAgentBinary.run(
                [
                    "sync", "--base-url", "http://127.0.0.1:9/", "--dir", scratch + "/content",
                    "--no-such-option",
                ], scratch: scratch)
            #expect(result.status == 64, "stderr: \(result.stderr)")
            #expect(result.stderr.contains("--no-such-option"), "stderr: \(result.stderr)")
            // A missing --dir, for sync and for watch without --config: 64, with the usage.
            for command in ["sync", "watch"] {
                let missing = try await SyncAgentBinary.run(
                    [command, "--base-url", "http://127.0.0.1:9/"], scratch: scratch)
                #expect(missing.status == 64, "\(command) stderr: \(missing.stderr)")
                #expect(missing.stderr.contains("missing --dir"), "\(command) stderr: \(missing.stderr)")
                #expect(missing.stderr.contains("Usage: sync-agent \(command)"), "\(command) stderr: \(missing.stderr)")
            }
        }
    }

    @Test func oneHundredThirtyWhenInterrupted() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.2")) { server async throws in
                let process = try await startHeldSync(server, scratch)
                async let status = process.exitStatus()
                process.send(SIGINT)
                #expect(await status == 130)
                server.clearFaults()
            }
        }
    }

    @Test func oneForAnythingElse() async throws {
        try await withScratch { scratch in
            // A port that is taken: nothing the table names more specifically.
            try await withStorageServer(root: URL(fileURLWithPath: scratch)) { server async throws in
                let port = server.baseURL!.port!
                // A real storage, so the one line on stderr is the failure (no "not a storage" warning).
                let result = try await SyncAgentBinary.run(
                    ["serve", Self.example + "/1.2", "--port", "\(port)"], scratch: scratch)
                expect(result, exits: 1, mentioning: "serving")
                // The reason, not the failed call's Swift value (outside audit).
                #expect(result.stderr.contains("Address already in use"), "\(result.stderr)")
                #expect(!result.stderr.contains("ListenFailure"), "\(result.stderr)")
            }
        }
    }

    @Test func sevenWhenVerifyFindsDifferences() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.2")) { server async throws in
                #expect(try await sync(server.baseURL!, scratch).status == 0)
                try FileManager.default.createSymbolicLink(
                    atPath: scratch + "/content/link", withDestinationPath: "/etc/passwd")
                let verify = ["verify", "--dir", scratch + "/content", "--state", scratch + "/state.sqlite"]
                let found = try await SyncAgentBinary.run(verify, scratch: scratch)
                expect(found, exits: 7, mentioning: "difference")
                #expect(found.stdout.contains("extra symlink link"))
                #expect(try await SyncAgentBinary.run(verify + ["--repair"], scratch: scratch).status == 0)
                #expect(try await SyncAgentBinary.run(verify, scratch: scratch).status == 0)
                #expect(!FileManager.default.fileExists(atPath: scratch + "/content/link"))
            }
        }
    }
}
