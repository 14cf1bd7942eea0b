import Synchronization

/// A one-time gate: work that may prepare early (fetching bytes into memory) waits here before
/// it may act on them (writing into `next/`), until the stager opens the gate, once, saying
/// whether to go on. A waiter whose task is cancelled is let through with `false`, so nothing
/// waits on a gate that an error path never opened.
final class StartGate: Sendable {
    private struct State {
        var decision: Bool?
        var waiters: [Int: CheckedContinuation<Bool, Never>] = [:]
        var nextWaiter = 0
    }

    private let state = Mutex(State())

    init() {}

    /// Opens the gate: every waiter, now and later, gets `go`. Only the first call counts, so
    /// an error path may always open it with `false`.
    func open(_ go: Bool) {
        let waiting: [CheckedContinuation<Bool, Never>] = state.withLock { state in
            guard state.decision == nil else { return [] }
            state.decision = go
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiting { waiter.resume(returning: go) }
    }

    /// The decision, or nil while the gate is closed: for a caller that does something else
    /// rather than wait.
    var decision: Bool? {
        state.withLock { $0.decision }
    }

    /// The gate's decision once it opens; `false` at once if the task is (or gets) cancelled.
    func wait() async -> Bool {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let now: Bool? = state.withLock { state in
                    if let decision = state.decision { return decision }
                    if Task.isCancelled { return false }
                    state.waiters[id] = continuation
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(returning: false)
        }
    }
}
