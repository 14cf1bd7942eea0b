import CLinux
import Foundation
import ItemCache
import ProcessKit
import StorageServer
import Testing
import Transport

@testable import SyncAgent
@testable import ThreadKit

/// Just above a task limit libdispatch waits for a thread for good, in silence: a restore hung
/// at `prlimit --nproc` 5–7, `watch` at 6–10. Every command now reads the limits first and
/// exits 6 naming the limit and the fix when fewer than 16 threads may start.
@Suite(
    "A task limit too tight to run in is refused at start",
    .serialized, .timeLimit(.minutes(5)),
    .enabled(
        if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
            && FileManager.default.isExecutableFile(atPath: "/usr/bin/prlimit")))
struct TaskLimitTests {
    /// An unused user id for these tests alone (`RLIMIT_NPROC` counts the user's every task).
    static let uid = SyncAgentBinary.unusedUID(slot: 0)

    func run(
        _ arguments: [String], _ scratch: String, tasks: Int?, environment: [String: String] = [:],
        wrappedBy wrapper: [String] = []
    ) async throws -> CommandResult {
        try await SyncAgentBinary.runTaskLimited(
            arguments, scratch: scratch, uid: Self.uid, tasks: tasks, environment: environment, wrappedBy: wrapper)
    }

    func expectRefused(_ result: CommandResult, tasks: Int, wanted: Int = 16, _ what: String) {
        #expect(result.status == 6, "\(what): \(result.status) \(result.stderr)")
        #expect(
            result.stderr
                == "sync-agent: only \(tasks - 1) more threads may start and sync-agent needs \(wanted) more (ulimit -u allows user "
                + "\(Self.uid) \(tasks) tasks and 1 runs as that user): raise the user's task limit (ulimit -u, "
                + "systemd's LimitNPROC=) or run fewer tasks as that user, and try again\n",
            "\(what)")
    }

    @Test func everyCommandIsRefusedWithTheLimitNamed() async throws {
        try await withScratch { scratch in
            chmod(scratch, 0o777)
            let base = "http://127.0.0.1:9/"
            let commands: [[String]] = [
                ["sync", "--base-url", base, "--dir", scratch + "/c", "--state", scratch + "/s.sqlite"],
                ["watch", "--base-url", base, "--dir", scratch + "/c", "--state", scratch + "/s.sqlite"],
                ["verify", "--base-url", base, "--dir", scratch + "/c", "--state", scratch + "/s.sqlite"],
                ["status", "--dir", scratch + "/c", "--state", scratch + "/s.sqlite"],
                ["serve", scratch, "--port", "0"],
                ["cache", "get", base + "x", "--cache", scratch + "/cache"],
                ["cache", "stats", "--cache", scratch + "/cache"],
                ["image", "get", base + "p.jpg", "--cache", scratch + "/cache", "--size", "10x10"],
            ]
            for command in commands {
                // At 12, without the check, `watch` hung for good and a restore took seconds.
                expectRefused(
                    try await run(command, scratch, tasks: 12), tasks: 12, command.prefix(2).joined(separator: " "))
            }
            #expect(!FileManager.default.fileExists(atPath: scratch + "/c"), "nothing was made")
            #expect(!FileManager.default.fileExists(atPath: scratch + "/s.sqlite"), "nothing was made")
            #expect(!FileManager.default.fileExists(atPath: scratch + "/cache"), "nothing was made")
            // Help and the version are answered before any thread starts: at 3 they hung
            // (libdispatch's threads), at 4 `--version` took 5 s to exit.
            for command in [
                ["--version"], ["--help"], ["sync", "--help"], ["help", "cache"], ["cache", "get", "-h"], ["cache"],
            ] {
                let result = try await run(command, scratch, tasks: 3)
                #expect(result.status == 0 && !result.stdout.isEmpty, "\(command): \(result.stderr)")
            }
            // So are a command line that does not parse (64) and an empty path (6), as without a
            // limit: the limit's refusal would hide the real mistake.
            let usage = try await run(["sync", "--bogus"], scratch, tasks: 3)
            #expect(usage.status == 64 && usage.stderr.contains("Usage: sync-agent sync"), "\(usage.stderr)")
            let empty = try await run(["sync", "--dir", "", "--help"], scratch, tasks: 3)
            #expect(empty.status == 6 && empty.stderr.contains("--dir is empty"), "\(empty.stderr)")
        }
    }

    @Test func withRoomTheCommandRunsAndTheVariableMovesTheBar() async throws {
        try await withScratch { scratch in
            chmod(scratch, 0o777)
            try await withStorageServer(root: URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.2")) {
                server in
                let sync = [
                    "sync", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/c", "--state",
                    scratch + "/s.sqlite",
                ]
                // 17 leaves the 16 it asks for.
                let restored = try await run(sync, scratch, tasks: 17)
                #expect(restored.status == 0, "\(restored.stderr)")
                #expect(FileManager.default.fileExists(atPath: scratch + "/c"))
                // Asking for more than the limit leaves refuses, naming the number asked for.
                expectRefused(
                    try await run(sync, scratch, tasks: 24, environment: ["SYNC_AGENT_MIN_THREADS": "30"]), tasks: 24,
                    wanted: 30, "SYNC_AGENT_MIN_THREADS=30")
                // A value that is no number is named, with a good one.
                for bad in ["many", "-1", "100001", "99999999999999999999999", ""] {
                    let result = try await run(sync, scratch, tasks: nil, environment: ["SYNC_AGENT_MIN_THREADS": bad])
                    #expect(result.status == 6, "\(bad): \(result.stderr)")
                    #expect(
                        result.stderr.contains("SYNC_AGENT_MIN_THREADS=\(bad.debugDescription) is not a number"),
                        "\(result.stderr)")
                }
                // 0 skips the check: at 12 the up-to-date check then runs (a replay of nothing
                // new needs few threads) instead of being refused.
                let unchecked = try await run(sync, scratch, tasks: 12, environment: ["SYNC_AGENT_MIN_THREADS": "0"])
                #expect(!unchecked.stderr.contains("more threads may start"), "\(unchecked.stderr)")
            }
        }
    }

    /// In a user namespace of its own (`unshare -r`, a rootless container) the process is root
    /// with every capability there, but the kernel still counts the outside user's tasks: no
    /// exemption, the same refusal.
    @Test func aUserNamespaceIsNoExemption() async throws {
        try await withScratch { scratch in
            chmod(scratch, 0o777)
            let probe = try await run([], scratch, tasks: nil, wrappedBy: ["/usr/bin/unshare", "-Ur", "/bin/true"])
            guard probe.status == 0 else { return } // user namespaces are off on this machine
            let result = try await run(
                ["status", "--dir", scratch + "/c", "--state", scratch + "/s.sqlite"], scratch, tasks: 12,
                wrappedBy: ["/usr/bin/unshare", "-Ur"])
            #expect(result.status == 6, "\(result.stderr)")
            #expect(result.stderr.contains("more threads may start"), "\(result.stderr)")
        }
    }

    /// `watch` runs each storage's updates on a queue of its own: 8 storages peaked at 24
    /// threads and hung at limits of 17–19. It asks for one more thread a storage, at the start
    /// and at each SIGHUP reload (a reload that would not fit is refused, and the agent runs on).
    @Test func watchAsksForAThreadAStorage() async throws {
        try await withScratch { scratch in
            chmod(scratch, 0o777)
            try await withStorageServer(root: URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.2")) {
                server in
                func config(_ count: Int) -> String {
                    "storages:\n"
                        + (1...count).map { WatchConfigTests.storage("s\($0)", server, scratch: scratch) }.joined(
                            separator: "\n") + "\n"
                }
                let path = scratch + "/agent.yaml"
                try config(8).write(toFile: path, atomically: false, encoding: .utf8)
                // The start check passes at 20 (19 free); 8 storages need more.
                let refused = try await run(["watch", "--config", path], scratch, tasks: 20)
                #expect(refused.status == 6, "\(refused.stderr)")
                #expect(refused.stderr.contains("to watch 8 storages (ulimit -u allows user \(Self.uid) 20 tasks"))
                #expect(!FileManager.default.fileExists(atPath: scratch + "/s1"), "nothing was synced")

                // One storage fits; a reload to 8 does not, and is refused with the reason.
                try config(1).write(toFile: path, atomically: false, encoding: .utf8)
                let log = scratch + "/watch.log"
                let agent = try ChildProcess(
                    "/usr/bin/setpriv",
                    [
                        "--reuid=\(Self.uid)", "--regid=\(Self.uid)", "--clear-groups", "/usr/bin/prlimit",
                        "--nproc=20",
                        SyncAgentBinary.path, "watch", "--config", path,
                    ], stderr: log)
                async let status = agent.exitStatus()
                func logText() -> String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
                for _ in 0..<600 where !logText().contains("restored 1.2") {
                    try await Task.sleep(for: .milliseconds(50))
                }
                #expect(logText().contains("restored 1.2"), "\(logText())")
                try config(8).write(toFile: path, atomically: false, encoding: .utf8)
                agent.send(SIGHUP)
                for _ in 0..<600 where !logText().contains("SIGHUP") {
                    try await Task.sleep(for: .milliseconds(50))
                }
                agent.send(SIGTERM)
                #expect(await status == 0, "\(logText())")
                #expect(logText().contains("running on with the previous configuration"), "\(logText())")
                #expect(logText().contains("to watch 8 storages"), "\(logText())")
                #expect(!FileManager.default.fileExists(atPath: scratch + "/s2"), "the reload added nothing")
            }
        }
    }

    /// After the start, a limit that leaves the agent too few threads stalls its storages'
    /// database work for good (forced here with the check off at 10 tasks, where 2 storages
    /// stalled in every run). `/healthz` says 503 naming them once the stall limit passes, and
    /// the systemd watchdog is no longer pinged. Before, `/healthz` said 200 through it.
    /// Whether the stall comes depends on which threads the agent made before the limit bit:
    /// on a loaded machine (a clean clone's `make test` beside other work) one run in many got
    /// every thread it needed and stayed healthy, and in CI one stalled before its watchdog
    /// task ever ran (no ping at all, so nothing showed that pings stop). So up to four agents
    /// are started, each watched 20 s, and the test asserts on the first that pinged and then
    /// stalled (or, after four, on the last).
    @Test func aStalledAgentIsUnhealthyAndStopsPingingTheWatchdog() async throws {
        try await withScratch { root in
            chmod(root, 0o777)
            try await withStorageServer(root: URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.2")) {
                server in
                let socketName = "@content-sync-stall-\(UUID().uuidString.prefix(8))"
                let systemd = try FakeNotifySocket(name: socketName)
                defer { systemd.close() }
                var attempt = 0
                var agent: ChildProcess
                var answer = (0, "")
                var base = ""
                var scratch = root
                var pingsBefore = 0
                func pings() -> Int { systemd.messages.filter { $0 == "WATCHDOG=1" }.count }
                var seen: [String] = []
                repeat {
                    attempt += 1
                    pingsBefore = pings()
                    scratch = root + "/attempt\(attempt)"
                    try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
                    chmod(scratch, 0o777)
                    let path = scratch + "/agent.yaml"
                    try WatchConfigTests.agentConfig([
                        WatchConfigTests.storage("a", server, scratch: scratch),
                        WatchConfigTests.storage("b", server, scratch: scratch),
                    ]).write(toFile: path, atomically: false, encoding: .utf8)
                    agent = try ChildProcess(
                        "/usr/bin/setpriv",
                        [
                            "--reuid=\(Self.uid)", "--regid=\(Self.uid)", "--clear-groups", "/usr/bin/prlimit",
                            "--nproc=10",
                            "/usr/bin/env", "SYNC_AGENT_MIN_THREADS=0", "SYNC_AGENT_STALL_LIMIT=3",
                            "NOTIFY_SOCKET=\(socketName)", "WATCHDOG_USEC=200000",
                            SyncAgentBinary.path, "watch", "--config", path,
                        ], stderr: scratch + "/watch.log")
                    base = try await WatchConfigTests.endpoint(scratch, once: ["serving /metrics"])
                    for _ in 0..<20 {
                        answer = try await WatchConfigTests.get("\(base)/healthz", scratch: scratch)
                        if answer.0 == 503 { break }
                        try await Task.sleep(for: .seconds(1))
                    }
                    seen.append("attempt \(attempt): \(answer.0), \(pings() - pingsBefore) ping(s)")
                    if (answer.0 == 503 && pings() > pingsBefore) || attempt == 4 { break }
                    agent.send(SIGKILL)
                    _ = await agent.exitStatus()
                } while true
                let log = scratch + "/watch.log"
                let running = agent
                async let status = running.exitStatus()
                defer { running.send(SIGKILL) }
                func logText() -> String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
                #expect(answer.0 == 503, "\(seen) \(answer) \(logText())")
                #expect(answer.1.contains("not answered") && answer.1.contains("task limit"), "\(answer.1)")
                // One storage or both (one sometimes gets its thread and goes on), named.
                #expect(
                    ["storage a has", "storage b has", "storages a (", "storages b ("].contains {
                        answer.1.contains($0)
                    },
                    "\(answer.1)")
                let pingsThen = pings()
                try await Task.sleep(for: .seconds(1))
                let stillStalled = try await WatchConfigTests.get("\(base)/healthz", scratch: scratch).0 == 503
                let pingsLater = pings()
                if stillStalled {
                    // One ping may have been on its way when the stall was seen.
                    #expect(pingsLater <= pingsThen + 1, "pinged through the stall: \(pingsThen) → \(pingsLater)")
                }
                #expect(pingsThen > pingsBefore, "the watchdog was pinged before the stall: \(seen)")
                running.send(SIGTERM)
                try await Task.sleep(for: .milliseconds(500))
                running.send(SIGTERM)
                _ = await status
            }
        }
    }

    /// The cgroup path, for real: a pids cgroup (v1's controller, or v2 with pids enabled) with
    /// `pids.max` 12 refuses a sync, naming the folder; at 64 it runs.
    @Test(.enabled(if: TaskLimitTests.pidsCgroupParent() != nil))
    func aCgroupPidsLimitIsNamed() async throws {
        let parent = try #require(Self.pidsCgroupParent())
        let folder = parent + "/content-sync-test-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        defer { rmdir(folder) }
        try await withScratch { scratch in
            func sync(_ limit: Int) async throws -> CommandResult {
                try "\(limit)\n".write(toFile: folder + "/pids.max", atomically: false, encoding: .utf8)
                let line =
                    "echo $$ > '\(folder)/cgroup.procs' && exec '\(SyncAgentBinary.path)' status --dir '\(scratch)/c' --state '\(scratch)/s.sqlite'"
                return try await CommandResult.capturing(in: scratch) { out, err in
                    try await ChildProcess.run(
                        "/usr/bin/timeout", ["-k", "5", "60", "/bin/sh", "-c", line], stdout: out, stderr: err)
                }
            }
            let refused = try await sync(12)
            #expect(refused.status == 6, "\(refused.stderr)")
            #expect(
                refused.stderr.contains("(the cgroup \(folder) allows 12 tasks (pids.max) and 1 runs in it)"),
                "\(refused.stderr)")
            #expect(refused.stderr.contains("TasksMax="), "\(refused.stderr)")
            let ran = try await sync(64)
            #expect(ran.status == 0, "\(ran.stderr)")
        }
    }

    /// A folder in which a pids cgroup can be made and a process moved into: v1's pids
    /// hierarchy, or v2's root when this process is in it and its subtree has the pids
    /// controller. Nil when neither (not root, no cgroup filesystem, a v2 container's leaf).
    static func pidsCgroupParent() -> String? {
        guard getuid() == 0 else { return nil }
        if access("/sys/fs/cgroup/pids/cgroup.procs", W_OK) == 0 { return "/sys/fs/cgroup/pids" }
        if let controllers = try? String(contentsOfFile: "/sys/fs/cgroup/cgroup.subtree_control", encoding: .utf8),
            controllers.split(separator: " ").contains(where: {
                $0.trimmingCharacters(in: .whitespacesAndNewlines) == "pids"
            }),
            (try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8)) == "0::/\n",
            access("/sys/fs/cgroup/cgroup.procs", W_OK) == 0
        {
            return "/sys/fs/cgroup"
        }
        return nil
    }
}

