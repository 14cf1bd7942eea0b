import ContentSync
import Foundation
import Logging
import StorageFormat
import Synchronization
import Testing

@testable import SyncDaemon

/// A swift-log handler that keeps every record, for assertions on what was logged.
struct CapturingLogHandler: LogHandler {
    struct Record: Sendable, Equatable {
        var level: Logger.Level
        var message: String
        var metadata: [String: String]
    }

    final class Store: Sendable {
        private let records = Mutex<[Record]>([])
        var all: [Record] { records.withLock { $0 } }
        func append(_ record: Record) { records.withLock { $0.append(record) } }
        /// The messages of the records whose metadata `stream` is `stream`, in order.
        func lines(_ stream: String) -> [String] { all.filter { $0.metadata["stream"] == stream }.map(\.message) }
    }

    let store: Store
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { _, event in event }
        store.append(Record(level: event.level, message: "\(event.message)", metadata: merged.mapValues { "\($0)" }))
    }

    /// A logger writing into a new store.
    static func logger() -> (Logger, Store) {
        let store = Store()
        return (Logger(label: "hooks-test") { _ in CapturingLogHandler(store: store) }, store)
    }
}

/// Runs `body` with a fresh folder (its real path: /tmp may be a symlink), deleted afterwards.
func withHookFolder<T>(_ body: (String) async throws -> T) async throws -> T {
    let path = NSTemporaryDirectory() + "hook-tests-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try await body(URL(fileURLWithPath: path).resolvingSymlinksInPath().path)
}

/// A hook running `script` with /bin/sh; `$1` is `argument`.
func shellHook(_ script: String, _ argument: String = "", timeout: Duration = .seconds(30), name: String = "test-hook")
    -> Hook
{
    Hook(command: ["/bin/sh", "-c", script, "sh", argument], timeout: timeout, name: name)
}

/// Whether `pid` no longer runs: gone, or a zombie left to init (a grandchild we do not reap).
func isGone(_ pid: pid_t) -> Bool {
    if kill(pid, 0) != 0 && errno == ESRCH { return true }
    let stat = (try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)) ?? ""
    // "pid (comm) S …": the state follows the last ')'.
    guard let close = stat.lastIndex(of: ")") else { return true }
    return stat[stat.index(close, offsetBy: 2)] == "Z"
}

func readPID(_ path: String) throws -> pid_t {
    try #require(pid_t(String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
}

/// Waits until `path` exists (a hook wrote it), polling.
func waitForFile(_ path: String) async throws {
    for _ in 0..<600 where !FileManager.default.fileExists(atPath: path) {
        try await Task.sleep(for: .milliseconds(50))
    }
    try #require(FileManager.default.fileExists(atPath: path), "\(path) never appeared")
}

@Suite("HookRunner runs real processes", .timeLimit(.minutes(3)))
struct HookRunnerTests {
    /// A grace long enough that a hook ending on SIGTERM does so before SIGKILL on a loaded machine.
    let runner = HookRunner(terminationGrace: .seconds(3), outputGrace: .milliseconds(300))

    @Test func theHookGetsTheAgentsEnvironmentPlusTheGivenVariablesInItsFolder() async throws {
        try await withHookFolder { folder in
            let (logger, store) = CapturingLogHandler.logger()
            let outcome = await runner.run(
                shellHook(#"printf '%s\n' "$HOOK_TEST_VALUE" "$PATH" "$(pwd -P)""#),
                environment: ["HOOK_TEST_VALUE": "a b=c ü"], workingDirectory: folder, logger: logger)
            #expect(outcome.termination == .exited(0))
            #expect(store.lines("stdout") == ["a b=c ü", ProcessInfo.processInfo.environment["PATH"] ?? "", folder])
        }
    }

    @Test func everyLineOfBothStreamsIsLoggedAtInfoWithTheHooksName() async throws {
        var (logger, store) = CapturingLogHandler.logger()
        logger[metadataKey: "storage"] = "docs"
        let outcome = await runner.run(
            shellHook("echo one; printf 'two\r\n'; echo three >&2; printf four", name: "announce"),
            environment: [:], workingDirectory: nil, logger: logger)
        #expect(outcome.termination == .exited(0))
        #expect(store.lines("stdout") == ["one", "two", "four"])
        #expect(store.lines("stderr") == ["three"])
        let output = store.all.filter { $0.metadata["stream"] != nil }
        #expect(output.count == 4)
        #expect(
            output.allSatisfy {
                $0.level == .info && $0.metadata["hook"] == "announce" && $0.metadata["storage"] == "docs"
            })
        // Two pipes have no order between them: the last line is the last of one stream or the other.
        #expect(["three", "four"].contains(outcome.lastOutputLine))
    }

