import ContentSync
import Foundation
import StorageServer
import SyncDaemon
import Testing

@testable import SyncAgent

/// `watch`'s polling: jittered intervals, jittered exponential backoff, and stopping when
/// retrying cannot help.
@Suite("watch's polling policy: jitter, backoff, permanent errors, --max-failures", .timeLimit(.minutes(3)))
struct WatchPolicyTests {
    @Test(
        "pauses: interval ± jitter after a success; 10 s doubling up to the cap after failures, jittered too",
        arguments: [
            // (random draws, outcomes (true = success), expected pauses in seconds)
            ([0.5, 0.5, 0.5, 0.5, 0.5, 0.5], [false, false, false, false, false, true], [10.0, 20, 40, 60, 60, 60]),
            ([0.0, 1.0, 0.0, 1.0], [true, true, false, false], [54.0, 66, 9, 22]),
            ([0.5, 0.5, 0.5, 0.5], [false, false, true, false], [10.0, 20, 60, 10]),
        ])
    func pauses(draws: [Double], outcomes: [Bool], expected: [Double]) {
        var schedule = PollSchedule(interval: .seconds(60), jitter: 0.1)
        let pauses = zip(draws, outcomes).map { draw, success in
            success ? schedule.afterSuccess(random: draw) : schedule.afterFailure(random: draw)
        }
        let seconds = pauses.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 }
        #expect(zip(seconds, expected).allSatisfy { abs($0 - $1) < 1e-6 }, "\(seconds) ≠ \(expected)")
    }

    @Test("a cap below the first retry and a short interval bound every pause")
    func caps() {
        var schedule = PollSchedule(interval: .seconds(5), jitter: 0, maxBackoff: .seconds(3))
        #expect(schedule.afterFailure(random: 0.5) == .seconds(3))
        #expect(schedule.afterFailure(random: 0.5) == .seconds(3))
        #expect(schedule.consecutiveFailures == 2)
        #expect(schedule.afterSuccess(random: 0.5) == .seconds(5))
        #expect(schedule.consecutiveFailures == 0)
    }

    @Test("permanent: configuration errors and refusals that need a setting; not network or busy")
    func permanence() {
        var refusal = SyncError(code: .signature, message: "synced with trusted keys")
        refusal.setting = .trustedSigningKeys
        #expect(PollSchedule.isPermanent(SyncError(code: .configuration, message: "bad")))
        #expect(PollSchedule.isPermanent(refusal))
        #expect(!PollSchedule.isPermanent(SyncError(code: .network, message: "down")))
        #expect(!PollSchedule.isPermanent(SyncError(code: .busy, message: "another update")))
        #expect(!PollSchedule.isPermanent(SyncError(code: .signature, message: "bad signature")))
    }

    @Test("an unknown non-empty --dir stops watch at once with exit 6, instead of retrying forever")
    func permanentErrorStops() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.2")) {
                server in
                try FileManager.default.createDirectory(atPath: scratch + "/content", withIntermediateDirectories: true)
                try Data("mine".utf8).write(to: URL(fileURLWithPath: scratch + "/content/notes.txt"))
                let result = try await SyncAgentBinary.run(
                    [
                        "watch", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/content",
                        "--state", scratch + "/state.sqlite", "--interval", "1",
                    ], scratch: scratch)
                #expect(result.status == 6)
                #expect(result.stderr.contains("retrying cannot fix this"))
                #expect(
                    try String(contentsOfFile: scratch + "/content/notes.txt", encoding: .utf8) == "mine",
                    "the folder is left alone")
            }
        }
    }

    @Test("--max-failures 2 exits with the failure's code after two failed checks; bad values exit 6")
    func maxFailures() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.2")) {
                server in
                server.injectFault(.status(503), forPath: "/RXCacheConfig/cacheStatus.json")
                let result = try await SyncAgentBinary.run(
                    [
                        "watch", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/content",
                        "--state", scratch + "/state.sqlite", "--interval", "1", "--max-failures", "2",
                        "--max-backoff", "1", "--jitter", "0",
                    ], scratch: scratch)
                #expect(result.status == 3, "network: \(result.stderr)")
                #expect(result.stderr.contains("stopping after 2 failed checks in a row"))
            }
            for bad in [
                ["--jitter", "1.5"], ["--jitter", "0x0.1"], ["--jitter", "1e-1"], ["--jitter=-0"],
                ["--max-failures=-1"], ["--max-backoff", "0"], ["--full-check-interval", "soon"],
                ["--full-check-interval=-5"],
            ] {
                // --max-failures 1 first (a bad one given later overrides it): a value taken by
                // mistake ends the watch at its first failure instead of hanging the test.
                let result = try await SyncAgentBinary.run(
                    ["watch", "--base-url", "http://127.0.0.1:9/", "--dir", scratch + "/x", "--max-failures", "1"]
                        + bad,
                    scratch: scratch)
                #expect(result.status == 6, "\(bad): \(result.stderr)")
            }
            // Each refusal quotes the value and says why (outside audit: garbage and huge values
            // were told "must be at least 1 second"; `--http` named its error code and took a URL
            // for an IPv6 address).
            for (bad, says) in [
                (["--max-backoff", "1x"], "--max-backoff '1x' is not a duration"),
                (["--max-backoff", "99999999999999999999"], "--max-backoff '99999999999999999999' is not a duration"),
                (["--max-backoff", "0"], "--max-backoff '0' is not a duration"),
                (["--http", "http://127.0.0.1:9464"], "without a scheme"),
            ] {
                let result = try await SyncAgentBinary.run(
                    ["watch", "--base-url", "http://127.0.0.1:9/", "--dir", scratch + "/x", "--max-failures", "1"]
                        + bad,
                    scratch: scratch)
                #expect(result.status == 6 && result.stderr.contains(says), "\(bad): \(result.stderr)")
                #expect(!result.stderr.contains("invalidAddress"), "\(result.stderr)")
            }
        }
    }
}

