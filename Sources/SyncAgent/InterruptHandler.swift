import Foundation
import ProcessKit
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Turns SIGINT and SIGTERM into a callback (once), so an interrupted command can stop cleanly.
/// Used by `sync`, `serve` and `watch`.
///
/// A second SIGINT or SIGTERM ends the process at once (exit 128 + the signal), as a kill would:
/// a stop that cannot finish (a hook that ignores SIGTERM, within its grace; a runtime starved
/// of threads at a task limit, which the audit saw ignore SIGTERM for good) is then ended by
/// whoever asked twice. Every step of an update is safe to kill: the next run recovers.
///
/// The signals come through ``SignalRelay`` (a `sigaction` handler and a pipe), which no thread's
/// signal mask can make lose one; see there why not a Dispatch signal source.
final class InterruptHandler: Sendable {
    private final class Flag: Sendable {
        let value = Mutex(false)
        /// True the first time only.
        func fire() -> Bool {
            value.withLock { value in
                defer { value = true }
                return !value
            }
        }
    }

    private let flag = Flag()
    private let tokens = Mutex<[SignalRelay.Token]>([])

    init(_ action: @escaping @Sendable () -> Void) {
        guard let relay = SignalRelay.shared else { return }
        let flag = self.flag
        tokens.withLock {
            $0 = [SIGINT, SIGTERM].map { signal in
                relay.observe(signal) {
                    if flag.fire() {
                        action()
                    } else {
                        Self.exitAtOnce(signal)
                    }
                }
            }
        }
    }

    var fired: Bool { flag.value.withLock { $0 } }

    /// The second signal: one line on stderr, then `_exit` (no handler, no flush of state that a
    /// starved runtime could not run).
    private static func exitAtOnce(_ signal: Int32) -> Never {
        let name = signal == SIGINT ? "SIGINT" : "SIGTERM"
        let line = Array(
            "sync-agent: a second \(name): stopping at once; the next run recovers what this one left\n".utf8)
        _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
        _exit(128 + signal)
    }

    /// Gives SIGINT and SIGTERM their previous action back.
    func cancel() {
        let taken = tokens.withLock { tokens in
            defer { tokens = [] }
            return tokens
        }
        for token in taken { SignalRelay.shared?.stopObserving(token) }
    }
}
