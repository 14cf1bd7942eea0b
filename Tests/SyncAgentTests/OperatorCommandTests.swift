import Foundation
import StorageServer
import Testing

/// `--version`, `reset` and `status --check`: the commands an operator reaches for when a
/// mirror needs a fresh start or a probe.
@Suite("sync-agent answers --version, resets a folder and checks its health", .timeLimit(.minutes(3)))
struct OperatorCommandTests {
    static let example = SyncAgentCLITests.exampleStorage

    struct Folder {
        var scratch: String
        var dir: String { scratch + "/content" }
        var state: String { scratch + "/state.sqlite" }
        var options: [String] { ["--dir", dir, "--state", state] }

        func run(_ arguments: [String]) async throws -> CommandResult {
            try await SyncAgentBinary.run(arguments, scratch: scratch)
        }

        func sync(_ server: StorageServer) async throws -> CommandResult {
            try await run(["sync", "--base-url", server.baseURL!.absoluteString] + options)
        }

        func status() async throws -> [String: Any] {
            let result = try await run(["status", "--json"] + options)
            #expect(result.status == 0, "stderr: \(result.stderr)")
            return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        }
    }

    @Test func anHTTPPortInUseIsAOneLineConfigurationErrorBeforeAnyStorageStarts() async throws {
        try await withScratch { scratch in
            let folder = Folder(scratch: scratch)
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.2")) { server async throws in
                // The storage server's own port is taken.
                let taken = try #require(server.baseURL?.port)
                let result = try await folder.run(
                    ["watch", "--base-url", server.baseURL!.absoluteString, "--http", "127.0.0.1:\(taken)"]
                        + folder.options)
                #expect(result.status == 6, "stderr: \(result.stderr)")
                let lines = result.stderr.split(separator: "\n")
                #expect(lines.count == 1, "stderr: \(result.stderr)")
                #expect(
                    result.stderr.hasPrefix("sync-agent: --http 127.0.0.1:\(taken): "), "stderr: \(result.stderr)")
                #expect(result.stderr.contains("another process listens on that port"), "stderr: \(result.stderr)")
                #expect(!FileManager.default.fileExists(atPath: folder.dir), "no storage started")
                #expect(server.requests().isEmpty, "no storage asked")
            }
        }
    }

    @Test func versionPrintsASemanticVersionAndExitsZero() async throws {
        try await withScratch { scratch in
            let result = try await SyncAgentBinary.run(["--version"], scratch: scratch)
            #expect(result.status == 0, "stderr: \(result.stderr)")
            #expect(result.stdout.wholeMatch(of: /\d+\.\d+\.\d+\n/) != nil, "stdout: \(result.stdout)")
            #expect(result.stderr.isEmpty)
            // publish's own --version still parses as publish's: a missing option is named, not the tool's version printed.
            let publish = try await SyncAgentBinary.run(["publish", "--version", "1.0"], scratch: scratch)
            #expect(publish.status == 64, "stdout: \(publish.stdout) stderr: \(publish.stderr)")
            #expect(publish.stderr.contains("--storage"))
        }
    }

    @Test func resetRemovesTheFolderAndItsStateAndTheNextSyncRestoresIt() async throws {
        try await withScratch { scratch in
            let folder = Folder(scratch: scratch)
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.4")) { server async throws in
                #expect(try await folder.sync(server).status == 0)
                #expect(FileManager.default.fileExists(atPath: folder.dir + "/README.txt"))

                let reset = try await folder.run(["reset"] + folder.options)
                #expect(reset.status == 0, "stderr: \(reset.stderr)")
                #expect(
                    reset.stdout.hasPrefix("removed \(folder.dir) ") && reset.stdout.split(separator: "\n").count == 1,
                    "stdout: \(reset.stdout)")
                #expect(!FileManager.default.fileExists(atPath: folder.dir))
                let forgotten = try await folder.status()
                #expect(forgotten["version"] is NSNull)
                #expect(forgotten["lastSuccess"] is NSNull)
                #expect((forgotten["history"] as? [Any])?.isEmpty == true)

                #expect(try await folder.sync(server).status == 0)
                #expect(try await folder.status()["version"] as? String == "1.4")
                let restored = try await folder.status()["lastAttempt"] as? [String: Any]
                #expect(
                    restored?["kind"] as? String == "restore",
                    "the next sync restores from the archive: \(String(describing: restored))")
                #expect(FileManager.default.fileExists(atPath: folder.dir + "/README.txt"))
            }
        }
    }

    @Test func aRefusedRollbackNamesTheResetCommandWhichGetsPastIt() async throws {
        try await withScratch { scratch in
            let folder = Folder(scratch: scratch)
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.4")) { server async throws in
                #expect(try await folder.sync(server).status == 0)
                server.setRoot(URL(fileURLWithPath: Self.example + "/1.2"))
                let refused = try await folder.sync(server)
                #expect(refused.status == 4, "stderr: \(refused.stderr)")
                #expect(
                    refused.stderr.contains("roll back")
                        && refused.stderr.contains("`sync-agent reset` with the same --dir and --state"),
                    "stderr: \(refused.stderr)")

                #expect(try await folder.run(["reset"] + folder.options).status == 0)
                #expect(try await folder.sync(server).status == 0)
                #expect(try await folder.status()["version"] as? String == "1.2")
            }
        }
    }

    @Test func resetLeavesAFolderAloneThatNoStateKnows() async throws {
        try await withScratch { scratch in
            let folder = Folder(scratch: scratch)
            try FileManager.default.createDirectory(atPath: folder.dir, withIntermediateDirectories: true)
            try Data("mine".utf8).write(to: URL(fileURLWithPath: folder.dir + "/notes.txt"))
            let result = try await folder.run(["reset"] + folder.options)
            #expect(result.status == 0, "stderr: \(result.stderr)")
            #expect(result.stdout.contains("nothing removed"), "stdout: \(result.stdout)")
            #expect(try String(contentsOfFile: folder.dir + "/notes.txt", encoding: .utf8) == "mine")
            #expect(!FileManager.default.fileExists(atPath: folder.state), "reset creates no database")
        }
    }

    /// A sync refused a folder that is not empty and was never synced, and recorded the attempt;
    /// `reset` then deleted the folder it refused (outside audit). It is left alone, as the
    /// sync left it, and the refused attempt is forgotten.
    @Test func resetLeavesAloneAFolderASyncRefused() async throws {
        try await withScratch { scratch in
            let folder = Folder(scratch: scratch)
            try FileManager.default.createDirectory(atPath: folder.dir, withIntermediateDirectories: true)
            try Data("mine".utf8).write(to: URL(fileURLWithPath: folder.dir + "/notes.txt"))
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.2")) { server async throws in
                let refused = try await folder.sync(server)
                #expect(refused.status == 6, "stderr: \(refused.stderr)")
                #expect(FileManager.default.fileExists(atPath: folder.state), "the refusal is recorded")
                let result = try await folder.run(["reset"] + folder.options)
                #expect(result.status == 0, "stderr: \(result.stderr)")
                #expect(result.stdout.contains("nothing removed"), "stdout: \(result.stdout)")
                #expect(try String(contentsOfFile: folder.dir + "/notes.txt", encoding: .utf8) == "mine")
                #expect(try await folder.status()["lastError"] is NSNull, "the refused attempt is forgotten")
                // Once synced (the user allowed it), a reset deletes the folder as before.
                #expect(
                    try await folder.run(
                        ["sync", "--force", "--base-url", server.baseURL!.absoluteString] + folder.options
                    ).status == 0)
                #expect(try await folder.run(["reset"] + folder.options).status == 0)
                #expect(!FileManager.default.fileExists(atPath: folder.dir + "/notes.txt"))
            }
        }
    }

    @Test func resetRefusesAStateDatabaseOfAnotherFolder() async throws {
        try await withScratch { scratch in
            let folder = Folder(scratch: scratch)
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.2")) { server async throws in
                #expect(try await folder.sync(server).status == 0)
                let other = scratch + "/other"
                try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
                try Data("mine".utf8).write(to: URL(fileURLWithPath: other + "/notes.txt"))
                let result = try await folder.run(["reset", "--dir", other, "--state", folder.state])
                #expect(result.status == 6, "stderr: \(result.stderr)")
                #expect(result.stderr.contains("belongs to \(folder.dir)"), "stderr: \(result.stderr)")
                #expect(FileManager.default.fileExists(atPath: other + "/notes.txt"))
                #expect(try await folder.status()["version"] as? String == "1.2", "the state is kept")
            }
        }
    }

    /// A sync pointed at another folder's --state is refused (exit 6) and recorded nowhere: the
    /// other folder's healthy mirror does not turn failing (`status --check` stays 0).
    @Test func aSyncRefusedForAnotherFoldersStateMarksNothingFailed() async throws {
        try await withScratch { scratch in
            let folder = Folder(scratch: scratch)
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.2")) { server async throws in
                #expect(try await folder.sync(server).status == 0)
                #expect(try await folder.run(["status", "--check"] + folder.options).status == 0)
                let refused = try await folder.run([
                    "sync", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/other", "--state",
                    folder.state,
                ])
                #expect(refused.status == 6, "stderr: \(refused.stderr)")
                #expect(refused.stderr.contains("belongs to \(folder.dir)"), "stderr: \(refused.stderr)")
                let check = try await folder.run(["status", "--check"] + folder.options)
                #expect(check.status == 0, "stdout: \(check.stdout) stderr: \(check.stderr)")
                #expect(try await folder.status()["consecutiveFailures"] as? Int ?? 0 == 0)
            }
        }
    }

    @Test func checkPassesForARecentSuccess() async throws {
        try await withScratch { scratch in
            let folder = Folder(scratch: scratch)
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.2")) { server async throws in
                #expect(try await folder.sync(server).status == 0)
                for extra in [[], ["--max-age", "1h"], ["--max-age", "1d"], ["--json"]] {
                    let result = try await folder.run(["status", "--check"] + extra + folder.options)
                    #expect(result.status == 0, "\(extra) stderr: \(result.stderr)")
                    #expect(result.stderr.isEmpty)
                    #expect(result.stdout.contains("1.2"), "the usual status: \(result.stdout)")
                }
            }
        }
    }

    @Test func checkFailsWhenTheLastAttemptFailed() async throws {
        try await withScratch { scratch in
            let folder = Folder(scratch: scratch)
            try FileManager.default.createDirectory(atPath: scratch + "/empty", withIntermediateDirectories: true)
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.2")) { server async throws in
                #expect(try await folder.sync(server).status == 0)
                server.setRoot(URL(fileURLWithPath: scratch + "/empty"))
                #expect(try await folder.sync(server).status == 3)
                let result = try await folder.run(["status", "--check", "--max-age", "1h"] + folder.options)
                #expect(result.status == 9, "stderr: \(result.stderr)")
                #expect(result.stdout.contains("state:        failed"), "the usual status first: \(result.stdout)")
                #expect(
                    result.stderr.hasPrefix("sync-agent: check failed: the last attempt failed (network)")
                        && result.stderr.split(separator: "\n").count == 1, "stderr: \(result.stderr)")
                #expect(
                    try await folder.run(["status"] + folder.options).status == 0,
                    "without --check status still exits 0")
            }
        }
    }

    @Test func checkFailsWhenTheLastSuccessIsOlderThanMaxAge() async throws {
        try await withScratch { scratch in
            let folder = Folder(scratch: scratch)
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.2")) { server async throws in
                #expect(try await folder.sync(server).status == 0)
                try await Task.sleep(for: .milliseconds(1_100))
                let old = try await folder.run(["status", "--check", "--max-age", "1s"] + folder.options)
                #expect(old.status == 9, "stderr: \(old.stderr)")
                #expect(old.stderr.contains("over --max-age 1s"), "stderr: \(old.stderr)")
                #expect(try await folder.run(["status", "--check", "--max-age", "15m"] + folder.options).status == 0)
                // Bare seconds, as --interval and --full-check-interval take them.
                #expect(try await folder.run(["status", "--check", "--max-age", "3600"] + folder.options).status == 0)
                #expect(try await folder.run(["status", "--check", "--max-age", "1"] + folder.options).status == 9)
            }
        }
    }

    @Test func checkFailsForAFolderNeverSynced() async throws {
        try await withScratch { scratch in
            let folder = Folder(scratch: scratch)
            let result = try await folder.run(["status", "--check"] + folder.options)
            #expect(result.status == 9, "stderr: \(result.stderr)")
            #expect(result.stdout.contains("none (never synced)"))
            #expect(result.stderr.contains("never synced successfully"), "stderr: \(result.stderr)")
        }
    }

    @Test(arguments: ["m", "0", "0s", "-5m", "1.5h", "2w", "1 d", "15M", "99999999999999999d", "99999999999999999999"])
    func aMaxAgeThatIsNotADurationIsRefused(_ value: String) async throws {
        try await withScratch { scratch in
            let folder = Folder(scratch: scratch)
            let result = try await folder.run(["status", "--check", "--max-age=\(value)"] + folder.options)
            #expect(result.status == 6, "\(value): stderr: \(result.stderr)")
            #expect(result.stderr.contains("--max-age '\(value)' is not a duration"), "stderr: \(result.stderr)")
            #expect(result.stdout.isEmpty, "refused before any status is printed")
        }
    }

    @Test func maxAgeWithoutCheckIsRefused() async throws {
        try await withScratch { scratch in
            let result = try await Folder(scratch: scratch).run(
                ["status", "--max-age", "1h"] + Folder(scratch: scratch).options)
            #expect(result.status == 6, "stderr: \(result.stderr)")
            #expect(result.stderr.contains("--max-age needs --check"))
        }
    }

    /// With stdout closed by the parent (`>&-`), the runtime may have opened a read-only file on
    /// descriptor 1 before `main`: what a command prints is dropped and its exit code is its own
    /// (`status` exited 5, "cannot write to stdout: Invalid argument").
    @Test func aClosedStdoutDropsTheOutputAndKeepsTheExitCode() async throws {
        try await withScratch { scratch in
            let err = scratch + "/closed.err"
            let line = "exec '\(SyncAgentBinary.path)' status --dir '\(scratch)/m' --state '\(scratch)/s.db' >&-"
            let status = try await ChildProcess.run("/bin/bash", ["-c", line], stdout: scratch + "/out", stderr: err)
            let stderr = (try? String(contentsOfFile: err, encoding: .utf8)) ?? ""
            #expect(status == 0, "\(stderr)")
            #expect(!stderr.contains("cannot write to stdout"), "\(stderr)")
        }
    }
}
