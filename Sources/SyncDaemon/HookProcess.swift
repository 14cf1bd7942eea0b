import CLinux
import Foundation
import ProcessKit
import Synchronization

/// One running hook: its process (leader of its own process group) and the read ends of its
/// output pipes. ``supervise(_:line:)`` blocks, so it runs on a thread of its own.
final class HookProcess: Sendable {
    /// Which of the hook's output streams a line came from.
    enum Stream: String, Sendable {
        case stdout, stderr
    }

    let pid: pid_t
    private let output: Int32
    private let error: Int32
    /// Set by ``cancel()`` from any thread; the supervisor loop looks at it at every turn.
    private let cancelled = Atomic<Bool>(false)

    private init(pid: pid_t, output: Int32, error: Int32) {
        self.pid = pid
        self.output = output
        self.error = error
    }

    /// Spawns the hook with its standard output and error on two pipes of our own.
    static func start(
        _ executable: String, _ arguments: [String], environment: [String: String],
        workingDirectory: String?
    ) throws(HookRunner.StartFailure) -> HookProcess {
        var output: [Int32] = [-1, -1]
        var errors: [Int32] = [-1, -1]
        guard clinux_pipe_cloexec(&output) == 0 else {
            throw HookRunner.StartFailure(text: "cannot make a pipe: \(String(cString: strerror(errno)))")
        }
        guard clinux_pipe_cloexec(&errors) == 0 else {
            let code = errno
            close(output[0])
            close(output[1])
            throw HookRunner.StartFailure(text: "cannot make a pipe: \(String(cString: strerror(code)))")
        }
        defer {
            // The child has its own copies; ours would keep the pipes open after it exits.
            close(output[1])
            close(errors[1])
        }
        do {
            let child = try ChildProcess(
                executable, arguments, outputDescriptor: output[1], errorDescriptor: errors[1],
                environment: environment, workingDirectory: workingDirectory)
            return HookProcess(pid: child.pid, output: output[0], error: errors[0])
        } catch {
            close(output[0])
            close(errors[0])
            throw HookRunner.StartFailure(text: "\(error)")
        }
    }

    /// Asks the supervisor to stop the hook (SIGTERM, then SIGKILL after the grace).
    func cancel() {
        cancelled.store(true, ordering: .relaxed)
    }

    /// Reads the hook's output line by line until it ends, stops it when ``HookSupervision`` says
    /// so, reaps it, and returns how it ended. Blocks the calling thread throughout.
    func supervise(_ limits: HookSupervision.Limits, line: (Stream, String) -> Void) -> HookOutcome {
        let clock = ContinuousClock()
        var machine = HookSupervision(start: clock.now, limits: limits)
        var streams = [OutputLines(fd: output, stream: .stdout), OutputLines(fd: error, stream: .stderr)]
        var lastLine: String?
        let emit = { (stream: Stream, text: String) in
            if !text.allSatisfy(\.isWhitespace) { lastLine = text }
            line(stream, text)
        }
        var exited = false
        while !machine.isFinished {
            if cancelled.load(ordering: .relaxed) { send(machine.cancel(clock.now)) }
            send(machine.tick(clock.now))
            if machine.isFinished { break }
            var descriptors = streams.indices.filter { streams[$0].isOpen }.map {
                pollfd(fd: streams[$0].fd, events: Int16(POLLIN), revents: 0)
            }
            let wait = machine.wait(clock.now)
            let milliseconds = Int32(
                clamping: wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000)
            let ready = poll(&descriptors, nfds_t(descriptors.count), milliseconds)
            if ready > 0 {
                for descriptor in descriptors where descriptor.revents != 0 {
                    guard let index = streams.firstIndex(where: { $0.fd == descriptor.fd }) else { continue }
                    streams[index].read(emit)
                }
                if !streams.contains(where: \.isOpen) { machine.outputClosed() }
            }
            if !exited && hasExited() {
                exited = true
                send(machine.exited(clock.now))
            }
        }
        for index in streams.indices { streams[index].close(emit) }
        let ending = machine.ending!
        let termination: HookOutcome.Termination
        switch ending.stopped {
        case .timedOut?:
            reap()
            termination = .timedOut(killed: ending.killed)
        case .cancelled?:
            reap()
            termination = .cancelled
        case nil:
            termination = reap()
        }
        return HookOutcome(termination: termination, lastOutputLine: lastLine)
    }

    /// Whether the hook's process has exited, without reaping it: until it is reaped its pid, and
    /// so its process group id, cannot be reused, and signalling the group stays safe.
    private func hasExited() -> Bool {
        var info = siginfo_t()
        while true {
            if waitid(P_PID, id_t(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 {
                return info._sifields._kill.si_pid == pid
            }
            // ECHILD: something else reaped it (SIGCHLD ignored process-wide); it is gone.
            if errno != EINTR { return true }
        }
    }

    /// Sends the action's signal to the hook's process group.
    private func send(_ action: HookSupervision.Action) {
        switch action {
        case .none: break
        case .terminate: kill(-pid, SIGTERM)
        case .kill: kill(-pid, SIGKILL)
        }
    }

    /// Reaps the hook; returns how it ended (`exited(-1)` when something else reaped it first).
    @discardableResult
    private func reap() -> HookOutcome.Termination {
        var status: Int32 = 0
        while true {
            if waitpid(pid, &status, 0) == pid { break }
            if errno != EINTR { return .exited(-1) }
        }
        let signal = status & 0x7F
        return signal == 0 ? .exited((status >> 8) & 0xFF) : .signalled(signal)
    }
}

/// One output stream of a hook, cut into lines. Lines longer than 16 KiB are cut there, so a
/// hook writing without newlines cannot grow the agent's memory.
struct OutputLines {
    static let maxLine = 16 << 10
    let fd: Int32
    let stream: HookProcess.Stream
    private(set) var isOpen = true
    private var pending: [UInt8] = []

    init(fd: Int32, stream: HookProcess.Stream) {
        self.fd = fd
        self.stream = stream
    }

    /// Reads what is available (one read: poll said something is) and emits the complete lines.
    mutating func read(_ emit: (HookProcess.Stream, String) -> Void) {
        guard isOpen else { return }
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        if count < 0 {
            if errno == EINTR || errno == EAGAIN { return }
            close(emit)
            return
        }
        if count == 0 {
            close(emit)
            return
        }
        pending.append(contentsOf: buffer[..<count])
        var start = 0
        while start < pending.count {
            let window = pending[start..<min(pending.count, start + Self.maxLine)]
            if let newline = window.firstIndex(of: 0x0A) {
                emit(stream, Self.text(pending[start..<newline]))
                start = newline + 1
            } else if window.count == Self.maxLine {
                emit(stream, Self.text(window))
                start = window.endIndex
            } else {
                break
            }
        }
        pending.removeSubrange(..<start)
    }

    /// Emits an unfinished last line and closes the stream.
    mutating func close(_ emit: (HookProcess.Stream, String) -> Void) {
        guard isOpen else { return }
        if !pending.isEmpty { emit(stream, Self.text(pending[...])) }
        pending.removeAll()
        Glibc.close(fd)
        isOpen = false
    }

    /// The bytes as text (invalid UTF-8 replaced), without a line's trailing carriage return.
    private static func text(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes.last == 0x0D ? bytes.dropLast() : bytes, as: UTF8.self)
    }
}
