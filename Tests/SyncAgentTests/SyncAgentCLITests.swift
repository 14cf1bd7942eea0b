import Foundation
import StorageServer
import Testing

/// The CLI contract that acceptance checks rely on.
@Suite("sync-agent keeps its command-line contract", .timeLimit(.minutes(3)))
struct SyncAgentCLITests {
    static let exampleStorage: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.appendingPathComponent("ExampleStorage/versions").path
    }()

    func statusJSON(_ scratch: String, dir: String, state: String) async throws -> [String: Any] {
        let result = try await SyncAgentBinary.run(
            ["status", "--dir", dir, "--state", state, "--json"], scratch: scratch)
        #expect(result.status == 0)
        return try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
    }

    /// `--verbose` says where the time went: a line per phase as it ends, and one `phases:` line
    /// on stderr after the summary; without it, stderr stays empty.
    @Test func syncVerbosePrintsWhereTheTimeWentOnStderr() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: Self.exampleStorage + "/1.2")) { server in
                let arguments = [
                    "sync", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/content", "--state",
                    scratch + "/state.sqlite",
                ]
                let verbose = try await SyncAgentBinary.run(arguments + ["--verbose"], scratch: scratch)
                #expect(verbose.status == 0, "stderr: \(verbose.stderr)")
                #expect(verbose.stdout.hasPrefix("restored 1.2 from the archive"))
                let line = try #require(verbose.stderr.split(separator: "\n").last { $0.hasPrefix("phases: ") })
                for phase in ["recover", "local check", "status", "archive", "tree check", "switch"] {
                    #expect(line.contains("\(phase) "), "\(line)")
                }
                #expect(line.range(of: #"\(total \d+\.\d{3} s\)$"#, options: .regularExpression) != nil, "\(line)")
                #expect(verbose.stderr.contains("phase finished"), "\(verbose.stderr)")

                let quiet = try await SyncAgentBinary.run(arguments, scratch: scratch)
                #expect(quiet.status == 0 && quiet.stdout.hasPrefix("up to date at 1.2"))
                #expect(quiet.stderr.isEmpty, "\(quiet.stderr)")
            }
        }
    }

    @Test func syncPrintsOneSummaryLineOrNothingWithQuietAndStatusReportsTheVersion() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: Self.exampleStorage + "/1.4")) { server in
                let dir = scratch + "/content"
                let state = scratch + "/state.sqlite"
                let before = try await statusJSON(scratch, dir: dir, state: state)
                #expect(before["version"] is NSNull)
                #expect(!FileManager.default.fileExists(atPath: state), "status does not create the database")

                let result = try await SyncAgentBinary.run(
                    ["sync", "--base-url", server.baseURL!.absoluteString, "--dir", dir, "--state", state],
                    scratch: scratch)
                #expect(result.status == 0, "stderr: \(result.stderr)")
                #expect(
                    result.stdout.hasPrefix("restored 1.4 from the archive")
                        && result.stdout.split(separator: "\n").count == 1,
                    "not a TTY: one summary line and no bar: \(result.stdout)")
                #expect(result.stderr.isEmpty)
                let quiet = try await SyncAgentBinary.run(
                    ["sync", "--base-url", server.baseURL!.absoluteString, "--dir", dir, "--state", state, "--quiet"],
                    scratch: scratch)
                #expect(quiet.status == 0 && quiet.stdout.isEmpty && quiet.stderr.isEmpty, "--quiet prints nothing")
                let after = try await statusJSON(scratch, dir: dir, state: state)
                #expect(after["version"] as? String == "1.4")
                #expect(after["state"] as? String == "succeeded")
                #expect(after["lastError"] is NSNull)
                #expect(after["lastCheck"] is String)
                #expect(FileManager.default.fileExists(atPath: dir + "/README.txt"))
            }
        }
    }

    /// A repair is reported: the summary counts the repaired files and each warning goes to
    /// stderr on its own line, with --quiet too.
    @Test func aRepairIsReportedOnStdoutAndEachWarningOnStderr() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: Self.exampleStorage + "/1.2")) { server in
                let dir = scratch + "/content"
                let arguments = [
                    "sync", "--base-url", server.baseURL!.absoluteString, "--dir", dir, "--state",
                    scratch + "/state.sqlite",
                ]
                let first = try await SyncAgentBinary.run(arguments, scratch: scratch)
                #expect(first.status == 0, "stderr: \(first.stderr)")
                #expect(first.stderr.isEmpty, "no warning for a clean restore: \(first.stderr)")
                // Drift the twin never saw: a folder of 1.2 replaced by a file. Without the twin,
                // the replay links from the drifted folder and must repair it.
                try FileManager.default.removeItem(atPath: dir + "/docs/api/v2")
                try "not a folder".write(toFile: dir + "/docs/api/v2", atomically: false, encoding: .utf8)
                try FileManager.default.removeItem(atPath: scratch + "/.content.content-sync/retired")
                server.setRoot(URL(fileURLWithPath: Self.exampleStorage + "/1.4"))
                let second = try await SyncAgentBinary.run(arguments + ["--quiet"], scratch: scratch)
                #expect(second.status == 0, "stderr: \(second.stderr)")
                #expect(second.stdout.isEmpty, "--quiet: no summary")
                let warnings = second.stderr.split(separator: "\n").filter { $0.hasPrefix("warning: ") }
                #expect(warnings.contains { $0.contains("repaired") }, "\(second.stderr)")
                let status = try await statusJSON(scratch, dir: dir, state: scratch + "/state.sqlite")
                #expect(status["version"] as? String == "1.4")
            }
        }
    }

    @Test func aFailedSyncExitsNonZeroWithOneLineOnStderr() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: scratch)) { server in
                let result = try await SyncAgentBinary.run(
                    [
                        "sync", "--base-url", server.baseURL!.absoluteString + "nowhere/", "--dir",
                        scratch + "/content",
                        "--state", scratch + "/state.sqlite",
                    ], scratch: scratch)
                #expect(result.status == 3)
                let lines = result.stderr.split(separator: "\n")
                #expect(lines.count == 1)
                #expect(lines.first?.hasPrefix("sync-agent: ") == true)
                #expect(result.stderr.contains("404") && result.stderr.contains("cacheStatus.json"))
                let status = try await statusJSON(scratch, dir: scratch + "/content", state: scratch + "/state.sqlite")
                #expect(status["state"] as? String == "failed")
                #expect((status["lastError"] as? String)?.contains("404") == true)
                #expect(status["lastErrorCode"] as? String == "network")
            }
        }
    }

    @Test func badArgumentsAreRefusedWithUsage() async throws {
        try await withScratch { scratch in
            let result = try await SyncAgentBinary.run(["sync", "--dir", scratch], scratch: scratch)
            #expect(result.status != 0)
            #expect(result.stderr.contains("--base-url"))
        }
    }

    @Test func serveServesAStorageThatSyncMirrors() async throws {
        try await withScratch { scratch in
            let (process, url) = try await SyncAgentBinary.serve(Self.exampleStorage + "/1.2", scratch: scratch)
            // Stopped by its PID, and reaped on a thread of its own (never a cooperative one).
            async let served = process.exitStatus()
            let result: CommandResult
            do {
                result = try await SyncAgentBinary.run(
                    [
                        "sync", "--base-url", url.absoluteString, "--dir", scratch + "/content",
                        "--state", scratch + "/state.sqlite", "--verbose",
                    ], scratch: scratch)
            } catch {
                process.send(SIGKILL)
                _ = await served
                throw error
            }
            process.send(SIGKILL)
            _ = await served
            #expect(url.host == "127.0.0.1")
            #expect(result.status == 0, "stderr: \(result.stderr)")
            #expect(result.stdout.contains("restored 1.2"))
            #expect(result.stderr.contains("restoring from the archive"), "--verbose logs to stderr")
        }
    }
}

