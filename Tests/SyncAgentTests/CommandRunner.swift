import Foundation
import StorageServer

/// Runs the built `sync-agent` as a child process, waiting through its termination handler so
/// no cooperative thread blocks.
struct CommandResult {
    var status: Int32
    var stdout: String
    var stderr: String
    /// Stdout's bytes (``stdout`` is empty for bytes that are not UTF-8, such as an image).
    var stdoutData = Data()
}

extension CommandResult {
    /// The result of a child with exit `status` that wrote its streams into `out` and `err`.
    init(status: Int32, outputFile out: String, errorFile err: String) {
        let output = (try? Data(contentsOf: URL(fileURLWithPath: out))) ?? Data()
        self.init(
            status: status, stdout: String(data: output, encoding: .utf8) ?? "",
            stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "", stdoutData: output)
    }

    /// Runs `child` with two fresh files in `scratch` for its stdout and stderr (it returns the
    /// exit status), and reads them.
    static func capturing(in scratch: String, _ child: (_ out: String, _ err: String) async throws -> Int32)
        async throws -> CommandResult
    {
        let id = UUID().uuidString
        let (out, err) = (scratch + "/\(id).out", scratch + "/\(id).err")
        return CommandResult(status: try await child(out, err), outputFile: out, errorFile: err)
    }
}

enum SyncAgentBinary {
    /// The binary sits beside the test bundle in the build folder; `SYNC_AGENT_UNDER_TEST` names
    /// another build to run the same contract against (a release build, or an older one to show
    /// that a test fails without its fix).
    static var path: String {
        if let other = ProcessInfo.processInfo.environment["SYNC_AGENT_UNDER_TEST"], !other.isEmpty { return other }
        return URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(
            "sync-agent"
        ).path
    }

    /// Runs the binary with `arguments`, in this process's environment plus `environment`.
    static func run(_ arguments: [String], scratch: String, environment: [String: String] = [:]) async throws
        -> CommandResult
    {
        try await CommandResult.capturing(in: scratch) { out, err in
            try await ChildProcess(path, arguments, stdout: out, stderr: err, environment: environment).exitStatus()
        }
    }

    /// Runs the binary with `arguments` as a user without privileges: as `nobody` through
    /// `setpriv` when this process is root (who may write any file), else as this user.
    static func runUnprivileged(_ arguments: [String], scratch: String) async throws -> CommandResult {
        guard getuid() == 0 else { return try await run(arguments, scratch: scratch) }
        return try await CommandResult.capturing(in: scratch) { out, err in
            try await ChildProcess(
                "/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", path] + arguments, stdout: out,
                stderr: err
            ).exitStatus()
        }
    }

    /// A user id no one else runs as, for task-limit tests (`RLIMIT_NPROC` counts every task of
    /// the user): made of this test process's PID, so two test runs on one machine never share
    /// one, and of `slot`, 0 to 3, so that suites running at once do not either.
    static func unusedUID(slot: Int) -> Int {
        3_000_000 + Int(getpid()) * 4 + slot
    }

    /// Runs the binary with `arguments` as user `uid` (root only: `setpriv`) under `prlimit
    /// --nproc=tasks` (none when nil), with `environment` added, ended by `timeout` after 60 s
    /// (exit 124) so that a hang fails the test instead of holding the run. `RLIMIT_NPROC`
    /// counts every task of the user: give each suite its own unused uid and run its tests one
    /// at a time. `wrapper` runs first (`unshare -Ur`); with no arguments it runs alone.
    static func runTaskLimited(
        _ arguments: [String], scratch: String, uid: Int, tasks: Int?, environment: [String: String] = [:],
        wrappedBy wrapper: [String] = []
    ) async throws -> CommandResult {
        try await CommandResult.capturing(in: scratch) { out, err in
            let limit = tasks.map { ["/usr/bin/prlimit", "--nproc=\($0)"] } ?? []
            let settings = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            return try await ChildProcess(
                "/usr/bin/timeout",
                ["-k", "5", "60", "/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups"] + wrapper
                    + limit + (wrapper.count > 0 && arguments.isEmpty ? [] : ["/usr/bin/env"] + settings + [path])
                    + arguments,
                stdout: out, stderr: err
            ).exitStatus()
        }
    }

    /// Runs the binary with `arguments` under `ulimit -n openFiles` (bash sets the soft and the
    /// hard limit, so the binary cannot raise it).
    static func run(_ arguments: [String], scratch: String, openFiles: Int) async throws -> CommandResult {
        try await CommandResult.capturing(in: scratch) { out, err in
            let line = "ulimit -n \(openFiles) && exec '\(path)' " + arguments.map { "'\($0)'" }.joined(separator: " ")
            return try await ChildProcess.run("/bin/bash", ["-c", line], stdout: out, stderr: err)
        }
    }

    /// Starts `sync-agent watch` mirroring `server` into `scratch`/content (state in
    /// `scratch`/state.sqlite), its stderr in `scratch`/watch.log, with `arguments` added.
    static func watch(
        _ server: StorageServer, scratch: String, _ arguments: [String] = ["--interval", "60"],
        environment: [String: String] = [:]
    ) throws -> ChildProcess {
        try ChildProcess(
            path,
            [
                "watch", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/content",
                "--state", scratch + "/state.sqlite",
            ] + arguments,
            stderr: scratch + "/watch.log", environment: environment)
    }

    /// Starts `sync-agent serve`, returning the process and the URL it printed.
    static func serve(
        _ folder: String, scratch: String, arguments: [String] = [], stderr: String? = nil, openFiles: Int? = nil
    ) async throws -> (ChildProcess, URL) {
        let out = scratch + "/serve.out"
        let command = [path, "serve", folder, "--port", "0"] + arguments
        // With a lower open-file limit (`ulimit -n`), through a shell that execs the agent.
        let process =
            try openFiles.map { limit in
                try ChildProcess(
                    "/bin/bash", ["-c", "ulimit -n \(limit) && exec \"$@\"", "serve"] + command, stdout: out,
                    stderr: stderr)
            } ?? ChildProcess(command[0], Array(command.dropFirst()), stdout: out, stderr: stderr)
        for _ in 0..<500 {
            if let text = try? String(contentsOfFile: out, encoding: .utf8),
                let line = text.split(separator: "\n").first,
                let url = URL(string: String(line))
            {
                return (process, url)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        process.send(SIGKILL)
        _ = await process.exitStatus()
        throw CocoaError(.fileReadUnknown)
    }
}

func withScratch<T>(_ body: (String) async throws -> T) async throws -> T {
    let path = NSTemporaryDirectory() + "sync-agent-tests-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try await body(path)
}
