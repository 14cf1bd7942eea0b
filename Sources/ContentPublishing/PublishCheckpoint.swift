import FileKit
import StorageFormat

/// A moment just before a publish changes something on disk, shown to a test hook
/// (``PublishOptions/checkpoint``) that may stop the publish there.
///
/// Every change a publish makes after it takes the lock goes through one checkpoint, in a fixed
/// order, so a test can count them in a clean run and then stop a run before each one.
struct PublishCheckpoint: Sendable, CustomStringConvertible {
    enum Phase: String, Sendable {
        /// Cleaning up after an interrupted publish (rollback, finishing, deleting leftovers).
        case recovery
        /// Building the new files in the work folder; the storage is untouched.
        case staging
        /// Putting staged files in place, up to and including the status (the commit).
        case install
        /// Deleting the work folder after the commit or a rollback.
        case cleanup
    }

    var phase: Phase
    /// What is about to happen, e.g. "keep RXCacheContent.zip".
    var action: String
    /// The checkpoint's position in this run, from 0.
    var index: Int

    var description: String { "#\(index) \(phase.rawValue): \(action)" }

    /// What the hook wants.
    enum Decision: Sendable {
        case proceed
        /// Stop as `kill -9` would: no rollback, no cleanup, everything left on disk as it is.
        case kill
        /// Fail as an I/O error would (the publish rolls back what it installed and cleans up).
        case fail
    }
}