@Suite("watch and SIGHUP", .timeLimit(.minutes(3)))
struct WatchHangupTests {
    @Test("SIGHUP does not kill watch (it used to exit 129): it logs that there is nothing to reload and runs on")
    func hangupKeepsRunning() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.2")) {
                server in
                let log = scratch + "/watch.log"
                let process = try SyncAgentBinary.watch(server, scratch: scratch)
                async let exitStatus = process.exitStatus()
                let text = { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
                for _ in 0..<200 where !text().contains("1.2") { try await Task.sleep(for: .milliseconds(50)) }
                process.send(SIGHUP)
                for _ in 0..<100 where !text().contains("SIGHUP") { try await Task.sleep(for: .milliseconds(20)) }
                #expect(text().contains("nothing to reload"), "\(text())")
                #expect(kill(process.pid, 0) == 0, "still running after SIGHUP")
                process.send(SIGTERM)
                #expect(await exitStatus == 0)
            }
        }
    }

    /// A storage an error stops keeps its series in /metrics (its failure counted), beside one
    /// that runs: the documented Failing and Stale alerts need them.
    @Test func aStorageAnErrorStoppedStaysInTheMetrics() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.2")) {
                server in
                // Someone's folder that no state knows: refused for good without force.
                try FileManager.default.createDirectory(atPath: scratch + "/theirs", withIntermediateDirectories: true)
                try Data("mine".utf8).write(to: URL(fileURLWithPath: scratch + "/theirs/notes.txt"))
                let config = """
                    http: 127.0.0.1:0
                    storages:
                      good:
                        base-url: \(server.baseURL!.absoluteString)
                        dir: \(scratch)/good
                        state: \(scratch)/good.sqlite
                        interval: 1h
                      stopped:
                        base-url: \(server.baseURL!.absoluteString)
                        dir: \(scratch)/theirs
                        state: \(scratch)/theirs.sqlite
                        interval: 1h

                    """
                try Data(config.utf8).write(to: URL(fileURLWithPath: scratch + "/agent.yaml"))
                let process = try ChildProcess(
                    SyncAgentBinary.path, ["watch", "--config", scratch + "/agent.yaml"],
                    stderr: scratch + "/watch.log")
                async let exitStatus = process.exitStatus()
                var stopped = false
                defer { if !stopped { process.send(SIGKILL) } }
                let endpoint = try await WatchConfigTests.endpoint(
                    scratch, once: ["restored 1.2", "stopping this storage"])
                let (code, metrics) = try await WatchConfigTests.get(endpoint + "/metrics", scratch: scratch)
                #expect(code == 200 && metrics.contains(#"storage="good""#), "\(metrics)")
                #expect(
                    metrics.split(separator: "\n").contains {
                        $0.hasPrefix("sync_agent_check_failures_total{") && $0.contains(#"storage="stopped""#)
                    }, "\(metrics)")
                process.send(SIGTERM)
                #expect(await exitStatus == 0)
                stopped = true
                #expect(try String(contentsOfFile: scratch + "/theirs/notes.txt", encoding: .utf8) == "mine")
            }
        }
    }

    /// The line `watch` exits with is in its log format too: a JSON object under json, the
    /// critical priority under journald (it was a bare text line, read at info priority).
    @Test(arguments: ["json", "journald"])
    func theExitLineIsInTheLogFormat(format: String) async throws {
        try await withScratch { scratch in
            let config = """
                log-format: \(format)
                storages:
                  a:
                    base-url: http://127.0.0.1:1/a/
                    dir: \(scratch)/a
                    state: \(scratch)/a.sqlite
                    max-failures: 1

                """
            try Data(config.utf8).write(to: URL(fileURLWithPath: scratch + "/agent.yaml"))
            let result = try await SyncAgentBinary.run(
                ["watch", "--config", scratch + "/agent.yaml"], scratch: scratch)
            #expect(result.status == 3, "\(result.stderr)")
            let lines = result.stderr.split(separator: "\n").map(String.init)
            let last = try #require(lines.last)
            #expect(last.contains("sync-agent: "), "\(lines)")
            if format == "json" {
                for line in lines {
                    #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "not JSON: \(line)")
                }
            } else {
                #expect(last.hasPrefix("<2>"), "\(last)")
            }
        }
    }
}
