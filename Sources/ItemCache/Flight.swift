import Foundation
import Synchronization
import Transport

/// One fetch (or any load) that any number of callers wait for (request coalescing): the
/// loader's fetches (`Flight<LoadedItem>`) and providers' loads (`Flight<CachedItem>`).
///
/// Each waiter has its own continuation, resumed exactly once: with the result, or with
/// `CancellationError` when that waiter is cancelled, whichever comes first; the one that takes
/// the continuation out of the table resumes it, so a late result and a cancellation can never
/// both resume it. When the last waiter cancels, the fetch is cancelled too, unless it is a
/// background refresh (stale-while-revalidate), which runs on with no one waiting.
///
/// A caller counts as a waiter from the moment it claims the flight (``FlightTable/claim(_:keepAlive:waits:)``),
/// not only once `wait()` has registered it: otherwise the others' cancellation, landing between
/// its claim and its wait, would cancel the fetch under it and hand a caller that never cancelled
/// a cancellation.
final class Flight<Value: Sendable>: Sendable {
    private struct State {
        var waiters: [Int: CheckedContinuation<Value, any Error>] = [:]
        var cancelled: Set<Int> = []
        var nextID = 0
        var result: Result<Value, any Error>?
        var task: Task<Void, Never>?
        var progress = TransferProgress(received: 0, expected: nil)
        var progressHandlers: [ProgressHandler] = []
        var stored = false
        /// Its last waiter left and its task was cancelled: a new caller must not join it.
        var abandoned = false
        /// Callers that claimed it and will wait, but have not registered yet.
        var joining = 0

        /// No one waits, and no one who claimed the flight is still on the way to wait.
        var isLeft: Bool { waiters.isEmpty && joining == 0 }
    }

    private let state = Mutex(State())
    private let keepAlive: Bool
    /// When the flight began (a reload accepts another process's value only if newer).
    let started = Date()

    init(keepAlive: Bool) {
        self.keepAlive = keepAlive
    }

    /// Counts one more caller that will wait, unless the flight is abandoned (then it says no,
    /// and the caller starts a flight of its own).
    func join() -> Bool {
        state.withLock { state in
            if state.abandoned { return false }
            state.joining += 1
            return true
        }
    }

    /// Runs `body` as the flight's task; `finished` is told whether it stored a value.
    ///
    /// The task joins no ``TransferGroup``: it serves every waiter, so the group of the caller
    /// that happened to start it must not stop it for the others (the waiters' own cancellation
    /// does, when the last one leaves).
    func start(_ body: @escaping @Sendable () async throws -> Value, finished: @escaping @Sendable (Bool) async -> Void)
    {
        let task = Task {
            let result: Result<Value, any Error>
            do {
                result = .success(try await TransferGroup.$current.withValue(nil) { try await body() })
            } catch {
                result = .failure(error)
            }
            let (waiters, stored) = state.withLock { state in
                state.result = result
                defer { state.waiters = [:] }
                return (Array(state.waiters.values), state.stored)
            }
            await finished(stored)
            for waiter in waiters { waiter.resume(with: result) }
        }
        state.withLock { $0.task = task }
    }

    /// Waits until the flight's body has ended, whatever its outcome (a background refresh
    /// nobody waits for included).
    func settled() async {
        _ = await state.withLock { $0.task }?.result
    }

    /// Waits for the result; a cancelled caller stops waiting at once.
    func wait() async throws -> Value {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                // Cancelled before it could register: it leaves at once, and if no one else
                // waits, the fetch goes too.
                let (now, orphaned): (Result<Value, any Error>?, Task<Void, Never>?) = state.withLock { state in
                    state.joining = max(0, state.joining - 1)
                    if state.cancelled.remove(id) != nil {
                        let last = state.isLeft && !keepAlive && state.result == nil
                        if last { state.abandoned = true }
                        return (.failure(CancellationError()), last ? state.task : nil)
                    }
                    if let result = state.result { return (result, nil) }
                    state.waiters[id] = continuation
                    return (nil, nil)
                }
                if let now { continuation.resume(with: now) }
                orphaned?.cancel()
            }
        } onCancel: {
            let (waiter, task) = state.withLock {
                state -> (CheckedContinuation<Value, any Error>?, Task<Void, Never>?) in
                guard let waiter = state.waiters.removeValue(forKey: id) else {
                    if state.result == nil { state.cancelled.insert(id) }
                    return (nil, nil)
                }
                let last = state.isLeft && !keepAlive
                if last { state.abandoned = true }
                return (waiter, last ? state.task : nil)
            }
            waiter?.resume(throwing: CancellationError())
            task?.cancel()
        }
    }

    /// Whether every waiter left and the fetch was cancelled: it ends with a cancellation, so a
    /// new caller starts a flight of its own instead of joining it.
    var isAbandoned: Bool { state.withLock { $0.abandoned } }

    /// The latest progress.
    var progress: TransferProgress { state.withLock { $0.progress } }

    func report(_ progress: TransferProgress) {
        let handlers = state.withLock { state in
            state.progress = progress
            return state.progressHandlers
        }
        for handler in handlers { handler(progress) }
    }

    func addProgressHandler(_ handler: @escaping ProgressHandler) {
        state.withLock { $0.progressHandlers.append(handler) }
    }

    func markStored() {
        state.withLock { $0.stored = true }
    }
}

/// The flights under way, by key: a caller claims the running one or a new one, and a started
/// flight leaves the table when its body ends, so the next miss starts afresh. The loader's
/// fetches and the providers' loads each keep one.
final class FlightTable<Value: Sendable>: Sendable {
    private let flights = Mutex<[String: Flight<Value>]>([:])

    /// Every flight under way.
    var all: [Flight<Value>] {
        flights.withLock { Array($0.values) }
    }

    /// The flight of `key` under way, if any.
    func running(_ key: String) -> Flight<Value>? {
        flights.withLock { $0[key] }
    }

    /// The flight of `key` under way, or else one of a variant of it: a name that is `key`,
    /// `separator`, then more (the loader names a fetch with request headers so).
    func running(_ key: String, orVariantAfter separator: Character) -> Flight<Value>? {
        flights.withLock { flights in
            if let exact = flights[key] { return exact }
            let prefix = key + String(separator)
            return flights.first { $0.key.hasPrefix(prefix) }?.value
        }
    }

    /// The flight of `key` under way, or a new one (not started yet: `isNew`, and the caller
    /// starts it with ``start(_:for:_:finished:)``). A caller that `waits` must call `wait()` on
    /// it; it counts as a waiter from here on, so no one else's cancellation cancels the fetch
    /// before it registers.
    func claim(_ key: String, keepAlive: Bool = false, waits: Bool = true) -> (flight: Flight<Value>, isNew: Bool) {
        flights.withLock { flights in
            if let running = flights[key], !waits ? !running.isAbandoned : running.join() {
                return (running, false)
            }
            let flight = Flight<Value>(keepAlive: keepAlive)
            if waits { _ = flight.join() }
            flights[key] = flight
            return (flight, true)
        }
    }

    /// Starts a flight `claim` made, running `body`; it leaves the table when `body` ends.
    func start(
        _ flight: Flight<Value>, for key: String, _ body: @escaping @Sendable () async throws -> Value,
        finished: @escaping @Sendable (Bool) async -> Void = { _ in }
    ) {
        flight.start(
            { [self] in
                defer {
                    flights.withLock { flights in
                        if flights[key] === flight { flights.removeValue(forKey: key) }
                    }
                }
                return try await body()
            }, finished: finished)
    }
}