    /// A storage's header values never reach the log through a hook's output: a hook that
    /// prints its environment (or the token itself) is logged with `***` in their place, and so
    /// is its last line.
    @Test func headerValuesInAHooksOutputAreMasked() async throws {
        let (logger, store) = CapturingLogHandler.logger()
        let masking = HookRunner(
            terminationGrace: .seconds(3), outputGrace: .milliseconds(300),
            secrets: ["Bearer ghp_SUPERSECRET123", "abc"])
        let outcome = await masking.run(
            shellHook(
                "echo 'auth: Bearer ghp_SUPERSECRET123 ok'; echo abc; echo 'again Bearer ghp_SUPERSECRET123'; exit 1"),
            environment: [:], workingDirectory: nil, logger: logger)
        #expect(store.lines("stdout") == ["auth: *** ok", "abc", "again ***"], "values under 4 bytes are left")
        #expect(outcome.lastOutputLine == "again ***")
    }

    /// The documented `Authorization: {env: GITHUB_TOKEN, prefix: "token "}`: the variable a
    /// hook inherits holds the bare token, which masking only the whole value let through.
    @Test func aPrefixedHeadersBareSecretIsMaskedToo() async throws {
        let configuration = try AgentConfigurationTests.load(
            "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n    headers:\n      Authorization: {env: GH_TOKEN_T, prefix: \"token \"}\n      X-Other: Bearer literalSECRET99\n",
            environment: ["PATH": "/usr/bin:/bin", "GH_TOKEN_T": "ghp_LEAKEDTOKEN123"])
        let settings = try #require(configuration.storages.first)
        var runner = settings.hookRunner
        runner.outputGrace = .milliseconds(300)
        let (logger, store) = CapturingLogHandler.logger()
        _ = await runner.run(
            shellHook(
                "echo GH_TOKEN_T=ghp_LEAKEDTOKEN123; echo 'sent token ghp_LEAKEDTOKEN123'; echo only literalSECRET99"),
            environment: [:], workingDirectory: nil, logger: logger)
        #expect(store.lines("stdout") == ["GH_TOKEN_T=***", "sent ***", "only ***"])
    }

    /// The base URL's password, and a user name that is the token (GitHub's
    /// `TOKEN:x-oauth-basic@`), are masked in a hook's output as a header's value is.
    @Test(arguments: [
        ("http://bob:UrlPassword99@h/a/", "echo url password: UrlPassword99; echo bob", ["url password: ***", "bob"]),
        ("http://bob:Url%2FPass99@h/a/", "echo Url/Pass99 Url%2FPass99", ["*** ***"]),
        ("http://TOKEN7TOKEN7:x-oauth-basic@h/a/", "echo t=TOKEN7TOKEN7 x-oauth-basic", ["t=*** x-oauth-basic"]),
    ])
    func theBaseURLsSecretsAreMasked(url: String, script: String, expected: [String]) async throws {
        let configuration = try AgentConfigurationTests.load(
            "storages:\n  a:\n    base-url: \(url)\n    dir: /tmp/a\n", environment: ["PATH": "/usr/bin:/bin"])
        var runner = try #require(configuration.storages.first).hookRunner
        runner.outputGrace = .milliseconds(300)
        let (logger, store) = CapturingLogHandler.logger()
        _ = await runner.run(shellHook(script), environment: [:], workingDirectory: nil, logger: logger)
        #expect(store.lines("stdout") == expected)
    }

    /// A hook that prints without end is logged up to a bound, then one warning; its last line
    /// is still its outcome's.
    @Test func aHooksLoggedOutputIsBounded() async throws {
        var bounded = runner
        bounded.loggedOutput = (lines: 100, bytes: 1 << 20)
        let (logger, store) = CapturingLogHandler.logger()
        let outcome = await bounded.run(
            shellHook("seq 1 5000"), environment: [:], workingDirectory: nil, logger: logger)
        #expect(store.lines("stdout") == (1...100).map(String.init))
        #expect(store.all.filter { $0.message.contains("passed 100 lines") }.count == 1)
        #expect(outcome.lastOutputLine == "5000")
        bounded.loggedOutput = (lines: 1_000, bytes: 50)
        let (bytesLogger, bytesStore) = CapturingLogHandler.logger()
        _ = await bounded.run(
            shellHook("seq 1 5000"), environment: [:], workingDirectory: nil, logger: bytesLogger)
        #expect(bytesStore.lines("stdout").joined().utf8.count <= 50)
        #expect(bytesStore.all.filter { $0.message.contains("50 bytes") }.count == 1)
    }