/// A task limit met after the start-up check (another process of the user took the room) is
/// still exit 6 in every command, as in `sync`, not 3 (`cache get`) or 1 (`serve`, `watch`).
@Suite("A task limit exits 6 in every command")
struct TaskLimitExitCodeTests {
    /// The library's messages name its settings; the CLI writes the flag instead (outside
    /// audit: `CacheConfiguration.diskLimit` reached operators).
    @Test(arguments: [
        (
            "raise the limit (CacheConfiguration.diskLimit) or store it elsewhere",
            "raise the limit (--max-size) or store it elsewhere"
        ),
        (
            "publish its first version with PublishOptions.initialize, or name",
            "publish its first version with --init, or name"
        ),
        ("set CacheConfiguration.sharing = .group to share it", "set --shared-group to share it"),
    ])
    func libraryNamesBecomeFlags(message: String, shown: String) {
        #expect(CLIFailure.namingFlags(message) == shown)
    }

    @Test func theCacheAndTheServerMapTheLimitTo6() {
        let noThread = TransportError(code: .threadLimit, message: "the transport cannot start the thread 'cs.curl.0'")
        let cache = CLIFailure(
            cache: ItemCacheError(code: .fetch, message: "cannot fetch http://h/x: \(noThread)", underlying: noThread))
        #expect(cache.code == 6)
        let network = TransportError(code: .network, message: "refused")
        #expect(CLIFailure(cache: ItemCacheError(code: .fetch, message: "m", underlying: network)).code == 3)
        let serving = StorageServerError(
            code: .listenFailed, message: "no thread", underlying: ThreadStartError(name: "serve.accept", errno: EAGAIN)
        )
        #expect(ServeCommand.exitCode(for: serving) == 6)
        #expect(ServeCommand.exitCode(for: StorageServerError(code: .stoppedServing, message: "m")) == 1)
    }

