import Foundation
import Synchronization

/// The state every request reads: the root, the fault rules and the request log.
///
/// Handlers run concurrently on FlyingFox's connection tasks and only need short, synchronous
/// reads and writes, so a `Mutex` fits better than an actor hop per request.
final class ServerState: Sendable {
    private struct Values {
        var root: URL
        var rules: [FaultRule] = []
        var log: [RequestRecord] = []
        /// Bumped by `clearFaults()`; stalls started under an older value give up.
        var faultGeneration = 0
        var randomFaults: RandomFaults?
    }

    private let values: Mutex<Values>

    init(root: URL) {
        values = Mutex(Values(root: root))
    }

    var root: URL {
        get { values.withLock { $0.root } }
        set { values.withLock { $0.root = newValue } }
    }

    // MARK: Faults

    func addRule(_ rule: FaultRule) {
        values.withLock { $0.rules.append(rule) }
    }

    func setRandomFaults(_ faults: RandomFaults?) {
        values.withLock { $0.randomFaults = faults }
    }

    /// The first live rule matching `path`, counted as used. Rules are tried in the order added;
    /// without one, the random faults (if any) draw.
    func takeFault(for path: String) -> Fault? {
        values.withLock { values in
            guard let index = values.rules.firstIndex(where: { $0.match.matches(path) }) else {
                return values.randomFaults?.draw(for: path)
            }
            let fault = values.rules[index].fault
            if let remaining = values.rules[index].remaining {
                if remaining <= 1 {
                    values.rules.remove(at: index)
                } else {
                    values.rules[index].remaining = remaining - 1
                }
            }
            return fault
        }
    }

    func clearFaults() {
        values.withLock {
            $0.rules.removeAll()
            $0.randomFaults = nil
            $0.faultGeneration += 1
        }
    }

    var faultGeneration: Int {
        values.withLock { $0.faultGeneration }
    }

    // MARK: Log

    func record(_ record: RequestRecord) {
        values.withLock { $0.log.append(record) }
    }

    var log: [RequestRecord] {
        values.withLock { $0.log }
    }

    func resetLog() {
        values.withLock { $0.log.removeAll() }
    }
}
