import Foundation
import Synchronization
import ThreadKit

/// A fixed set of threads for blocking file work (tree scans, hashing, hard-linking thousands of
/// files, deleting trees, SQLite steps), reached only through ``run(_:)``, which is `async`.
///
/// Swift's cooperative pool has one thread per core (two on the machines we target), so one
/// blocking `read` or `unlinkat` loop there stalls every task of the process. A dispatch queue
/// does not fix it either: GCD adds threads for blocked work without a useful bound. This pool
/// has exactly ``threadCount`` threads and a FIFO queue, like NIO's `NIOThreadPool`: work beyond
/// them waits its turn instead of adding threads.
///
/// **Spinning.** Waking a sleeping thread costs far more than a short job on a virtual machine
/// whose idle CPUs halt (measured on our 2-core VMs, where the guest does not poll before it
/// halts: 20–40 µs for each of the two wake-ups of a hop, against 10 µs for a hop whose threads
/// are awake). So both sides poll for a short while before they sleep, as Go's scheduler and
/// Tokio's workers do: an idle worker polls the queue for ``spin`` before it sleeps (one worker
/// at a time), and a caller of ``run(_:)`` yields its cooperative thread (`Task.yield()`, so
/// other tasks run meanwhile) while polling for its result for up to ``spin`` before it
/// suspends (one caller at a time). A job that takes longer costs that much CPU, and the next
/// four callers do not poll (so a run of long jobs wastes at most a fifth of the windows).
/// `spin: .zero` turns both off.
///
/// A job must not wait for another job of the same pool (it could wait for a thread it holds).
public final class BlockingIOPool: Sendable {
    /// The pool every content-sync library uses unless told otherwise: `max(4, cores)` threads.
    /// Four, not one per core, because most of the work waits for the disk rather than the CPU.
    public static let shared = BlockingIOPool(threadCount: max(4, ProcessInfo.processInfo.activeProcessorCount))

    /// How many threads run jobs.
    public let threadCount: Int
    /// How long an idle worker polls for a next job, and a caller for its job's result, before
    /// sleeping.
    public let spin: Duration

    private struct State: ~Copyable {
        var jobs: [@Sendable () -> Void] = []
        var head = 0
        /// Workers asleep on `waiting`, each owed one `signal()`.
        var sleepers = 0
        /// Whether a worker is polling the queue (it will take the next job without a signal).
        var spinning = false
    }

    private let state = Mutex(State())
    /// Jobs in the queue, readable without the lock (the spinning worker polls it).
    private let queued = Atomic<Int>(0)
    /// Whether a caller is polling for its result (at most one at a time).
    private let callerSpinning = Atomic<Bool>(false)
    /// How many callers still suspend without polling (after a poll that ran out).
    private let skipPolls = Atomic<Int>(0)
    private let waiting = DispatchSemaphore(value: 0)
    private let spinNanoseconds: UInt64

    /// Starts `threadCount` threads (at least one). They live as long as the process: pools are
    /// meant to be few and shared. Where the system makes fewer (a task limit), the pool runs on
    /// those it has; with none at all, ``run(_:)`` tries again, and else runs the job on the
    /// calling thread, which it then blocks. `spin` is how long idle threads poll before they sleep
    /// (default 250 µs: a small SQLite write on these machines; `.zero` never polls).
    public init(threadCount: Int, spin: Duration = .microseconds(250)) {
        self.threadCount = max(1, threadCount)
        self.spin = max(.zero, spin)
        let (seconds, attoseconds) = self.spin.components
        spinNanoseconds = UInt64(clamping: seconds) &* 1_000_000_000 &+ UInt64(clamping: attoseconds / 1_000_000_000)
        for index in 0..<self.threadCount { _ = startWorker(index) }
    }

    /// Threads that started.
    private let running = Atomic<Int>(0)
    /// Held while a pool without threads tries to make one.
    private let retrying = Mutex(())

    /// Starts one worker; false when the system would not make a thread.
    private func startWorker(_ index: Int) -> Bool {
        guard (try? DetachedThread.start(name: "cs.io-\(index)", { [self] in work() })) != nil else { return false }
        running.add(1, ordering: .relaxed)
        return true
    }

