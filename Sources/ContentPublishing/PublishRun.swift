import FileKit
import StorageFormat

/// One publish's passage through its checkpoints: the test hook, the running count, and
/// whether the hook "killed" it (then nothing may roll back or clean up, as after `kill -9`).
final class PublishRun {
    private let hook: (@Sendable (PublishCheckpoint) -> PublishCheckpoint.Decision)?
    private var count = 0
    /// Set when the hook chose `.kill`: the caller must leave the disk as it is.
    private(set) var killed = false
    /// Tests only: behave as on a filesystem without `RENAME_EXCHANGE`.
    let exchangeUnsupported: Bool

    init(hook: (@Sendable (PublishCheckpoint) -> PublishCheckpoint.Decision)?, exchangeUnsupported: Bool = false) {
        self.hook = hook
        self.exchangeUnsupported = exchangeUnsupported
    }

    /// Called just before a change on disk; throws when the hook stops the publish here.
    func checkpoint(_ phase: PublishCheckpoint.Phase, _ action: @autoclosure () -> String) throws(PublishError) {
        guard let hook else { return }
        let point = PublishCheckpoint(phase: phase, action: action(), index: count)
        count += 1
        switch hook(point) {
        case .proceed:
            return
        case .kill:
            killed = true
            throw PublishError(code: .interrupted, message: "stopped at checkpoint \(point) (simulated kill)")
        case .fail:
            throw PublishError(code: .fileSystem, message: "failed at checkpoint \(point) (simulated I/O error)")
        }
    }
}