    @Test(
        "SYNC_AGENT_MIN_THREADS: unset 16, a number from 0 to 100000, else exit 6 naming it",
        arguments: [
            (nil, 16), ("0", 0), ("24", 24), ("100000", 100_000), ("100001", nil), ("-1", nil), ("", nil),
            ("16 ", nil), ("0x10", nil), ("99999999999999999999", nil),
        ] as [(String?, Int?)])
    func theVariable(setting: String?, expected: Int?) {
        switch SyncAgent.minimumTasks(setting: setting) {
        case .success(let number): #expect(number == expected)
        case .failure(let failure):
            #expect(expected == nil)
            #expect(failure.code == 6 && failure.message.contains("SYNC_AGENT_MIN_THREADS="))
        }
    }

    @Test(
        "SYNC_AGENT_STALL_LIMIT: unset 60 s, seconds or a duration from 1 s to 1 d, else exit 6 naming it",
        arguments: [
            (nil, 60), ("1", 1), ("90", 90), ("90s", 90), ("5m", 300), ("1d", 86_400), ("86401", nil), ("2d", nil),
            ("0", nil), ("-1", nil), ("", nil), ("1.5", nil), ("5 m", nil), ("99999999999999999999", nil),
        ] as [(String?, Int64?)])
    func theStallLimitVariable(setting: String?, expected: Int64?) {
        switch WatchCommand.stallLimit(setting: setting) {
        case .success(let limit): #expect(limit == .seconds(expected ?? -1))
        case .failure(let failure):
            #expect(expected == nil)
            #expect(failure.code == 6 && failure.message.hasPrefix("SYNC_AGENT_STALL_LIMIT="), "\(failure.message)")
        }
    }
}
