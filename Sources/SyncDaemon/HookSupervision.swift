/// The decisions of one hook run: when to stop the hook, when to give up on its output, and why
/// it ended. Pure: the supervisor loop (``HookProcess/supervise(_:line:)``) feeds it the clock and
/// what it saw, and sends the signals it returns.
struct HookSupervision: Sendable {
    typealias Instant = ContinuousClock.Instant

    /// How long each stage may last.
    struct Limits: Sendable {
        /// From the start until SIGTERM.
        var timeout: Duration
        /// From SIGTERM until SIGKILL.
        var terminationGrace: Duration
        /// From the hook's exit until its output is abandoned (a background child may hold it).
        var outputGrace: Duration
    }

    /// Why the runner stopped the hook.
    enum StopReason: Sendable, Equatable {
        case timedOut, cancelled
    }

    /// A signal for the hook's process group.
    enum Action: Sendable, Equatable {
        case none
        /// SIGTERM to the group.
        case terminate
        /// SIGKILL to the group.
        case kill
    }

    /// How the run ended, once ``isFinished``: why the runner stopped the hook, if it did, and
    /// whether it took SIGKILL.
    struct Ending: Sendable, Equatable {
        var stopped: StopReason?
        var killed: Bool
    }

    private enum State: Sendable {
        /// The hook runs and may until `deadline`.
        case running(deadline: Instant)
        /// SIGTERM was sent; SIGKILL follows at `killAt`.
        case terminating(StopReason, killAt: Instant)
        /// SIGKILL was sent; the hook's exit is all that is left.
        case killing(StopReason)
        /// The hook exited; its output is read until it closes or until `until`.
        case draining(Ending, until: Instant)
        case finished(Ending)
    }

    private var state: State
    private let limits: Limits
    /// Whether any of the hook's output streams is still open.
    private var outputOpen = true

    init(start: Instant, limits: Limits) {
        self.limits = limits
        state = .running(deadline: start + limits.timeout)
    }

    /// How the run ended, or nil while it has not.
    var ending: Ending? {
        if case .finished(let ending) = state { ending } else { nil }
    }

    var isFinished: Bool { ending != nil }

    /// The clock reached `now`: a timeout, or the end of a grace.
    mutating func tick(_ now: Instant) -> Action {
        switch state {
        case .running(let deadline) where now >= deadline:
            state = .terminating(.timedOut, killAt: now + limits.terminationGrace)
            return .terminate
        case .terminating(let reason, let killAt) where now >= killAt:
            state = .killing(reason)
            return .kill
        case .draining(let ending, let until) where now >= until:
            state = .finished(ending)
            return .none
        default:
            return .none
        }
    }

    /// The task running the hook was cancelled.
    mutating func cancel(_ now: Instant) -> Action {
        guard case .running = state else { return .none }
        state = .terminating(.cancelled, killAt: now + limits.terminationGrace)
        return .terminate
    }

    /// The hook's process exited (it is not reaped yet, so its process group id stays taken).
    mutating func exited(_ now: Instant) -> Action {
        let ending: Ending
        let action: Action
        switch state {
        case .running:
            ending = Ending(stopped: nil, killed: false)
            action = .none
        case .terminating(let reason, _):
            // It ended on SIGTERM; whatever it started and left behind ignoring SIGTERM goes now.
            ending = Ending(stopped: reason, killed: false)
            action = .kill
        case .killing(let reason):
            ending = Ending(stopped: reason, killed: true)
            action = .none
        case .draining, .finished:
            preconditionFailure("invalid state \(state)")
        }
        state = outputOpen ? .draining(ending, until: now + limits.outputGrace) : .finished(ending)
        return action
    }

    /// Every output stream of the hook reached its end.
    mutating func outputClosed() {
        outputOpen = false
        if case .draining(let ending, _) = state { state = .finished(ending) }
    }

    /// How long the loop may wait for output before it must look at the clock and the process
    /// again. Exit is noticed by looking, so the wait is capped while the hook runs: at 100 ms
    /// while its output is open (output or its end usually comes first), 20 ms once it is closed.
    func wait(_ now: Instant) -> Duration {
        let cap: Duration = outputOpen ? .milliseconds(100) : .milliseconds(20)
        let until: Instant
        switch state {
        case .running(let deadline): until = deadline
        case .terminating(_, let killAt): until = killAt
        case .killing: return cap
        case .draining(_, let end): return max(.zero, end - now)
        case .finished: return .zero
        }
        return min(cap, max(.zero, until - now))
    }
}
