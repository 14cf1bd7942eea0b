import Dispatch
import FileKit
import StorageFormat
import Synchronization

/// Passes on at most one progress report per interval (20 a second by default), plus any report
/// that completes its total. Extraction reports after every write; unthrottled, that woke an
/// observer thread thousands of times per restore.
final class ProgressThrottle: Sendable {
    private let last = Mutex<UInt64>(0)
    private let intervalNanoseconds: UInt64

    init(interval: Duration = .milliseconds(50)) {
        intervalNanoseconds =
            UInt64(interval.components.seconds) * 1_000_000_000
            + UInt64(interval.components.attoseconds / 1_000_000_000)
    }

    /// Whether a report made now should be delivered.
    func shouldReport(final: Bool = false) -> Bool {
        let now = DispatchTime.now().uptimeNanoseconds
        return last.withLock { last in
            guard final || now &- last >= intervalNanoseconds else { return false }
            last = now
            return true
        }
    }
}
