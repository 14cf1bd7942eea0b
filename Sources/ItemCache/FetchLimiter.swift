import Synchronization

/// At most `limit` holders at once; the rest wait in order. Waiting is cancellable: a cancelled
/// waiter leaves the queue and throws `CancellationError`, and a slot is never lost or given twice.
final class FetchLimiter: Sendable {
    private struct State {
        var available: Int
        var queue: [(id: Int, continuation: CheckedContinuation<Void, any Error>)] = []
        var nextID = 0
        var cancelled: Set<Int> = []
    }

    private let state: Mutex<State>

    init(limit: Int) {
        state = Mutex(State(available: max(1, limit)))
    }

    /// Waits for a slot. Call ``release()`` once for each successful return.
    func acquire() async throws {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resume: Result<Void, any Error>? = state.withLock { state in
                    if state.cancelled.remove(id) != nil { return .failure(CancellationError()) }
                    if state.available > 0 {
                        state.available -= 1
                        return .success(())
                    }
                    state.queue.append((id, continuation))
                    return nil
                }
                if let resume { continuation.resume(with: resume) }
            }
        } onCancel: {
            let waiting = state.withLock { state -> CheckedContinuation<Void, any Error>? in
                if let index = state.queue.firstIndex(where: { $0.id == id }) {
                    return state.queue.remove(at: index).continuation
                }
                state.cancelled.insert(id)
                return nil
            }
            waiting?.resume(throwing: CancellationError())
        }
        // A waiter cancelled after it was granted a slot keeps it (the caller releases it);
        // forget the mark so the set does not grow.
        state.withLock { _ = $0.cancelled.remove(id) }
    }

    /// Frees a slot, handing it to the longest waiter.
    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            if state.queue.isEmpty {
                state.available += 1
                return nil
            }
            return state.queue.removeFirst().continuation
        }
        next?.resume()
    }
}
