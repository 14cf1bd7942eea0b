import CLinux
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The write end of the pipe the signal handler writes to: set once, before the handler is
/// installed, and only read afterwards (in the handler, where nothing may lock).
nonisolated(unsafe) private var interruptPipeWrite: Int32 = -1

/// The SIGINT and SIGTERM handler: one byte, the signal's number, into the pipe (`write` is
/// async-signal-safe; nothing else runs here).
private func interruptSignalHandler(_ signal: Int32) {
    var byte = UInt8(truncatingIfNeeded: signal)
    _ = write(interruptPipeWrite, &byte, 1)
}

/// Turns SIGINT and SIGTERM into a callback (once), so an interrupted command can stop cleanly.
///
/// A plain `sigaction` handler writes to a pipe that a thread of its own reads (the self-pipe
/// way): whichever thread the kernel picks for the signal, it arrives. (A Dispatch signal source
/// lost it now and then: on Linux it reads a signalfd, which sees a signal only while every
/// thread blocks it, and a SIGTERM sent as `serve` printed its URL left it serving for good.)
///
/// `@unchecked Sendable`: the flag lives in a Mutex, the pipe's ends never change.
final class InterruptHandler: @unchecked Sendable {
    private final class Flag: Sendable {
        let fired = Mutex(false)
        let cancelled = Mutex(false)
        /// True the first time only.
        func fire() -> Bool {
            fired.withLock { value in
                defer { value = true }
                return !value
            }
        }
    }

    private static let pipe: (read: Int32, write: Int32)? = {
        var ends: [Int32] = [-1, -1]
        guard clinux_pipe_cloexec(&ends) == 0 else { return nil }
        // A flood of signals must never block the handler.
        _ = fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) | O_NONBLOCK)
        interruptPipeWrite = ends[1]
        return (ends[0], ends[1])
    }()

    private let flag = Flag()

    init(_ action: @escaping @Sendable () -> Void) {
        guard let pipe = Self.pipe else { return }
        let flag = self.flag
        let reader = Thread {
            var byte: UInt8 = 0
            while true {
                let count = read(pipe.read, &byte, 1)
                if count < 0 && errno == EINTR { continue }
                guard count == 1 else { return }
                if flag.cancelled.withLock({ $0 }) { return }
                // 0 is ``cancel()``'s wake-up, never a signal.
                if byte != 0, flag.fire() { action() }
            }
        }
        reader.name = "sync-agent signals"
        reader.start()
        for signalNumber in [SIGINT, SIGTERM] {
            var handling = sigaction()
            handling.__sigaction_handler.sa_handler = interruptSignalHandler
            handling.sa_flags = SA_RESTART
            sigemptyset(&handling.sa_mask)
            sigaction(signalNumber, &handling, nil)
        }
    }

    var fired: Bool { flag.fired.withLock { $0 } }

    /// Gives SIGINT and SIGTERM their default action back and ends the reading thread.
    func cancel() {
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
        flag.cancelled.withLock { $0 = true }
        if let pipe = Self.pipe {
            var wake: UInt8 = 0
            _ = write(pipe.write, &wake, 1)
        }
    }
}
