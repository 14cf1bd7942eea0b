import Foundation
import Synchronization

/// A fixed set of threads for blocking file work (tree scans, hashing, hard-linking thousands of
/// files, deleting trees), reached only through ``run(_:)``, which is `async`.
///
/// Swift's cooperative pool has one thread per core (two on the machines we target), so one
/// blocking `read` or `unlinkat` loop there stalls every task of the process. A dispatch queue
/// does not fix it either: GCD adds threads for blocked work without a useful bound. This pool
/// has exactly ``threadCount`` threads and a FIFO queue, like NIO's `NIOThreadPool`: work beyond
/// them waits its turn instead of adding threads.
///
/// A job must not wait for another job of the same pool (it could wait for a thread it holds).
public final class BlockingIOPool: Sendable {
    /// The pool every content-sync library uses unless told otherwise: `max(4, cores)` threads.
    /// Four, not one per core, because most of the work waits for the disk rather than the CPU.
    public static let shared = BlockingIOPool(threadCount: max(4, ProcessInfo.processInfo.activeProcessorCount))

    /// How many threads run jobs.
    public let threadCount: Int

    private struct Queue: ~Copyable {
        var jobs: [@Sendable () -> Void] = []
        var head = 0
    }

    private let queue = Mutex(Queue())
    private let waiting = DispatchSemaphore(value: 0)

    /// Starts `threadCount` threads (at least one). They live as long as the process: pools are
    /// meant to be few and shared.
    public init(threadCount: Int) {
        self.threadCount = max(1, threadCount)
        for index in 0..<self.threadCount {
            let thread = Thread { [self] in self.work() }
            thread.name = "content-sync.io-\(index)"
            thread.start()
        }
    }

    /// Runs `body` on one of the pool's threads and returns its result; the calling task waits
    /// without holding a cooperative thread.
    public func run<T: Sendable, Failure: Error>(
        _ body: @escaping @Sendable () throws(Failure) -> T
    ) async throws(Failure) -> T {
        let result: Result<T, Failure> = await withCheckedContinuation { continuation in
            enqueue {
                continuation.resume(returning: Result { () throws(Failure) -> T in try body() })
            }
        }
        return try result.get()
    }

    private func enqueue(_ job: @escaping @Sendable () -> Void) {
        queue.withLock { $0.jobs.append(job) }
        waiting.signal()
    }

    private func work() {
        while true {
            waiting.wait()
            let job = queue.withLock { queue -> @Sendable () -> Void in
                let job = queue.jobs[queue.head]
                queue.head += 1
                // Drop the consumed prefix now and then, so the array does not grow forever.
                if queue.head >= 64 && queue.head * 2 >= queue.jobs.count {
                    queue.jobs.removeFirst(queue.head)
                    queue.head = 0
                }
                return job
            }
            job()
        }
    }
}
