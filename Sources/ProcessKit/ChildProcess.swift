import CLinux
import Foundation
import ThreadKit

/// A child process started with `posix_spawn`: the daemon's hooks (``init(_:_:outputDescriptor:errorDescriptor:environment:workingDirectory:)``),
/// `publish --upload`'s rclone, the test server's gzip, and the tests and tools that run
/// command-line programs (the built `sync-agent`, `curl`, `zip`).
///
/// Not Foundation's `Process`: on Linux its `run()` can crash while listing `/proc/self/fd` (a
/// 256-byte over-read of `dirent.d_name`, swift-corelibs-foundation #5472, still in Swift 6.3.1),
/// which killed a whole test run here once. The child inherits the environment (plus any variables
/// given) and no descriptor but its standard input (`/dev/null`), output and error (the given
/// files, or `/dev/null`).
public final class ChildProcess: Sendable {
    /// The child's process id.
    public let pid: pid_t

    /// Why `posix_spawn` could not start a program.
    public struct SpawnError: Error, CustomStringConvertible {
        /// The program that did not start.
        public var executable: String
        /// The error `posix_spawn` returned, an `errno` value such as `ENOENT`.
        public var errno: Int32
        public var description: String { "cannot start \(executable): \(String(cString: strerror(errno)))" }
    }

    /// Starts `executable` (an absolute path) with `arguments`, in this process's environment
    /// with `environment`'s variables added or replaced.
    public init(
        _ executable: String, _ arguments: [String], stdout: String? = nil, stderr: String? = nil,
        environment: [String: String] = [:]
    ) throws {
        pid = try Self.spawn(executable, arguments, environment: environment, supervised: false) { actions in
            posix_spawn_file_actions_addopen(&actions, 1, stdout ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            posix_spawn_file_actions_addopen(&actions, 2, stderr ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        }
    }

    /// Starts `executable` (an absolute path) for a supervisor that reads its output and may have
    /// to stop it: its standard output and error are dup'ed from `outputDescriptor` and
    /// `errorDescriptor` (the caller closes its own copies), it runs in `workingDirectory` when
    /// given, and it leads a process group of its own, so `kill(-pid, signal)` reaches whatever it
    /// starts. Its signal dispositions are the defaults and none is blocked, whatever this process
    /// ignores or blocks (an inherited ignored SIGPIPE would break its shell pipelines).
    public init(
        _ executable: String, _ arguments: [String], outputDescriptor: Int32, errorDescriptor: Int32,
        environment: [String: String] = [:], workingDirectory: String? = nil
    ) throws {
        pid = try Self.spawn(executable, arguments, environment: environment, supervised: true) { actions in
            var code = posix_spawn_file_actions_adddup2(&actions, outputDescriptor, 1)
            if code == 0 { code = posix_spawn_file_actions_adddup2(&actions, errorDescriptor, 2) }
            if code == 0, let workingDirectory { code = clinux_spawn_chdir(&actions, workingDirectory) }
            guard code == 0 else { throw SpawnError(executable: executable, errno: code) }
        }
    }

    private static func spawn(
        _ executable: String, _ arguments: [String], environment: [String: String], supervised: Bool,
        output: (inout posix_spawn_file_actions_t) throws -> Void
    ) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        try output(&actions)
        // Nothing else is inherited: a descriptor without close-on-exec (a test server's listening
        // socket, say) would otherwise live on in the child.
        _ = clinux_spawn_closefrom(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        if supervised {
            var all = sigset_t()
            sigfillset(&all)
            var none = sigset_t()
            sigemptyset(&none)
            var code = posix_spawnattr_setsigdefault(&attributes, &all)
            if code == 0 { code = posix_spawnattr_setsigmask(&attributes, &none) }
            if code == 0 { code = posix_spawnattr_setpgroup(&attributes, 0) }
            if code == 0 {
                code = posix_spawnattr_setflags(
                    &attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
            }
            guard code == 0 else { throw SpawnError(executable: executable, errno: code) }
        }
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let code: Int32
        if environment.isEmpty {
            code = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        } else {
            let merged = ProcessInfo.processInfo.environment.merging(environment) { _, given in given }
            let envp: [UnsafeMutablePointer<CChar>?] = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
            defer { for pointer in envp { free(pointer) } }
            code = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        }
        guard code == 0 else { throw SpawnError(executable: executable, errno: code) }
        return pid
    }

    /// Sends `signal` to the child.
    public func send(_ signal: Int32) {
        kill(pid, signal)
    }

    /// Waits for the child to end, on a thread of its own (never a cooperative one). Returns the
    /// exit status, or 128 + the signal that ended it. Call it, or ``waitBlocking()``, once.
    /// Where no thread can be made (a task limit), it waits on the calling thread.
    public func exitStatus() async -> Int32 {
        await withCheckedContinuation { continuation in
            DetachedThread.startOrRunHere(name: "child wait", stackSize: 1 << 16) { [self] in
                continuation.resume(returning: waitBlocking())
            }
        }
    }

    /// ``exitStatus()`` blocking the calling thread: for synchronous callers only.
    public func waitBlocking() -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let low = status & 0x7F
        return low == 0 ? (status >> 8) & 0xFF : 128 + low
    }

    /// Runs `executable` to its end and returns its exit status.
    public static func run(
        _ executable: String, _ arguments: [String], stdout: String? = nil,
        stderr: String? = nil
    ) async throws -> Int32 {
        try await ChildProcess(executable, arguments, stdout: stdout, stderr: stderr).exitStatus()
    }
}