    /// An executable script without its `#!` line is named as such when the hook is resolved
    /// (`check-config` too), not left to fail at every run with "Exec format error".
    @Test func aScriptWithoutItsInterpreterLineIsRefusedByName() async throws {
        try await withHookFolder { folder in
            for (name, text, startable) in [
                ("bare", "echo hi\n", false), ("shebang", "#!/bin/sh\necho hi\n", true), ("empty", "", false),
            ] {
                let path = folder + "/" + name
                try Data(text.utf8).write(to: URL(fileURLWithPath: path))
                #expect(chmod(path, 0o755) == 0)
                switch HookRunner.resolve(path, path: nil) {
                case .success(let found): #expect(startable && found == path, "\(name)")
                case .failure(let reason):
                    #expect(!startable && reason.text.contains("'#!' line"), "\(name): \(reason.text)")
                }
            }
            if case .failure(let reason) = HookRunner.resolve("sh", path: "/bin:/usr/bin") {
                Issue.record("/bin/sh is a program: \(reason.text)")
            }
        }
    }

    @Test func theUnfinishedLastLineComesOutWhenItsStreamEnds() async throws {
        let (logger, store) = CapturingLogHandler.logger()
        // One stream, so the order is the order written (with two, which pipe the runner reads last
        // is not the order the hook wrote them: the test once saw "three" after "four").
        let outcome = await runner.run(
            shellHook("echo one; printf 'two\r\n'; printf four", name: "announce"), environment: [:],
            workingDirectory: nil, logger: logger)
        #expect(outcome.termination == .exited(0))
        #expect(store.lines("stdout") == ["one", "two", "four"])
        #expect(outcome.lastOutputLine == "four")
    }