@Suite("sync-agent watch runs as a daemon", .timeLimit(.minutes(3)))
struct SyncAgentWatchTests {
    func version(_ scratch: String) async throws -> String? {
        let result = try await SyncAgentBinary.run(
            ["status", "--dir", scratch + "/content", "--state", scratch + "/state.sqlite", "--json"],
            scratch: scratch)
        let object = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        return object?["version"] as? String
    }

    @Test func watchFollowsNewVersionsAndStopsGracefullyOnSIGTERM() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.2")) {
                server in
                let log = scratch + "/watch.log"
                let process = try SyncAgentBinary.watch(server, scratch: scratch, ["--interval", "1"])
                async let exitStatus = process.exitStatus()
                var stopped = false
                defer { if !stopped { process.send(SIGKILL) } }

                let daemonLog = { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
                try await waitFor("1.2 mirrored; daemon log:\n\(daemonLog())") { try await version(scratch) == "1.2" }
                server.setRoot(URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.4"))
                try await waitFor("1.4 mirrored; daemon log:\n\(daemonLog())") { try await version(scratch) == "1.4" }

                process.send(SIGTERM)
                let status = await exitStatus
                stopped = true
                #expect(status == 0, "a graceful stop exits 0")
            }
        }
    }

    func waitFor(_ what: @autoclosure () -> String, _ condition: () async throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(180)
        while ContinuousClock.now < deadline {
            if try await condition() { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("not reached within 3 minutes: \(what())")
    }
}
