import Foundation
import Synchronization

/// Fans events out to every observer. Engine callbacks arrive from I/O threads, so the
/// observer list sits behind a mutex rather than in the actor (no hop per progress tick).
final class EventHub: Sendable {
    private let observers = Mutex<[UUID: AsyncStream<CacheManagerEvent>.Continuation]>([:])

    /// A new stream whose first element is `first`; later events follow in the order sent.
    func stream(startingWith first: CacheManagerEvent) -> AsyncStream<CacheManagerEvent> {
        let (stream, continuation) = AsyncStream.makeStream(
            of: CacheManagerEvent.self, bufferingPolicy: .bufferingNewest(512))
        let id = UUID()
        observers.withLock {
            // Under the lock: no event sent meanwhile can overtake the first one.
            continuation.yield(first)
            $0[id] = continuation
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.observers.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    func send(_ event: CacheManagerEvent) {
        let current = observers.withLock { Array($0.values) }
        for continuation in current { continuation.yield(event) }
    }
}
