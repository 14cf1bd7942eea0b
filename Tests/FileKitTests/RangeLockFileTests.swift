import FileKit
import Foundation
import Testing

/// OFD byte-range locks, and the holds one object keeps for its threads.
@Suite("RangeLockFile: slots, shared and exclusive, across objects and across threads of one object")
struct RangeLockFileTests {
    static func lockPath() -> String {
        NSTemporaryDirectory() + "range-lock-\(UUID().uuidString.prefix(8))"
    }

    @Test("two objects on one path exclude each other per slot, shared with shared only")
    func objectsExcludeEachOther() throws {
        let path = Self.lockPath()
        defer { unlink(path) }
        let first = try RangeLockFile(path: path)
        let second = try RangeLockFile(path: path)
        #expect(try first.tryLock(slot: 1, exclusive: true))
        #expect(try !second.tryLock(slot: 1, exclusive: false))
        #expect(try second.tryLock(slot: 2, exclusive: true), "another slot is independent")
        first.unlock(slot: 1)
        #expect(try second.tryLock(slot: 1, exclusive: false))
        #expect(try first.tryLock(slot: 1, exclusive: false), "shared with shared")
        #expect(try !first.tryLock(slot: 1, exclusive: true), "shared holds exclude an exclusive one")
    }

    @Test("shared holds of one object add up: the lock stays until the last is released")
    func sharedHoldsAreCounted() throws {
        let path = Self.lockPath()
        defer { unlink(path) }
        let writers = try RangeLockFile(path: path)
        let reconciler = try RangeLockFile(path: path)
        try writers.lock(slot: 0, exclusive: false) // thread A
        try writers.lock(slot: 0, exclusive: false) // thread B
        writers.unlock(slot: 0) // A is done; B still relies on the lock
        #expect(try !reconciler.tryLock(slot: 0, exclusive: true), "B's hold must keep the lock")
        writers.unlock(slot: 0)
        #expect(try reconciler.tryLock(slot: 0, exclusive: true))
    }

    @Test("an exclusive hold excludes the object's other threads too, and lock waits for it")
    func exclusiveHoldsExcludeThreads() async throws {
        let path = Self.lockPath()
        defer { unlink(path) }
        let file = try RangeLockFile(path: path)
        #expect(try file.tryLock(slot: 5, exclusive: true))
        #expect(try !file.tryLock(slot: 5, exclusive: true), "a second thread of the same object")
        #expect(try !file.tryLock(slot: 5, exclusive: false))
        let waiter = Thread.detachNewThreadWithResult { try? file.lock(slot: 5, exclusive: false) }
        try await Task.sleep(for: .milliseconds(50))
        #expect(!waiter.isFinished, "lock waits while the exclusive hold lasts")
        file.unlock(slot: 5)
        try await waiter.wait()
        #expect(try !file.tryLock(slot: 5, exclusive: true), "the waiter now holds it shared")
        file.unlock(slot: 5)
        #expect(try file.tryLock(slot: 5, exclusive: true))
    }
}

/// A thread whose end can be awaited.
final class ThreadResult: @unchecked Sendable {
    private let done = NSCondition()
    private var finished = false
    var isFinished: Bool {
        done.lock()
        defer { done.unlock() }
        return finished
    }
    func finish() {
        done.lock()
        finished = true
        done.broadcast()
        done.unlock()
    }
    func wait() async throws {
        while !isFinished { try await Task.sleep(for: .milliseconds(5)) }
    }
}

extension Thread {
    static func detachNewThreadWithResult(_ body: @escaping @Sendable () -> Void) -> ThreadResult {
        let result = ThreadResult()
        Thread.detachNewThread {
            body()
            result.finish()
        }
        return result
    }
}
