import Foundation
import StorageServer
import Testing

/// `watch --config`: several storages in one process, the HTTP endpoint, SIGHUP reloads, hooks,
/// and `check-config`, run through the built binary against loopback servers.
@Suite("watch --config: several storages, /metrics, SIGHUP reload, hooks; check-config", .timeLimit(.minutes(3)))
struct WatchConfigTests {
    static let storage12 = URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.2")
    static let storage14 = URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.4")

    /// A storage entry of a config file, in `scratch`/`name`.
    static func storage(_ name: String, _ server: StorageServer, scratch: String, extra: String = "") -> String {
        """
          \(name):
            base-url: \(server.baseURL!.absoluteString)
            dir: \(scratch)/\(name)
            state: \(scratch)/\(name).sqlite
            interval: 1h
        \(extra)
        """
    }

    /// The daemon's JSON log lines so far.
    static func lines(_ scratch: String) -> [[String: String]] {
        let text = (try? String(contentsOfFile: scratch + "/watch.log", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap {
            try? JSONDecoder().decode([String: String].self, from: Data($0.utf8))
        }
    }

    static func waitForLine(_ scratch: String, _ what: String, _ matches: ([String: String]) -> Bool) async throws
        -> [String: String]
    {
        let deadline = ContinuousClock.now + .seconds(180)
        while ContinuousClock.now < deadline {
            if let line = lines(scratch).first(where: matches) { return line }
            try await Task.sleep(for: .milliseconds(50))
        }
        Issue.record(
            "no log line for \(what) within 3 minutes; log:\n\((try? String(contentsOfFile: scratch + "/watch.log", encoding: .utf8)) ?? "")"
        )
        throw CancellationError()
    }

    static func startWatch(config: String, scratch: String, environment: [String: String] = [:]) throws -> ChildProcess
    {
        try Data(config.utf8).write(to: URL(fileURLWithPath: scratch + "/agent.yaml"))
        return try ChildProcess(
            SyncAgentBinary.path, ["watch", "--config", scratch + "/agent.yaml", "--log-format", "json"],
            stderr: scratch + "/watch.log", environment: environment)
    }

    static func version(_ scratch: String, _ name: String) async throws -> String? {
        let result = try await SyncAgentBinary.run(
            ["status", "--dir", "\(scratch)/\(name)", "--state", "\(scratch)/\(name).sqlite", "--json"],
            scratch: scratch)
        return (try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])?["version"]
            as? String
    }

    /// GETs `url` with curl: (status, body).
    /// Waits (up to 30 s) until `scratch/watch.log` holds every one of `lines`, then returns the
    /// base URL its "serving /metrics" line names.
    static func endpoint(_ scratch: String, once lines: [String]) async throws -> String {
        let log = { (try? String(contentsOfFile: scratch + "/watch.log", encoding: .utf8)) ?? "" }
        for _ in 0..<600 where !lines.allSatisfy({ log().contains($0) }) {
            try await Task.sleep(for: .milliseconds(50))
        }
        let serving = try #require(
            log().split(separator: "\n").first { $0.contains("serving /metrics") }, "\(log())")
        return String(try #require(serving.firstMatch(of: /http:\/\/127\.0\.0\.1:\d+/)).output)
    }

    /// A config serving the endpoint on a free loopback port, with `storages` (``storage(_:_:scratch:extra:)``).
    static func agentConfig(_ storages: [String]) -> String {
        "http: 127.0.0.1:0\nstorages:\n" + storages.joined(separator: "\n") + "\n"
    }

    static func get(_ url: String, scratch: String) async throws -> (Int, String) {
        let out = scratch + "/curl-\(UUID().uuidString)"
        _ = try await ChildProcess.run(
            "/usr/bin/curl", ["-s", "-o", out, "-w", "%{http_code}", url], stdout: out + ".code")
        let code = Int((try? String(contentsOfFile: out + ".code", encoding: .utf8)) ?? "") ?? 0
        return (code, (try? String(contentsOfFile: out, encoding: .utf8)) ?? "")
    }

    @Test("check-config prints what a valid file runs, never a secret; a bad file exits 6 naming file:line:column")
    func checkConfig() async throws {
        try await withScratch { scratch in
            try Data(
                """
                storages:
                  docs:
                    base-url: http://127.0.0.1:9/storage/
                    dir: mirror
                    headers:
                      Authorization: {env: TOKEN, prefix: "token "}
                """.utf8
            ).write(to: URL(fileURLWithPath: scratch + "/good.yaml"))
            let good = try await ChildProcess(
                SyncAgentBinary.path, ["check-config", scratch + "/good.yaml"],
                stdout: scratch + "/good.out", stderr: scratch + "/good.err",
                environment: ["TOKEN": "hunter2-secret"]
            ).exitStatus()
            let out = try String(contentsOfFile: scratch + "/good.out", encoding: .utf8)
            #expect(good == 0, "\(out)")
            #expect(
                out.contains("docs: http://127.0.0.1:9/storage/ → \(scratch)/mirror"),
                "relative dir from the file's folder:\n\(out)")
            #expect(out.contains("Authorization: <from env TOKEN>"))
            #expect(!out.contains("hunter2"), "the secret never shows")

            try Data("storages:\n  docs:\n    base-url: http://h/s/\n    dir: /tmp/x\n    intervall: 5m\n".utf8)
                .write(to: URL(fileURLWithPath: scratch + "/bad.yaml"))
            let bad = try await SyncAgentBinary.run(["check-config", scratch + "/bad.yaml"], scratch: scratch)
            #expect(bad.status == 6)
            #expect(bad.stderr.contains("\(scratch)/bad.yaml:5:5: unknown key 'intervall'"), "\(bad.stderr)")
            #expect(bad.stderr.contains("did you mean interval"))

            let refused = try await SyncAgentBinary.run(
                ["watch", "--config", scratch + "/good.yaml", "--interval", "60"], scratch: scratch)
            #expect(
                refused.status == 6 && refused.stderr.contains("--interval belong in the file"), "\(refused.stderr)")
        }
    }

    /// check-config refuses what watch would refuse when it starts a storage, each problem on its
    /// own line with its place, and an unknown key under defaults once, not once a storage.
    @Test func checkConfigRefusesWhatWatchWouldEachProblemOnItsLine() async throws {
        try await withScratch { scratch in
            let yaml = """
                defaults:
                  intervall: 5m
                storages:
                  root:
                    base-url: http://h/s/
                    dir: /
                  inside:
                    base-url: http://h/t/
                    dir: \(scratch)/inside
                    state: \(scratch)/inside/state.sqlite
                  token:
                    base-url: http://h/u/?token=SECRET-4711
                    dir: \(scratch)/token

                """
            try Data(yaml.utf8).write(to: URL(fileURLWithPath: scratch + "/bad.yaml"))
            for command in [["check-config"], ["watch", "--config"]] {
                let result = try await SyncAgentBinary.run(command + [scratch + "/bad.yaml"], scratch: scratch)
                let lines = result.stderr.split(separator: "\n").map(String.init)
                #expect(result.status == 6, "\(command): \(result.stderr)")
                #expect(!result.stderr.contains("SECRET-4711"), "\(result.stderr)")
                #expect(lines.filter { $0.contains("unknown key 'intervall'") }.count == 1, "\(result.stderr)")
                #expect(lines.contains { $0.hasPrefix("\(scratch)/bad.yaml:6:") && $0.contains("the root folder") })
                #expect(
                    lines.contains {
                        $0.hasPrefix("\(scratch)/bad.yaml:10:") && $0.contains("inside the content folder")
                    })
                #expect(
                    lines.contains { $0.hasPrefix("\(scratch)/bad.yaml:12:") && $0.contains("?token=***' has a query") }
                )
                #expect(lines.last == "sync-agent: 4 problems in \(scratch)/bad.yaml", "\(result.stderr)")
            }
            let folder = try await SyncAgentBinary.run(["check-config", scratch], scratch: scratch)
            #expect(
                folder.status == 6 && folder.stderr.contains("it is a folder, not a file: give the config file's path"))
            // Neither a FIFO (which would block a plain read) nor a device is read as a config.
            #expect(mkfifo(scratch + "/fifo", 0o600) == 0)
            for path in [scratch + "/fifo", "/dev/zero"] {
                let special = try await SyncAgentBinary.run(["check-config", path], scratch: scratch)
                #expect(special.status == 6, "\(path)")
                #expect(
                    special.stderr.contains("it is not a regular file (a FIFO, a socket or a device)"),
                    "\(special.stderr)")
            }
        }
    }

    @Test(
        "--header-env sends the variable's value, which never reaches the command line or the log; an unset variable exits 6 naming it"
    )
    func headerFromEnvironment() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: Self.storage12) { server in
                let arguments = [
                    "sync", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/a", "--state",
                    scratch + "/a.sqlite",
                    "--header-env", "Authorization: SYNC_TEST_TOKEN", "--verbose",
                ]
                let status = try await ChildProcess(
                    SyncAgentBinary.path, arguments, stdout: scratch + "/out", stderr: scratch + "/err",
                    environment: ["SYNC_TEST_TOKEN": "token s3cr3t-value"]
                ).exitStatus()
                let log = (try? String(contentsOfFile: scratch + "/err", encoding: .utf8)) ?? ""
                #expect(status == 0, "\(log)")
                let sent = server.requests().compactMap { $0.headers["authorization"] }
                #expect(!sent.isEmpty && sent.allSatisfy { $0 == "token s3cr3t-value" }, "\(sent)")
                #expect(!log.contains("s3cr3t"), "the --verbose log never shows the value")

                let unset = try await SyncAgentBinary.run(Array(arguments.dropLast()), scratch: scratch)
                #expect(unset.status == 6 && unset.stderr.contains("SYNC_TEST_TOKEN is not set"), "\(unset.stderr)")
                // The value given where the variable's name belongs (outside audit): refused
                // without quoting it, with or without the header's name.
                for mistake in ["Authorization: Bearer ghp_LEAKME123", "ghp_LEAKME123 token"] {
                    let leaked = try await SyncAgentBinary.run(
                        Array(arguments.dropLast(3)) + ["--header-env", mistake], scratch: scratch)
                    #expect(leaked.status == 6 && !leaked.stderr.contains("LEAKME"), "\(leaked.stderr)")
                    #expect(!leaked.stdout.contains("LEAKME"), "\(leaked.stdout)")
                }

                let injected = try await SyncAgentBinary.run(
                    [
                        "sync", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/b",
                        "--header", "X-A: one\r\nX-B: two",
                    ], scratch: scratch)
                #expect(injected.status == 6 && injected.stderr.contains("line break"), "\(injected.stderr)")
            }
        }
    }

    @Test(
        "two storages in one process; /metrics per storage, /healthz, /readyz; SIGHUP adds, removes and changes storages"
    )
    func storagesMetricsAndReload() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: Self.storage12) { server12 in
                try await withStorageServer(root: Self.storage14) { server14 in
                    let config = Self.agentConfig
                    let process = try Self.startWatch(
                        config: config([
                            Self.storage("a", server12, scratch: scratch),
                            Self.storage("b", server14, scratch: scratch),
                        ]), scratch: scratch)
                    async let exitStatus = process.exitStatus()
                    var stopped = false
                    defer { if !stopped { process.send(SIGKILL) } }

                    let listening = try await Self.waitForLine(scratch, "the endpoint") {
                        $0["message"]?.hasPrefix("serving /metrics") == true
                    }
                    let base = try #require(listening["http"])
                    _ = try await Self.waitForLine(scratch, "a restored") {
                        $0["storage"] == "a" && $0["message"]?.hasPrefix("restored 1.2") == true
                    }
                    _ = try await Self.waitForLine(scratch, "b restored") {
                        $0["storage"] == "b" && $0["message"]?.hasPrefix("restored 1.4") == true
                    }
                    #expect(try await Self.version(scratch, "a") == "1.2")
                    #expect(try await Self.version(scratch, "b") == "1.4")
                    #expect(server12.requestCount(forPath: "/RXCacheConfig/cacheStatus.json") >= 1)

                    let (metricsStatus, metrics) = try await Self.get(base + "/metrics", scratch: scratch)
                    #expect(metricsStatus == 200)
                    #expect(metrics.contains(#"sync_agent_checks_total{storage="a"} 1"#), "\(metrics)")
                    #expect(metrics.contains(#"sync_agent_updates_total{"#) && metrics.contains(#"outcome="restored""#))
                    #expect(metrics.contains(#"version="1.4""#) && metrics.contains("sync_agent_version_info"))
                    #expect(try await Self.get(base + "/healthz", scratch: scratch).0 == 200)
                    #expect(try await Self.get(base + "/readyz", scratch: scratch).0 == 200)

                    // Reload: b goes, c comes, a changes (its interval).
                    let changedA = Self.storage("a", server12, scratch: scratch).replacingOccurrences(
                        of: "interval: 1h", with: "interval: 2h")
                    try Data(config([changedA, Self.storage("c", server12, scratch: scratch)]).utf8)
                        .write(to: URL(fileURLWithPath: scratch + "/agent.yaml"))
                    process.send(SIGHUP)
                    let reloaded = try await Self.waitForLine(scratch, "the reload") {
                        $0["message"]?.hasPrefix("SIGHUP: reloaded") == true
                    }
                    #expect(
                        reloaded["added"] == "c" && reloaded["removed"] == "b" && reloaded["changed"] == "a",
                        "\(reloaded)")
                    _ = try await Self.waitForLine(scratch, "c restored") {
                        $0["storage"] == "c" && $0["message"]?.hasPrefix("restored 1.2") == true
                    }
                    let (_, after) = try await Self.get(base + "/metrics", scratch: scratch)
                    #expect(!after.contains(#"storage="b""#), "a removed storage's series go:\n\(after)")
                    #expect(after.contains(#"sync_agent_checks_total{storage="c"} 1"#))

                    // A broken file keeps the running configuration.
                    try Data("storages:\n  a: [\n".utf8).write(to: URL(fileURLWithPath: scratch + "/agent.yaml"))
                    process.send(SIGHUP)
                    let refused = try await Self.waitForLine(scratch, "the refused reload") {
                        $0["message"]?.contains("running on with the previous") == true
                    }
                    #expect(
                        refused["level"] == "error" && refused["message"]?.contains("agent.yaml:") == true, "\(refused)"
                    )
                    #expect(kill(process.pid, 0) == 0, "still running")

                    process.send(SIGTERM)
                    #expect(await exitStatus == 0)
                    stopped = true
                    let versions = [try await Self.version(scratch, "a"), try await Self.version(scratch, "c")]
                    #expect(versions == ["1.2", "1.2"])
                }
            }
        }
    }

    /// Each running storage reads its state database every twelfth of the stall limit; with a
    /// limit of 1 s, `/healthz` stays 200 through the restores and after one storage stopped
    /// (a stopped storage is not stalled). Without the reads it would say 503 after 1 s.
    @Test("/healthz stays 200 while the storages' databases answer; SYNC_AGENT_STALL_LIMIT is checked")
    func healthzFollowsTheDatabases() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: Self.storage12) { server in
                try FileManager.default.createDirectory(atPath: scratch + "/b", withIntermediateDirectories: true)
                try Data("mine".utf8).write(to: URL(fileURLWithPath: scratch + "/b/notes.txt"))
                let process = try Self.startWatch(
                    config: Self.agentConfig([
                        Self.storage("a", server, scratch: scratch), Self.storage("b", server, scratch: scratch),
                    ]), scratch: scratch, environment: ["SYNC_AGENT_STALL_LIMIT": "1"])
                async let exitStatus = process.exitStatus()
                var stopped = false
                defer { if !stopped { process.send(SIGKILL) } }
                let base = try await Self.endpoint(scratch, once: ["serving /metrics"])
                _ = try await Self.waitForLine(scratch, "b's stop") {
                    $0["storage"] == "b" && $0["level"] == "critical"
                }
                _ = try await Self.waitForLine(scratch, "a restored") {
                    $0["storage"] == "a" && $0["message"]?.hasPrefix("restored 1.2") == true
                }
                var answers: [Int] = []
                for _ in 0..<6 {
                    try await Task.sleep(for: .milliseconds(500))
                    answers.append(try await Self.get(base + "/healthz", scratch: scratch).0)
                }
                #expect(answers == [200, 200, 200, 200, 200, 200])
                process.send(SIGTERM)
                #expect(await exitStatus == 0)
                stopped = true
                let log = (try? String(contentsOfFile: scratch + "/watch.log", encoding: .utf8)) ?? ""
                #expect(!log.contains("has not answered"), "\(log)")
            }
            for bad in ["0", "2d", "soon"] {
                let refused = try await SyncAgentBinary.run(
                    ["watch", "--base-url", "http://127.0.0.1:9/", "--dir", scratch + "/c"], scratch: scratch,
                    environment: ["SYNC_AGENT_STALL_LIMIT": bad])
                #expect(refused.status == 6, "\(bad): \(refused.stderr)")
                #expect(
                    refused.stderr.contains("SYNC_AGENT_STALL_LIMIT=\"\(bad)\" is not a duration from 1s to 1d"),
                    "\(refused.stderr)")
                #expect(!FileManager.default.fileExists(atPath: scratch + "/c"), "nothing ran")
            }
        }
    }

    /// A storage added and removed again by two quick reloads is forgotten: its loop's first
    /// report came after the removal and made it known again, so `/readyz` said "not ready: x"
    /// for good (an outside audit: 5 runs of 5).
    @Test("a storage a reload removes right after adding it is not left in /readyz")
    func quickAddAndRemoveLeavesNothingInReadyz() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: Self.storage12) { server in
                let config = Self.agentConfig
                let base = config([Self.storage("a", server, scratch: scratch)])
                let withX = config([
                    Self.storage("a", server, scratch: scratch), Self.storage("x", server, scratch: scratch),
                ])
                let process = try Self.startWatch(config: base, scratch: scratch)
                async let exitStatus = process.exitStatus()
                var stopped = false
                defer { if !stopped { process.send(SIGKILL) } }
                let endpoint = try await Self.endpoint(scratch, once: ["serving /metrics"])
                _ = try await Self.waitForLine(scratch, "a restored") {
                    $0["storage"] == "a" && $0["message"]?.hasPrefix("restored 1.2") == true
                }
                let file = URL(fileURLWithPath: scratch + "/agent.yaml")
                func count(_ text: String) -> Int {
                    let log = (try? String(contentsOfFile: scratch + "/watch.log", encoding: .utf8)) ?? ""
                    return log.components(separatedBy: text).count - 1
                }
                for _ in 1...8 {
                    // The removal 2 ms after the addition: before x's loop first reports. (When
                    // the first reload reads the file after the second write, the round adds
                    // nothing; the rounds that do are counted below.)
                    try Data(withX.utf8).write(to: file)
                    process.send(SIGHUP)
                    try await Task.sleep(for: .milliseconds(2))
                    try Data(base.utf8).write(to: file)
                    process.send(SIGHUP)
                    try await Task.sleep(for: .milliseconds(300))
                }
                for _ in 0..<100 where count(#""added":"x""#) > count(#""removed":"x""#) {
                    try await Task.sleep(for: .milliseconds(100))
                }
                #expect(count(#""added":"x""#) >= 1, "no round added x: the test proves nothing")
                var answer = (0, "")
                for _ in 0..<100 {
                    answer = try await Self.get(endpoint + "/readyz", scratch: scratch)
                    if answer.0 == 200 { break }
                    try await Task.sleep(for: .milliseconds(100))
                }
                #expect(answer.0 == 200 && answer.1 == "ok\n", "\(answer)")
                try await Task.sleep(for: .seconds(1))
                #expect(try await Self.get(endpoint + "/readyz", scratch: scratch).0 == 200, "and it stays ready")
                process.send(SIGTERM)
                #expect(await exitStatus == 0)
                stopped = true
            }
        }
    }

    @Test(
        "a permanent error stops only its storage; a SIGHUP after the fix starts it again; when none is left the agent exits with its code"
    )
    func permanentErrorStopsOneStorage() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: Self.storage12) { server in
                try FileManager.default.createDirectory(atPath: scratch + "/b", withIntermediateDirectories: true)
                try Data("mine".utf8).write(to: URL(fileURLWithPath: scratch + "/b/notes.txt"))
                let process = try Self.startWatch(
                    config: Self.agentConfig([
                        Self.storage("a", server, scratch: scratch), Self.storage("b", server, scratch: scratch),
                    ]), scratch: scratch)
                async let exitStatus = process.exitStatus()
                var stopped = false
                defer { if !stopped { process.send(SIGKILL) } }
                let listening = try await Self.waitForLine(scratch, "the endpoint") {
                    $0["message"]?.hasPrefix("serving /metrics") == true
                }
                let base = try #require(listening["http"])
                let stop = try await Self.waitForLine(scratch, "b's stop") {
                    $0["storage"] == "b" && $0["level"] == "critical"
                }
                #expect(stop["message"]?.contains("retrying cannot fix this") == true)
                _ = try await Self.waitForLine(scratch, "a restored") {
                    $0["storage"] == "a" && $0["message"]?.hasPrefix("restored 1.2") == true
                }
                #expect(kill(process.pid, 0) == 0, "a still runs")
                #expect(
                    try String(contentsOfFile: scratch + "/b/notes.txt", encoding: .utf8) == "mine",
                    "b's folder is left alone")
                // b, stopped, holds no version: not ready, and named.
                let (notReady, body) = try await Self.get(base + "/readyz", scratch: scratch)
                #expect(notReady == 503 && body.contains("b"), "\(notReady) \(body)")

                // The operator moves the folder's files away and reloads: b starts again.
                try FileManager.default.removeItem(atPath: scratch + "/b")
                process.send(SIGHUP)
                _ = try await Self.waitForLine(scratch, "b restored") {
                    $0["storage"] == "b" && $0["message"]?.hasPrefix("restored 1.2") == true
                }
                // Ready is recorded just after the line is logged: asked again until then (at most 10 s).
                var ready = 0
                for _ in 0..<100 {
                    ready = try await Self.get(base + "/readyz", scratch: scratch).0
                    if ready == 200 { break }
                    try await Task.sleep(for: .milliseconds(100))
                }
                #expect(ready == 200)
                process.send(SIGTERM)
                #expect(await exitStatus == 0)
                stopped = true

                // Alone, the stopped storage ends the agent with its exit code.
                try FileManager.default.createDirectory(atPath: scratch + "/c", withIntermediateDirectories: true)
                try Data("mine".utf8).write(to: URL(fileURLWithPath: scratch + "/c/notes.txt"))
                let alone = try Self.startWatch(
                    config: "storages:\n" + Self.storage("c", server, scratch: scratch) + "\n", scratch: scratch)
                #expect(await alone.exitStatus() == 6)
            }
        }
    }

    /// `watch` of storage `a` whose restore's archive is 3 s slow, started and waited for until
    /// its update starts: a reload then lands while the update runs.
    static func startWatchUpdating(_ server: StorageServer, scratch: String, extra: String = "") async throws
        -> ChildProcess
    {
        server.injectFault(.delay(seconds: 3), times: 1) { $0.hasSuffix(".zip") }
        let process = try startWatch(
            config: "storages:\n" + storage("a", server, scratch: scratch, extra: extra) + "\n", scratch: scratch)
        do {
            _ = try await waitForLine(scratch, "the update start") { $0["message"] == "update started" }
        } catch {
            process.send(SIGKILL)
            _ = await process.exitStatus()
            throw error
        }
        return process
    }

    @Test(
        "SIGHUP during an update lets it finish: the changed storage restarts after its restore, nothing is cancelled")
    func reloadDuringUpdate() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: Self.storage12) { server in
                // The update's post-update hook runs whole (a reload once cancelled it).
                let hooks = [
                    "    hooks:", "      post-update:",
                    "        - command: [/bin/sh, -c, 'sleep 0.3; echo post-update hook ran']",
                ]
                .joined(separator: "\n")
                let process = try await Self.startWatchUpdating(server, scratch: scratch, extra: hooks)
                async let exitStatus = process.exitStatus()
                var stopped = false
                defer { if !stopped { process.send(SIGKILL) } }
                try Data(
                    ("storages:\n"
                        + Self.storage("a", server, scratch: scratch, extra: hooks).replacingOccurrences(
                            of: "interval: 1h", with: "interval: 2h") + "\n").utf8
                )
                .write(to: URL(fileURLWithPath: scratch + "/agent.yaml"))
                process.send(SIGHUP)
                _ = try await Self.waitForLine(scratch, "the reload") {
                    $0["message"]?.hasPrefix("SIGHUP: reloaded") == true
                }
                _ = try await Self.waitForLine(scratch, "the restart") {
                    $0["message"] == "starting storage" && $0["interval"] == "2h"
                }
                let lines = Self.lines(scratch).map { $0["message"] ?? "" }
                let restored = try #require(
                    lines.firstIndex { $0.hasPrefix("restored 1.2") }, "the restore finished:\n\(lines)")
                let restarted = try #require(lines.lastIndex { $0 == "starting storage" })
                #expect(restored < restarted, "the replacement starts after the running update ends:\n\(lines)")
                let hookRan = try #require(
                    lines.firstIndex { $0 == "post-update hook ran" }, "the post-update hook ran:\n\(lines)")
                #expect(hookRan < restarted, "\(lines)")
                #expect(
                    !lines.contains {
                        $0.contains("cancelled") || $0.contains("check failed")
                    },
                    "\(lines)")
                process.send(SIGTERM)
                #expect(await exitStatus == 0)
                stopped = true
                #expect(try await Self.version(scratch, "a") == "1.2")
            }
        }
    }

    /// A storage renamed by a reload while its update runs: the new name shares the old one's dir
    /// and state, so it waits for the old one's check to end (it used to start at once and log
    /// "another update is running" failures until the restore ended).
    @Test("a storage renamed during its update starts under its new name when the update ends, with no busy failure")
    func renameDuringUpdate() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: Self.storage12) { server in
                let process = try await Self.startWatchUpdating(server, scratch: scratch)
                async let exitStatus = process.exitStatus()
                var stopped = false
                defer { if !stopped { process.send(SIGKILL) } }
                let renamed = Self.storage("a", server, scratch: scratch).replacingOccurrences(of: "  a:", with: "  b:")
                try Data(("storages:\n" + renamed + "\n").utf8).write(to: URL(fileURLWithPath: scratch + "/agent.yaml"))
                process.send(SIGHUP)
                _ = try await Self.waitForLine(scratch, "the start of b") {
                    $0["message"] == "starting storage" && $0["storage"] == "b"
                }
                _ = try await Self.waitForLine(scratch, "b's first check") {
                    $0["storage"] == "b" && $0["message"]?.hasPrefix("up to date at 1.2") == true
                }
                let lines = Self.lines(scratch)
                let messages = lines.map { $0["message"] ?? "" }
                let restored = try #require(messages.firstIndex { $0.hasPrefix("restored 1.2") }, "\(messages)")
                let started = try #require(
                    lines.firstIndex { $0["message"] == "starting storage" && $0["storage"] == "b" })
                #expect(restored < started, "b starts after a's update ends:\n\(messages)")
                #expect(messages.contains { $0.hasPrefix("storage waits for a") }, "\(messages)")
                #expect(!messages.contains { $0.contains("check failed") || $0.contains("another") }, "\(messages)")
                process.send(SIGTERM)
                #expect(await exitStatus == 0)
                stopped = true
            }
        }
    }

    /// A reload that changes a failing storage restarts it: its failures in a row count on, so
    /// `max-failures` still stops the agent (reloads every 1.5 s used to keep it running for good,
    /// each restart logging "1 in a row").
    @Test("reloads that change a failing storage do not reset max-failures")
    func reloadsDoNotResetMaxFailures() async throws {
        try await withScratch { scratch in
            func config(_ interval: String) -> String {
                "storages:\n  f:\n    base-url: http://127.0.0.1:1/\n    dir: \(scratch)/f\n    state: \(scratch)/f.sqlite\n    interval: \(interval)\n    max-backoff: 1s\n    max-failures: 3\n"
            }
            let process = try Self.startWatch(config: config("1s"), scratch: scratch)
            async let exitStatus = process.exitStatus()
            var ended = false
            defer { if !ended { process.send(SIGKILL) } }
            // From its first line on, the agent has SIGHUP in hand (before, on a busy machine, a
            // HUP could come while the process was still being loaded: exit 129).
            _ = try await Self.waitForLine(scratch, "the start") { $0["message"]?.hasPrefix("starting") == true }
            let flips = Task {
                for round in 0..<40 {
                    try await Task.sleep(for: .milliseconds(700))
                    try Data(config(round % 2 == 0 ? "2s" : "1s").utf8).write(
                        to: URL(fileURLWithPath: scratch + "/agent.yaml"))
                    process.send(SIGHUP)
                }
            }
            let status = await exitStatus
            ended = true
            flips.cancel()
            #expect(
                status == 3,
                "max-failures ends the agent with the failure's code:\n\(Self.lines(scratch).map { $0["message"] ?? "" })"
            )
        }
    }

    /// Two `watch` processes on one dir and state both ran, each checking and running hooks:
    /// the second stops at once with exit 6, naming the lock; the first runs on. A `sync` beside
    /// the running watch still works.
    @Test("a second watch of the same dir and state exits 6 naming the watch lock; the first runs on")
    func aSecondWatchOfOneStateIsRefused() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: Self.storage12) { server in
                let config = "storages:\n" + Self.storage("a", server, scratch: scratch) + "\n"
                let first = try Self.startWatch(config: config, scratch: scratch)
                async let firstExit = first.exitStatus()
                var stopped = false
                defer { if !stopped { first.send(SIGKILL) } }
                _ = try await Self.waitForLine(scratch, "the first's restore") {
                    $0["message"]?.hasPrefix("restored 1.2") == true
                }
                // The same storage under another name, from another config file.
                try FileManager.default.createDirectory(atPath: scratch + "/second", withIntermediateDirectories: true)
                let other = config.replacingOccurrences(of: "  a:", with: "  copy:")
                try Data(other.utf8).write(to: URL(fileURLWithPath: scratch + "/second/agent.yaml"))
                let second = try ChildProcess(
                    SyncAgentBinary.path, ["watch", "--config", scratch + "/second/agent.yaml"],
                    stderr: scratch + "/second/watch.log")
                #expect(await second.exitStatus() == 6)
                let said = (try? String(contentsOfFile: scratch + "/second/watch.log", encoding: .utf8)) ?? ""
                #expect(said.contains("another sync-agent watch already keeps \(scratch)/a"), "\(said)")
                #expect(said.contains("\(scratch)/a.sqlite.lock"), "\(said)")
                #expect(kill(first.pid, 0) == 0, "the first watch runs on")
                let sync = try await SyncAgentBinary.run(
                    [
                        "sync", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/a", "--state",
                        scratch + "/a.sqlite",
                    ], scratch: scratch)
                #expect(sync.status == 0, "\(sync.stderr)")
                first.send(SIGTERM)
                #expect(await firstExit == 0)
                stopped = true
                // Once the first has stopped, a new watch takes the lock.
                let third = try ChildProcess(
                    SyncAgentBinary.path, ["watch", "--config", scratch + "/second/agent.yaml"],
                    stderr: scratch + "/second/third.log")
                async let thirdExit = third.exitStatus()
                let thirdLog = { (try? String(contentsOfFile: scratch + "/second/third.log", encoding: .utf8)) ?? "" }
                for _ in 0..<400 where !thirdLog().contains("up to date at 1.2") {
                    try await Task.sleep(for: .milliseconds(25))
                }
                #expect(thirdLog().contains("up to date at 1.2"), "\(thirdLog())")
                third.send(SIGTERM)
                #expect(await thirdExit == 0)
            }
        }
    }

    @Test(
        "hooks: a post-update hook gets the SYNC_AGENT_ variables; a pre-switch veto leaves N intact and exits 10 at max-failures 1"
    )
    func hooks() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: Self.storage12) { server in
                let hooks = [
                    "    hooks:", "      post-update:",
                    "        - command: [/bin/sh, -c, 'env | grep ^SYNC_AGENT_ | sort > \(scratch)/post.env; echo hook says hi']",
                ]
                .joined(separator: "\n")
                let process = try Self.startWatch(
                    config: "storages:\n" + Self.storage("a", server, scratch: scratch, extra: hooks) + "\n",
                    scratch: scratch)
                async let exitStatus = process.exitStatus()
                var stopped = false
                defer { if !stopped { process.send(SIGKILL) } }
                let said = try await Self.waitForLine(scratch, "the hook's output") {
                    $0["message"]?.contains("hook says hi") == true
                }
                #expect(said["storage"] == "a")
                let environment = try String(contentsOfFile: scratch + "/post.env", encoding: .utf8)
                for expected in [
                    "SYNC_AGENT_STORAGE=a", "SYNC_AGENT_DIR=\(scratch)/a", "SYNC_AGENT_OLD_VERSION=",
                    "SYNC_AGENT_NEW_VERSION=1.2",
                    "SYNC_AGENT_OUTCOME=restored", "SYNC_AGENT_HOOK=post-update",
                ] {
                    #expect(
                        environment.split(separator: "\n").contains { $0 == expected }, "\(expected) in\n\(environment)"
                    )
                }
                process.send(SIGTERM)
                #expect(await exitStatus == 0)
                stopped = true

                // 1.4 is published; a pre-switch hook refuses it.
                let before = try Data(contentsOf: URL(fileURLWithPath: scratch + "/a.sqlite"))
                #expect(!before.isEmpty)
                server.setRoot(Self.storage14)
                let veto = [
                    "    max-failures: 1", "    hooks:", "      pre-switch:",
                    "        - command: [/bin/sh, -c, 'test -d \"$SYNC_AGENT_STAGED_DIR\" && echo \"not today: $SYNC_AGENT_NEW_VERSION\"; exit 3']",
                ]
                .joined(separator: "\n")
                let vetoing = try Self.startWatch(
                    config: "storages:\n" + Self.storage("a", server, scratch: scratch, extra: veto) + "\n",
                    scratch: scratch)
                #expect(await vetoing.exitStatus() == 10, "vetoed's exit code")
                #expect(try await Self.version(scratch, "a") == "1.2", "N stays")
                let log = Self.lines(scratch).map { $0["message"] ?? "" }
                #expect(log.contains { $0.contains("not today: 1.4") }, "\(log)")
            }
        }
    }

    /// SIGTERM during a post-update hook stops the hook (TERM, then KILL after the grace) and
    /// the agent exits 0 at once: it waited for the hook's whole run, past systemd's
    /// TimeoutStopSec, while a pre-switch hook was already stopped.
    ///
    /// With `secondSignal`, the hook ignores SIGTERM, so the first stop waits out its 5 s grace,
    /// and a second SIGTERM ends the agent at once (143). Before, the second was ignored and the
    /// agent exited 0 after the grace; the audit saw a first SIGTERM lost for good at a task limit.
    @Test(arguments: [false, true])
    func sigtermStopsARunningPostUpdateHook(secondSignal: Bool) async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: Self.storage12) { server in
                let trap = secondSignal ? "trap \"\" TERM; " : ""
                let hooks = [
                    "    hooks:", "      post-update:",
                    "        - command: [/bin/sh, -c, '\(trap)echo hook started; sleep 60; echo hook ended']",
                    "          timeout: 2m",
                ]
                .joined(separator: "\n")
                let process = try Self.startWatch(
                    config: "storages:\n" + Self.storage("a", server, scratch: scratch, extra: hooks) + "\n",
                    scratch: scratch)
                async let exitStatus = process.exitStatus()
                var stopped = false
                defer { if !stopped { process.send(SIGKILL) } }
                _ = try await Self.waitForLine(scratch, "the hook's first line") {
                    $0["message"]?.contains("hook started") == true
                }
                process.send(SIGTERM)
                if secondSignal {
                    try await Task.sleep(for: .milliseconds(500))
                    process.send(SIGTERM)
                }
                #expect(await exitStatus == (secondSignal ? 143 : 0))
                stopped = true
                // Waiting for the hook would have let it finish its line.
                #expect(!Self.lines(scratch).contains { $0["message"]?.contains("hook ended") == true })
                if secondSignal {
                    let stderr = (try? String(contentsOfFile: scratch + "/watch.log", encoding: .utf8)) ?? ""
                    #expect(stderr.contains("a second SIGTERM: stopping at once"), "\(stderr.suffix(600))")
                }
            }
        }
    }

    /// A state database deleted under a running agent stops its storage with the reason, rather
    /// than checks going on into the deleted file while `status` says "never synced".
    @Test func aStateDatabaseDeletedWhileWatchedStopsItsStorage() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: Self.storage12) { server in
                let process = try Self.startWatch(
                    config: "storages:\n"
                        + Self.storage("a", server, scratch: scratch).replacingOccurrences(
                            of: "interval: 1h", with: "interval: 1s") + "\n",
                    scratch: scratch)
                async let exitStatus = process.exitStatus()
                var stopped = false
                defer { if !stopped { process.send(SIGKILL) } }
                _ = try await Self.waitForLine(scratch, "the first restore") {
                    $0["message"]?.hasPrefix("restored 1.2") == true
                }
                #expect(unlink(scratch + "/a.sqlite") == 0)
                let status = await exitStatus
                stopped = true
                #expect(status == 6)
                #expect(
                    Self.lines(scratch).contains {
                        $0["message"]?.contains("a.sqlite was deleted or replaced while the agent ran") == true
                    })
            }
        }
    }
}
