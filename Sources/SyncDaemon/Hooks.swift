import Foundation
import Logging
import Synchronization
import ThreadKit
import Transport

/// A program the agent runs around an update: before the switch (it may veto it) or after a
/// successful update.
///
/// The command is an argument vector, run without a shell: write `["/bin/sh", "-c", "…"]` for
/// one. A first word without a `/` is looked up on `PATH`.
public struct Hook: Sendable, Equatable {
    /// The program and its arguments.
    public var command: [String]
    /// How long the hook may run before it is stopped (SIGTERM, then SIGKILL). Default 60 s.
    public var timeout: Duration = .seconds(60)
    /// Names the hook in logs and in a veto's reason. Default: the program's file name.
    public var name: String?

    /// A hook running `command`.
    public init(command: [String], timeout: Duration = .seconds(60), name: String? = nil) {
        self.command = command
        self.timeout = timeout
        self.name = name
    }

    /// ``name``, or the program's file name.
    public var displayName: String {
        name ?? command.first.map { ($0 as NSString).lastPathComponent } ?? "hook"
    }
}

/// How a hook run ended, and the last thing it said.
public struct HookOutcome: Sendable, Equatable, CustomStringConvertible {
    /// How the hook's process ended.
    public enum Termination: Sendable, Equatable {
        /// It exited with this status (0 is success).
        case exited(Int32)
        /// A signal it did not get from the runner ended it (SIGSEGV, or someone's `kill`).
        case signalled(Int32)
        /// It outran its timeout and was stopped: with SIGTERM, or with SIGKILL when it was still
        /// running after ``HookRunner/terminationGrace`` (`killed`). It has been reaped either way.
        case timedOut(killed: Bool)
        /// The task running it was cancelled, and the hook was stopped as for a timeout.
        case cancelled
        /// It never ran; the text says why (no such program, not executable, no such folder, …).
        case couldNotStart(String)
    }

    /// How the hook's process ended.
    public var termination: Termination
    /// The last non-empty line it wrote, on standard output or error: usually its reason.
    public var lastOutputLine: String?

    /// An outcome with every field given.
    public init(termination: Termination, lastOutputLine: String? = nil) {
        self.termination = termination
        self.lastOutputLine = lastOutputLine
    }

    /// Whether the hook exited with status 0.
    public var succeeded: Bool { termination == .exited(0) }

    /// How it ended, in words: `exited with status 3`, `timed out (killed)`, ….
    public var description: String {
        switch termination {
        case .exited(let status): "exited with status \(status)"
        case .signalled(let signal): "was killed by signal \(signal) (\(String(cString: strsignal(signal))))"
        case .timedOut(let killed):
            killed ? "timed out and was killed (it ignored SIGTERM)" : "timed out and was stopped with SIGTERM"
        case .cancelled: "was stopped because the update was cancelled"
        case .couldNotStart(let reason): "could not start: \(reason)"
        }
    }
}

/// Runs hooks: spawns each as a child process in its own process group, logs every line of its
/// output, enforces its timeout, and reaps it.
///
/// A hook's standard input is `/dev/null`; its output and error are read line by line and
/// logged at info with the metadata `hook` (its name) and `stream` (`stdout` or `stderr`), on
/// top of the logger's own (the adapters add `storage`). The waiting happens on a thread of the
/// run's own, never on the cooperative pool.
///
/// A timeout or a cancelled task stops the hook's whole process group. A hook that exits while
/// something it started in the background runs on is done: the background process is left
/// alone, and its output is read for ``outputGrace`` more.
public struct HookRunner: Sendable {
    /// After SIGTERM (a timeout, a cancelled task), how long the hook's process group has to end
    /// before SIGKILL. Default 5 s.
    public var terminationGrace: Duration = .seconds(5)
    /// After the hook exits, how long its output is still read while something it started in
    /// the background keeps the pipe open. Default 1 s.
    public var outputGrace: Duration = .seconds(1)
    /// Values that are never logged: each occurrence in a hook's output is shown as `***` (the
    /// storage's header values, which a hook that prints its environment would show). Values
    /// under 4 bytes are not looked for. Default none.
    public var secrets: [String] = []
    /// How many of a run's output lines are logged, and how many bytes of them: past either, one
    /// warning says so and the rest is read but not logged (a hook running `yes` logged 160 MB
    /// in a minute, and journald's rate limit then dropped the agent's own errors). The last
    /// line is still reported with the outcome. Default 1,000 lines, 1 MiB.
    public var loggedOutput = (lines: 1_000, bytes: 1 << 20)

    /// A runner with the default graces.
    public init(
        terminationGrace: Duration = .seconds(5), outputGrace: Duration = .seconds(1), secrets: [String] = []
    ) {
        self.terminationGrace = terminationGrace
        self.outputGrace = outputGrace
        self.secrets = secrets
    }

    /// `line` with every ``secrets`` value in it masked.
    func masked(_ line: String) -> String {
        secrets.reduce(line) { text, secret in
            secret.utf8.count < 4 ? text : text.replacingOccurrences(of: secret, with: Redaction.mask)
        }
    }

