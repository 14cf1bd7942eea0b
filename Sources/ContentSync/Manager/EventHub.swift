import FileKit
import StorageFormat
import Foundation
import Synchronization

/// Fans events out to every observer. Engine callbacks arrive from I/O threads, so the
/// observer list sits behind a mutex rather than in the actor (no hop per progress tick).
final class EventHub: Sendable {
    private let observers = Mutex<[UUID: AsyncStream<CacheManagerEvent>.Continuation]>([:])

    func stream() -> AsyncStream<CacheManagerEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: CacheManagerEvent.self, bufferingPolicy: .bufferingNewest(512))
        let id = UUID()
        observers.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.observers.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    func send(_ event: CacheManagerEvent) {
        let current = observers.withLock { Array($0.values) }
        for continuation in current { continuation.yield(event) }
    }

    func finishAll() {
        let current = observers.withLock { dict -> [AsyncStream<CacheManagerEvent>.Continuation] in
            defer { dict.removeAll() }
            return Array(dict.values)
        }
        for continuation in current { continuation.finish() }
    }
}
