import ArgumentParser
import CLinux
import FileKit
import Foundation
import ThreadKit

/// The root command; the `sync-agent` and `sync-agent-image` executables run ``start()``.
package struct SyncAgent: AsyncParsableCommand {
    package init() {}

    /// What `sync-agent --version` prints: the one place the tool's version is written.
    static let version = "0.12.0"

    package static let configuration = CommandConfiguration(
        commandName: "sync-agent",
        abstract: "Keeps a local folder in step with a storage published on static HTTP hosting.",
        discussion: """
            A storage is a folder with RXCacheConfig/ and RXCacheContent/ (GitHub raw, nginx, a bucket). \
            The state of each synced folder lives outside it, by default under \
            $XDG_STATE_HOME/content-sync/ (or ~/.local/state/content-sync/). \
            `sync-agent --version` prints the version.
            """,
        subcommands: [
            SyncCommand.self, WatchCommand.self, CheckConfigCommand.self, StatusCommand.self, ResetCommand.self,
            ServeCommand.self, PublishCommand.self, VerifyCommand.self, KeygenCommand.self, ForgetKeysCommand.self,
            CacheCommand.self, ImageCommand.self,
        ])

    /// A parent that starts us from a thread with SIGINT/SIGTERM blocked (Swift concurrency threads
    /// do) would leave them blocked here too, and the daemon could not be stopped gracefully.
    private static func unblockStopSignals() {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    /// At most ``mallocArenas`` malloc arenas, unless `MALLOC_ARENA_MAX` says otherwise (glibc
    /// reads it itself). glibc gives each thread that allocates while another holds an arena one
    /// of its own, up to 8 per core, and memory freed in one is not reused by the others: a
    /// restore's phases run on different threads (extraction workers, the blocking-work pool, the
    /// cooperative pool), so their peaks added up instead of overlapping. A 100,000-file restore
    /// peaked at 233 MiB of RSS with 88 MiB of heap in use (heaptrack).
    package static func limitMallocArenas() {
        guard getenv("MALLOC_ARENA_MAX") == nil else { return }
        _ = clinux_limit_malloc_arenas(mallocArenas)
    }

    /// Sets `TZ` to the system's zone file when it is unset. While it is unset, glibc's `mktime`
    /// stats `/etc/localtime` on every call, under a lock all threads share, to notice a changed
    /// zone; libzip converts each entry's time with it whenever it reads a central directory: a
    /// `stat` and a lock per entry (100,000 of each per handle of a 100,000-file archive, with the
    /// extraction workers contending). Set, the file is read once. Log times are UTC either way.
    package static func pinTimeZone() {
        guard let value = pinnedTimeZone(current: getenv("TZ").map { String(cString: $0) }) else { return }
        setenv("TZ", value, 0)
    }

    /// The `TZ` value ``pinTimeZone()`` sets given the current one: the system's zone file when
    /// there is none, nil (leave it) otherwise.
    static func pinnedTimeZone(current: String?) -> String? {
        current == nil ? ":/etc/localtime" : nil
    }

    /// Exits with a message (code 5) when fewer than ``minimumDescriptors`` files may be opened.
    /// Call first, before the first `await`. libdispatch, which runs Swift's concurrency here,
    /// stops the process with `SIGILL` when it cannot open a descriptor of its own: its event
    /// descriptors as it starts (`ulimit -n 4`), or a worker's `/proc/self/task/…/stat`, which
    /// its pool monitor reads while the process is at its limit (`ulimit -n 20`: 1 run in 6,
    /// the state database's open having taken the last ones). A process that starts with room
    /// fails on a file it names instead, with the remedy.
    package static func ensureDescriptors() {
        guard let code = FileSystemError.descriptorShortage(wanted: minimumDescriptors) else { return }
        let message: String
        if code == ENFILE, let remedy = FileSystemError.descriptorRemedy(errno: code) {
            message = "sync-agent: cannot open \(minimumDescriptors) files: \(remedy)"
        } else {
            var limit = rlimit()
            let soft =
                getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0
                ? " (ulimit -n \(limit.rlim_cur))" : ""
            message =
                "sync-agent: the open-file limit\(soft) leaves fewer than \(minimumDescriptors) files free to open beside those open at the start: "
                + "raise it (`ulimit -n`, systemd's `LimitNOFILE=`) and try again"
        }
        Console.standardError(message + "\n")
        Glibc.exit(5)
    }

    /// The descriptors ``ensureDescriptors()`` asks for: what starting takes, with room to fail
    /// later with a message naming the file.
    static let minimumDescriptors = 64

    /// Exits with a message (code 6) when a task limit (a cgroup's `pids.max`: systemd's
    /// `TasksMax=`, a container's pids limit; or `ulimit -u`) leaves fewer than ``minimumTasks``
    /// threads to start (`SYNC_AGENT_MIN_THREADS` sets another number; 0 skips the check). Call
    /// first, before the first `await`: past it, libdispatch (Swift concurrency, GRDB's queues)
    /// starts threads, and when the system refuses one it retries for good in silence, so a
    /// process that starts just above its limit hangs. `--help` and `--version` are answered
    /// before (``answerWithoutThreads()``).
    package static func ensureTasks() {
        do {
            try ensureTasks(storages: 0)
        } catch {
            error.exit()
        }
    }

    /// Throws the message (code 6) when the task limits leave too few threads for ``minimumTasks``
    /// plus one a storage (`watch` runs each storage's updates on a queue of its own: measured,
    /// 8 storages peaked at 24 threads and hung at limits of 17–19), counting the threads this
    /// process already runs.
    static func ensureTasks(storages: Int) throws(CLIFailure) {
        if let message = try taskShortage(storages: storages) { throw CLIFailure(code: 6, message: message) }
    }

    /// Why the task limits leave too few threads for ``minimumTasks`` and `storages` (nil when
    /// they leave enough, or the check is off), or the variable's failure.
    static func taskShortage(storages: Int) throws(CLIFailure) -> String? {
        let minimum = try minimumTasks(setting: getenv(minimumTasksVariable).map { String(cString: $0) }).get()
        guard minimum > 0 else { return nil }
        // The process's own first thread is not among the minimum; threads running now are.
        let wanted = minimum + 1 + storages - (TaskBudget.ownThreads() ?? 1)
        guard wanted > 0, let shortage = TaskBudget.shortage(wanted: wanted) else { return nil }
        let purpose = storages > 0 ? " to watch \(storages) storage\(storages == 1 ? "" : "s")" : ""
        let may = shortage.free == 1 ? "1 more thread" : "\(shortage.free) more threads"
        return "only \(may) may start and sync-agent needs \(wanted) more\(purpose) "
            + "(\(shortage)): \(shortage.remedy), and try again"
    }

    /// Answers, and exits, what needs no thread: `--version`, an empty path option (exit 6), a
    /// command line that does not parse (64), and help (`--help`, `-h`, `help …`, a command group
    /// without its subcommand). It runs before anything starts a thread: past the first `await`
    /// the Swift runtime starts libdispatch's, which at a tight task limit made `--version` take
    /// 5 s to exit, or hang, and turned a usage error into the task limit's refusal. Returns for a
    /// command to run.
    package static func answerWithoutThreads(arguments: [String] = Array(CommandLine.arguments.dropFirst())) {
        // First: `watch` reloads on SIGHUP once its loop traps it; until then (parsing, the task
        // check, loading the config: the first 60 ms, more on a busy machine) the default action
        // would end the agent (exit 129). A HUP that early is ignored: the configuration is
        // being read then anyway.
        if arguments.first == "watch" { signal(SIGHUP, SIG_IGN) }
        Console.ensureStandardStreamsOpen()
        Console.ignoreBrokenPipes()
        // Handled here rather than with CommandConfiguration(version:): the parser would then
        // take `--version` from anywhere, and `publish --version 1.0` with a missing option
        // would print this version and exit 0 instead of naming the missing option.
        if arguments == ["--version"] {
            // A version that could not be written is no answer (exit 5, as `status`).
            do { try Console.output(version + "\n") } catch let failure as CLIFailure { failure.exit() } catch {}
            Glibc.exit(0)
        }
        if let option = emptyPathOption(in: arguments) {
            CLIFailure(
                code: 6, message: "\(option) is empty; give a path (an empty one would mean the current folder)"
            ).exit()
        }
        // Every command: a Swift string would have replaced such bytes with U+FFFD.
        do { try refuseUnreadableArguments() } catch let failure as CLIFailure { failure.exit() } catch {}
        do {
            // A help request parses as the parser's own `HelpCommand`, whose `run()` throws the
            // request that `exit(withError:)` prints; a group without its subcommand (`cache`)
            // prints its help, as its default `run()` would.
            var command = try parseAsRoot(arguments)
            if String(describing: type(of: command)) == "HelpCommand" { try command.run() }
            if !type(of: command).configuration.subcommands.isEmpty { throw CleanExit.helpRequest(command) }
        } catch {
            exitQuotingNoValue(error, arguments: arguments)
        }
    }

    /// Exits as `exit(withError:)` does (help on stdout with 0, a usage error on stderr with 64),
    /// with every value the parser quotes from the command line replaced by its number: a stray
    /// word of an unquoted `-H Authorization: Bearer …`, or a surplus URL with a password, would
    /// otherwise be printed ("Unexpected argument 'sid=…'"). Option names stay, and an option's
    /// inline value (`--name=value`) goes.
    static func exitQuotingNoValue(_ error: any Error, arguments: [String]) -> Never {
        let code = exitCode(for: error)
        var message = fullMessage(for: error)
        if code != .success { message = withoutQuotedValues(message, arguments: arguments) }
        if !message.isEmpty {
            if code == .success {
                Console.standardOutput(message + "\n")
            } else {
                Console.standardError(message + "\n")
            }
        }
        Glibc.exit(code.rawValue)
    }

    /// `message` with each `'value'` it quotes of `arguments` (not an option) as `(argument N)`,
    /// and each quoted `'--name=value'` as `'--name=…'`. A word before the first option that
    /// could be a command's name (`gett`: lower-case letters, digits and dashes, at most 20) stays,
    /// so a mistyped command is shown.
    static func withoutQuotedValues(_ message: String, arguments: [String]) -> String {
        var message = message
        let firstOption = arguments.firstIndex { $0.hasPrefix("-") } ?? arguments.count
        for (index, argument) in arguments.enumerated().sorted(by: { $0.element.count > $1.element.count })
        where !argument.isEmpty {
            if index < firstOption, argument.count <= 20,
                argument.wholeMatch(of: /[a-z][a-z0-9-]*/) != nil
            {
                continue
            }
            if argument.hasPrefix("-") {
                guard let equals = argument.firstIndex(of: "=") else { continue }
                message = message.replacingOccurrences(
                    of: "'\(argument)'", with: "'\(argument[...equals])…'")
            } else {
                message = message.replacingOccurrences(of: "'\(argument)'", with: "(argument \(index + 1))")
            }
        }
        return message
    }

    /// The environment variable that overrides ``minimumTasks``.
    static let minimumTasksVariable = "SYNC_AGENT_MIN_THREADS"

    /// The threads to ask for given `SYNC_AGENT_MIN_THREADS`' value: ``minimumTasks`` when unset,
    /// the number when it is one from 0 to 100,000, else a failure (exit 6) naming the variable.
    static func minimumTasks(setting: String?) -> Result<Int, CLIFailure> {
        guard let setting else { return .success(minimumTasks) }
        guard let number = Int(setting), (0...100_000).contains(number) else {
            return .failure(
                CLIFailure(
                    code: 6,
                    message:
                        "\(minimumTasksVariable)=\(String(setting.prefix(40)).debugDescription) is not a number of threads from 0 to "
                        + "100000; give one such as \(minimumTasks), or 0 to skip the check"))
        }
        return .success(number)
    }

    /// The threads ``ensureTasks()`` asks for beside the first. Measured peaks without a limit:
    /// a restore 15–16, a replay up to 21, `image get` 16–18, `watch` of 2 storages 19; under a
    /// limit libdispatch makes do with fewer, but just above what a command runs it can wait for a
    /// thread for good (hangs up to 10 tasks, stalls of seconds up to 12). At 17 every command ran.
    static let minimumTasks = 16

    /// How many malloc arenas ``limitMallocArenas()`` allows.
    static let mallocArenas: Int32 = 1

    /// The options whose value is a path. An empty one would resolve to the current folder
    /// (`sync --dir ''` mirrored into it, `cache get --cache ''` made a cache of it), so it is
    /// refused before parsing (exit 6), naming the option.
    static let pathOptions: Set<String> = [
        "--dir", "--state", "--cache", "--storage", "--content", "--output", "-o", "--config", "--out",
        "--sign-key", "--trust-key", "--access-log",
    ]

    /// The first path option in `arguments` given an empty value (`--dir ''` or `--dir=`), or nil.
    static func emptyPathOption(in arguments: [String]) -> String? {
        for (index, argument) in arguments.enumerated() {
            if argument == "--" { return nil }
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                let name = String(argument[..<equals])
                if pathOptions.contains(name), argument[argument.index(after: equals)...].isEmpty { return name }
            } else if pathOptions.contains(argument), index + 1 < arguments.count, arguments[index + 1].isEmpty {
                return argument
            }
        }
        return nil
    }

    /// Runs the command, turning a ``CLIFailure`` into its one-line message and exit code.
    package static func start() async {
        Console.ensureStandardStreamsOpen()
        unblockStopSignals()
        Console.ignoreBrokenPipes()
        do {
            // `answerWithoutThreads()` ran first: the empty paths, usage errors and help are answered.
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let failure as CLIFailure {
            failure.exit()
        } catch {
            exitQuotingNoValue(error, arguments: Array(CommandLine.arguments.dropFirst()))
        }
    }
}