    /// Runs `hook` in `workingDirectory` (nil: the agent's own) with this process's environment
    /// plus `environment`, and returns how it ended. Never throws: a hook that cannot start says
    /// so in the outcome. Cancelling the calling task stops the hook (SIGTERM, then SIGKILL) and
    /// returns ``HookOutcome/Termination/cancelled`` once it is reaped.
    public func run(_ hook: Hook, environment: [String: String], workingDirectory: String?, logger: Logger) async
        -> HookOutcome
    {
        var logger = logger
        logger[metadataKey: "hook"] = "\(hook.displayName)"
        guard !Task.isCancelled else { return HookOutcome(termination: .cancelled) }
        let executable: String
        switch Self.resolve(
            hook.command.first, path: environment["PATH"] ?? ProcessInfo.processInfo.environment["PATH"])
        {
        case .success(let found): executable = found
        case .failure(let reason): return HookOutcome(termination: .couldNotStart(reason.text))
        }
        if let workingDirectory {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: workingDirectory, isDirectory: &isFolder), isFolder.boolValue
            else {
                return HookOutcome(termination: .couldNotStart("its working folder \(workingDirectory) does not exist"))
            }
        }
        let process: HookProcess
        do {
            process = try HookProcess.start(
                executable, Array(hook.command.dropFirst()), environment: environment,
                workingDirectory: workingDirectory)
        } catch {
            return HookOutcome(termination: .couldNotStart(error.text))
        }
        logger.debug("hook started", metadata: ["pid": "\(process.pid)"])
        let limits = HookSupervision.Limits(
            timeout: hook.timeout, terminationGrace: terminationGrace, outputGrace: outputGrace)
        let outcome = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                // Without a thread (a task limit), the hook is supervised here: its timeout
                // still bounds the wait.
                DetachedThread.startOrRunHere(name: "hook", stackSize: 1 << 18) { [logger, loggedOutput] in
                    var (lines, bytes, cut) = (0, 0, false)
                    continuation.resume(
                        returning: process.supervise(limits) { stream, line in
                            guard !cut else { return }
                            lines += 1
                            bytes += line.utf8.count
                            if lines <= loggedOutput.lines, bytes <= loggedOutput.bytes {
                                logger.info("\(masked(line))", metadata: ["stream": "\(stream.rawValue)"])
                            } else {
                                cut = true
                                logger.warning(
                                    "the hook's output passed \(loggedOutput.lines) lines or \(loggedOutput.bytes) bytes: the rest of this run's output is read but not logged"
                                )
                            }
                        })
                }
            }
        } onCancel: {
            process.cancel()
        }
        var shown = outcome
        shown.lastOutputLine = outcome.lastOutputLine.map(masked)
        logger.debug("hook ended", metadata: ["outcome": "\(shown)"])
        return shown
    }

    /// Why a hook could not start, in words.
    struct StartFailure: Error {
        var text: String
    }

    /// `program`'s path: as given when it holds a `/`, else the first executable file of that
    /// name on `path`.
    static func resolve(_ program: String?, path: String?) -> Result<String, StartFailure> {
        guard let program, !program.isEmpty else { return .failure(StartFailure(text: "its command is empty")) }
        func executableFile(_ candidate: String) -> Bool {
            var info = stat()
            return stat(candidate, &info) == 0 && info.st_mode & S_IFMT == S_IFREG && access(candidate, X_OK) == 0
        }
        /// An executable file exec takes: a binary (ELF), or a script with its `#!` line; a script
        /// without one was accepted, then failed at every run with "Exec format error".
        func startable(_ found: String) -> Result<String, StartFailure> {
            let fd = open(found, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
            guard fd >= 0 else { return .success(found) }
            defer { close(fd) }
            var head = [UInt8](repeating: 0, count: 4)
            let count = read(fd, &head, 4)
            if count >= 2, head[0] == UInt8(ascii: "#"), head[1] == UInt8(ascii: "!") { return .success(found) }
            if count == 4, head == [0x7F, UInt8(ascii: "E"), UInt8(ascii: "L"), UInt8(ascii: "F")] {
                return .success(found)
            }
            return .failure(
                StartFailure(
                    text:
                        "\(found) is neither a program nor a script with a '#!' line, so it cannot be run (Exec format error); make its first line '#!/bin/sh' (or its interpreter's)"
                ))
        }
        if program.contains("/") {
            if executableFile(program) { return startable(program) }
            let problem =
                FileManager.default.fileExists(atPath: program) ? "is not an executable file" : "does not exist"
            return .failure(StartFailure(text: "\(program) \(problem)"))
        }
        let folders = (path ?? "/usr/local/bin:/usr/bin:/bin").split(separator: ":").map(String.init)
        for folder in folders where folder.hasPrefix("/") {
            let candidate = folder + "/" + program
            if executableFile(candidate) { return startable(candidate) }
        }
        return .failure(
            StartFailure(
                text: "no executable \(program) on PATH (\(folders.joined(separator: ":"))); give its absolute path"))
    }
}

extension Error {
    /// The error's text as the runner reports it.
    fileprivate var text: String {
        (self as? HookRunner.StartFailure)?.text ?? "\(self)"
    }
}