    /// Runs `body` on one of the pool's threads and returns its result; the calling task waits
    /// without holding a cooperative thread.
    public func run<T: Sendable, Failure: Error>(
        _ body: @escaping @Sendable () throws(Failure) -> T
    ) async throws(Failure) -> T {
        if running.load(ordering: .relaxed) == 0 {
            let started = retrying.withLock { _ in running.load(ordering: .relaxed) > 0 || startWorker(0) }
            // Still no thread (a task limit): the job runs here rather than waiting for good.
            if !started { return try body() }
        }
        let outcome = Outcome<Result<T, Failure>>()
        let pending = PendingBody(body)
        enqueue {
            // The body, and whatever it captured, is released before the caller resumes: an
            // object the caller dropped (a database, say) is not freed later on a pool thread.
            let result: Result<T, Failure>
            do {
                let body = pending.take()
                result = Result { () throws(Failure) -> T in try body() }
            }
            outcome.complete(result)
        }
        if spinNanoseconds > 0, shouldPoll(), !callerSpinning.exchange(true, ordering: .acquiring) {
            let deadline = Self.now() &+ spinNanoseconds
            var ready: Result<T, Failure>?
            while true {
                ready = outcome.ready()
                if ready != nil || Self.now() >= deadline { break }
                await Task.yield()
            }
            callerSpinning.store(false, ordering: .releasing)
            if let ready { return try ready.get() }
            // Polling did not pay: the next few callers suspend at once (long jobs, such as
            // hashing a big file, would otherwise each cost a polling window of CPU).
            skipPolls.store(Self.pollsSkippedAfterAMiss, ordering: .relaxed)
        }
        return try await outcome.value().get()
    }

    /// Callers that suspend without polling after a caller's poll ran out.
    private static let pollsSkippedAfterAMiss = 4

    /// Whether this caller polls: not while callers skip after a poll that ran out.
    private func shouldPoll() -> Bool {
        guard skipPolls.load(ordering: .relaxed) > 0 else { return true }
        skipPolls.subtract(1, ordering: .relaxed)
        return false
    }

    /// The monotonic clock in nanoseconds (`clock_gettime` through the vDSO: tens of ns).
    private static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }

    /// What a consumed queue slot holds.
    private static let done: @Sendable () -> Void = {}

    private func enqueue(_ job: @escaping @Sendable () -> Void) {
        let wake = state.withLock { state -> Bool in
            state.jobs.append(job)
            let waiting = queued.add(1, ordering: .releasing).newValue
            // A polling worker takes one job; any more need a sleeper.
            guard state.sleepers > 0, waiting > (state.spinning ? 1 : 0) else { return false }
            state.sleepers -= 1
            return true
        }
        if wake { waiting.signal() }
    }

    /// The next job, if any (called with the lock held).
    private func take(_ state: inout State) -> (@Sendable () -> Void)? {
        guard state.head < state.jobs.count else { return nil }
        let job = state.jobs[state.head]
        // The slot lets go of the job at once (not when the consumed prefix is dropped).
        state.jobs[state.head] = Self.done
        state.head += 1
        queued.subtract(1, ordering: .relaxed)
        // Drop the consumed prefix now and then, so the array does not grow forever.
        if state.head >= 64 && state.head * 2 >= state.jobs.count {
            state.jobs.removeFirst(state.head)
            state.head = 0
        }
        return job
    }

    private func work() {
        while true {
            if let job = state.withLock({ take(&$0) }) {
                job()
                continue
            }
            let spins =
                spinNanoseconds > 0
                && state.withLock { state -> Bool in
                    if state.spinning { return false }
                    state.spinning = true
                    return true
                }
            if spins {
                let deadline = Self.now() &+ spinNanoseconds
                // Each turn gives the core to any other thread ready to run on it: on a machine
                // whose cores are all busy, polling would otherwise take their time.
                while queued.load(ordering: .acquiring) == 0 && Self.now() < deadline { sched_yield() }
            }
            let job = state.withLock { state -> (@Sendable () -> Void)? in
                if spins { state.spinning = false }
                if let job = take(&state) { return job }
                state.sleepers += 1
                return nil
            }
            if let job {
                job()
            } else {
                waiting.wait()
            }
        }
    }
}

/// A job's body, taken (and so released) by the worker that runs it.
private final class PendingBody<Body: Sendable>: Sendable {
    private let body: Mutex<Body?>

    init(_ body: Body) { self.body = Mutex(body) }

    /// The body; the box holds it no longer.
    func take() -> Body {
        body.withLock { body in
            defer { body = nil }
            return body!
        }
    }
}

/// The result of one job, handed from the worker to the caller: polled while the caller spins,
/// then through a continuation.
private final class Outcome<Value: Sendable>: Sendable {
    private enum State {
        case pending
        case waiting(CheckedContinuation<Value, Never>)
        case done(Value)
    }

    private let state = Mutex(State.pending)
    private let finished = Atomic<Bool>(false)

    /// Called once, on the worker.
    func complete(_ value: Value) {
        let waiter = state.withLock { state -> CheckedContinuation<Value, Never>? in
            defer { state = .done(value) }
            if case .waiting(let continuation) = state { return continuation }
            return nil
        }
        finished.store(true, ordering: .releasing)
        waiter?.resume(returning: value)
    }

    /// The value if the job is done; one atomic load while it is not.
    func ready() -> Value? {
        guard finished.load(ordering: .acquiring) else { return nil }
        return state.withLock { state in
            if case .done(let value) = state { return value }
            return nil
        }
    }

    /// The value, suspending until the job is done.
    func value() async -> Value {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Value? in
                if case .done(let value) = state { return value }
                state = .waiting(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
