import ContentPublishing
import FileKit
import Foundation
import StorageFormat

/// Runs `body` with a fresh empty folder, deleted afterwards.
///
/// Deleted with ``TreeRemoval``, for which an entry that vanishes meanwhile is fine: a manager
/// released as the body returns closes its database on another thread, SQLite deletes the
/// `-wal` file then, and `FileManager.removeItem` gave up on it and left the folder behind.
func withTemporaryDirectory<T>(_ body: (String) async throws -> T) async throws -> T {
    let path = NSTemporaryDirectory() + "content-sync-tests-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    defer { try? TreeRemoval.remove(path) }
    return try await body(path)
}

/// Runs blocking work (publishing, hashing trees, planning in loops) on a thread of its own.
///
/// Swift Testing runs tests on the cooperative pool, which has as many threads as cores (two on
/// these machines). A test that blocks one for seconds starves the loopback servers and clients
/// of the tests running beside it, whose timed waits then fail (house style #9, for tests too).
func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.stackSize = 8 << 20
        thread.start()
    }
}

/// ``withTemporaryDirectory(_:)`` for a test whose whole body blocks: the body runs ``offPool(_:)``.
func withBlockingTemporaryDirectory<T: Sendable>(_ body: @escaping @Sendable (String) throws -> T) async throws -> T {
    try await withTemporaryDirectory { path in try await offPool { try body(path) } }
}
