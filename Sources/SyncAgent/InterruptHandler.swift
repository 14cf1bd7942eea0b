import Dispatch
import Foundation
import Synchronization

/// Turns SIGINT and SIGTERM into a callback (once), so an interrupted command can stop cleanly.
///
/// `@unchecked Sendable`: `sources` is written once in `init` and afterwards only cancelled;
/// the fired flag lives in a Mutex.
final class InterruptHandler: @unchecked Sendable {
    private final class Flag: Sendable {
        let fired = Mutex(false)
        /// True the first time only.
        func fire() -> Bool {
            fired.withLock { value in
                defer { value = true }
                return !value
            }
        }
    }

    private let sources: [any DispatchSourceSignal]
    private let flag = Flag()

    init(_ action: @escaping @Sendable () -> Void) {
        let queue = DispatchQueue(label: "sync-agent.signals")
        let flag = self.flag
        var sources: [any DispatchSourceSignal] = []
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
            source.setEventHandler {
                if flag.fire() { action() }
            }
            source.resume()
            sources.append(source)
        }
        self.sources = sources
    }

    var fired: Bool { flag.fired.withLock { $0 } }

    func cancel() {
        for source in sources { source.cancel() }
        signal(SIGINT, SIG_DFL)
        signal(SIGTERM, SIG_DFL)
    }
}