    @Test func aLineLongerThanTheLimitIsCutThere() async throws {
        let (logger, store) = CapturingLogHandler.logger()
        let outcome = await runner.run(
            shellHook("head -c 40000 /dev/zero | tr '\\0' a; echo; echo end"),
            environment: [:], workingDirectory: nil, logger: logger)
        #expect(outcome.termination == .exited(0))
        #expect(
            store.lines("stdout").map(\.count) == [
                OutputLines.maxLine, OutputLines.maxLine, 40000 - 2 * OutputLines.maxLine, 3,
            ])
    }

    @Test func aNonZeroExitIsReportedWithItsStatusAndLastLine() async throws {
        let (logger, _) = CapturingLogHandler.logger()
        let outcome = await runner.run(
            shellHook("echo checking; echo 'index.html is missing' >&2; exit 3"),
            environment: [:], workingDirectory: nil, logger: logger)
        #expect(outcome.termination == .exited(3))
        #expect(!outcome.succeeded)
        #expect(outcome.lastOutputLine == "index.html is missing")
        #expect(outcome.description == "exited with status 3")
    }

    @Test func aHookKilledBySomeoneElseReportsTheSignal() async throws {
        let (logger, _) = CapturingLogHandler.logger()
        let outcome = await runner.run(
            shellHook("kill -USR1 $$"), environment: [:], workingDirectory: nil, logger: logger)
        #expect(outcome.termination == .signalled(SIGUSR1))
    }

    @Test func aHookThatIgnoresSIGTERMIsKilledAfterItsTimeoutAndReaped() async throws {
        try await withHookFolder { folder in
            let (logger, store) = CapturingLogHandler.logger()
            // The trap is inherited by the sleeps, which ignore SIGTERM as well.
            let hook = shellHook(
                "trap '' TERM; echo $$ > \"$1/pid\"; sleep 3600 & echo $! > \"$1/child\"; echo started; while :; do sleep 1; done",
                folder, timeout: .seconds(5)) // time for a slow fork and exec to set the trap
            let impatient = HookRunner(terminationGrace: .milliseconds(300), outputGrace: .milliseconds(300))
            let outcome = await impatient.run(hook, environment: [:], workingDirectory: nil, logger: logger)
            #expect(outcome.termination == .timedOut(killed: true))
            #expect(store.lines("stdout") == ["started"])
            let pid = try readPID(folder + "/pid")
            var status: Int32 = 0
            #expect(waitpid(pid, &status, WNOHANG) == -1 && errno == ECHILD, "the hook was not reaped")
            #expect(kill(pid, 0) == -1 && errno == ESRCH, "the hook still exists")
            // Its background child was in its process group and went with it.
            let child = try readPID(folder + "/child")
            defer { if !isGone(child) { kill(child, SIGKILL) } }
            for _ in 0..<100 where !isGone(child) { try await Task.sleep(for: .milliseconds(20)) }
            #expect(isGone(child), "the hook's background child survived")
        }
    }

    @Test func aHookThatEndsOnSIGTERMIsStoppedWithoutSIGKILL() async throws {
        try await withHookFolder { folder in
            let (logger, _) = CapturingLogHandler.logger()
            let hook = shellHook("echo $$ > \"$1/pid\"; exec sleep 60", folder, timeout: .seconds(5))
            let outcome = await runner.run(hook, environment: [:], workingDirectory: nil, logger: logger)
            #expect(outcome.termination == .timedOut(killed: false))
            let pid = try readPID(folder + "/pid")
            #expect(kill(pid, 0) == -1 && errno == ESRCH, "the hook was not reaped")
        }
    }

    @Test func cancellingTheCallingTaskStopsAndReapsTheHook() async throws {
        try await withHookFolder { folder in
            let (logger, _) = CapturingLogHandler.logger()
            let hook = shellHook("echo $$ > \"$1/pid.tmp\"; mv \"$1/pid.tmp\" \"$1/pid\"; exec sleep 60", folder)
            let runner = runner
            let task = Task { await runner.run(hook, environment: [:], workingDirectory: nil, logger: logger) }
            try await waitForFile(folder + "/pid")
            task.cancel()
            let outcome = await task.value
            #expect(outcome.termination == .cancelled)
            let pid = try readPID(folder + "/pid")
            #expect(kill(pid, 0) == -1 && errno == ESRCH, "the hook was not reaped")
        }
    }

    @Test func aBackgroundChildHoldingTheOutputDoesNotHoldTheRun() async throws {
        try await withHookFolder { folder in
            let (logger, store) = CapturingLogHandler.logger()
            // The background child lives until this test kills it: a fixed life (it was 60 s) ends
            // by itself when the run's return waits long for a thread on a loaded machine.
            let hook = shellHook("sleep 3600 & echo $! > \"$1/background\"; echo done", folder)
            let outcome = await runner.run(hook, environment: [:], workingDirectory: nil, logger: logger)
            let background = try readPID(folder + "/background")
            defer { kill(background, SIGKILL) }
            #expect(outcome.termination == .exited(0))
            #expect(store.lines("stdout") == ["done"])
            #expect(!isGone(background), "a hook's background work that outlives it is left alone")
        }
    }

    @Test func aHookThatCannotStartSaysWhy() async throws {
        try await withHookFolder { folder in
            let (logger, _) = CapturingLogHandler.logger()
            func reason(_ hook: Hook, in directory: String? = nil) async -> String? {
                let outcome = await runner.run(hook, environment: [:], workingDirectory: directory, logger: logger)
                guard case .couldNotStart(let reason) = outcome.termination else { return nil }
                return reason
            }
            #expect(await reason(Hook(command: [folder + "/missing-hook"])) == "\(folder)/missing-hook does not exist")
            FileManager.default.createFile(atPath: folder + "/plain.txt", contents: Data("echo hi".utf8))
            #expect(
                await reason(Hook(command: [folder + "/plain.txt"])) == "\(folder)/plain.txt is not an executable file")
            let unknown = await reason(Hook(command: ["no-such-hook-program-4711"]))
            #expect(
                unknown?.hasPrefix("no executable no-such-hook-program-4711 on PATH") == true,
                "\(String(describing: unknown))")
            #expect(await reason(Hook(command: [])) == "its command is empty")
            #expect(
                await reason(Hook(command: ["/bin/true"]), in: folder + "/gone")
                    == "its working folder \(folder)/gone does not exist")
            // A first word without a slash is found on PATH.
            #expect(
                await runner.run(Hook(command: ["true"]), environment: [:], workingDirectory: nil, logger: logger)
                    .termination == .exited(0))
        }
    }
}
