import Foundation
import ProcessKit
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Turns SIGINT and SIGTERM into a callback (once), so an interrupted command can stop cleanly.
/// Used by `sync`, `serve` and `watch`.
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
        let onSignal: @Sendable () -> Void = { if flag.fire() { action() } }
        tokens.withLock { $0 = [SIGINT, SIGTERM].map { relay.observe($0, onSignal) } }
    }

    var fired: Bool { flag.value.withLock { $0 } }

    /// Gives SIGINT and SIGTERM their previous action back.
    func cancel() {
        let taken = tokens.withLock { tokens in
            defer { tokens = [] }
            return tokens
        }
        for token in taken { SignalRelay.shared?.stopObserving(token) }
    }
}
