import CLinux
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Why a thread could not be made: `pthread_create`'s error (`EAGAIN` under a task limit such as
/// systemd's `TasksMax`, a container's pids limit or `ulimit -u`).
package struct ThreadStartError: Error, CustomStringConvertible {
    package let name: String
    package let errno: Int32

    package var description: String {
        let reason = String(cString: strerror(errno))
        return "cannot start the thread '\(name)': \(reason) (errno \(errno)); "
            + "the process is at its task limit (systemd TasksMax, a container's pids limit, ulimit -u): raise it"
    }
}

/// Threads refused to one task by ``DetachedThread/simulatedFailure``: the first `allowing` are
/// made, every later one fails with `errno`, as `pthread_create` does at a task limit.
package final class ThreadRefusal: Sendable {
    package let errno: Int32
    private let remaining: Atomic<Int>

    package init(errno: Int32 = EAGAIN, allowing: Int = 0) {
        self.errno = errno
        remaining = Atomic(allowing)
    }

    /// Whether this start is refused (counting it against the threads allowed).
    fileprivate func refuses() -> Bool {
        remaining.subtract(1, ordering: .relaxed).oldValue <= 0
    }
}

/// Threads of the package's own, made with `pthread_create` so that a failure is seen.
///
/// Foundation's `Thread.start()` fails in silence: work handed to a thread that never started
/// never ran, and whoever waited for it waited for good (a connection's slot, a flush, a hook's
/// outcome, the transport's whole loop). Each caller now decides what a failure means: run the
/// work on the calling thread, use fewer helpers, or fail with ``ThreadStartError``.
package enum DetachedThread {
    /// When set, ``start(name:stackSize:_:)`` called from this task (or code it runs
    /// synchronously) makes the threads the refusal allows and fails the rest: how tests reach
    /// each caller's fallback without starving the whole test process of threads.
    @TaskLocal package static var simulatedFailure: ThreadRefusal?

    /// Runs `body` on a new detached thread (as ``start(name:stackSize:_:)``), or on the calling
    /// thread, which it then blocks, when none can be made: for work that must run either way.
    package static func startOrRunHere(
        name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void
    ) {
        do {
            try start(name: name, stackSize: stackSize, body)
        } catch {
            body()
        }
    }

    /// Runs `body` on a new detached thread named `name` (the first 15 bytes, the kernel's limit)
    /// with a stack of `stackSize` bytes (nil: the system's default, `ulimit -s`, as Foundation's
    /// threads had); throws when the system would not make one. `body` is released, unrun, on a
    /// failure.
    package static func start(
        name: String, stackSize: Int? = nil, _ body: @escaping @Sendable () -> Void
    ) throws(ThreadStartError) {
        if let refusal = simulatedFailure, refusal.refuses() {
            throw ThreadStartError(name: name, errno: refusal.errno)
        }
        final class Body: Sendable {
            let name: String
            let run: @Sendable () -> Void
            init(_ name: String, _ run: @escaping @Sendable () -> Void) {
                self.name = name
                self.run = run
            }
        }
        let box = Unmanaged.passRetained(Body(name, body))
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        if let stackSize { pthread_attr_setstacksize(&attributes, max(stackSize, Int(PTHREAD_STACK_MIN))) }
        var thread = pthread_t()
        let created = pthread_create(
            &thread, &attributes,
            { raw in
                let body = Unmanaged<Body>.fromOpaque(raw!).takeRetainedValue()
                _ = clinux_set_thread_name(body.name)
                body.run()
                return nil
            }, box.toOpaque())
        guard created == 0 else {
            box.release()
            throw ThreadStartError(name: name, errno: created)
        }
    }
}
