import FileKit
import StorageFormat
/// Where a ``CacheManager`` is. The names follow the original RXCacheManager's states.
public enum CacheManagerState: String, Sendable, Equatable, Codable {
    /// Not yet known (the manager has not read its state).
    case unknown
    /// Idle and ready to check for updates.
    case ready
    /// Checking or updating now.
    case working
    /// The last update succeeded (or found nothing to do).
    case succeeded
    /// The last update failed; see ``CacheManager/lastError``.
    case failed
    /// Suspended by the app (or by the connection policy); ``CacheManager/resume(overridingPolicy:)`` continues.
    case suspended
}

/// Something a ``CacheManager`` observer is told.
public enum CacheManagerEvent: Sendable {
    case stateChanged(CacheManagerState)
    case progress(SyncProgress)
    /// The connection policy turned false mid-update and the manager suspended. Ask the user,
    /// then call ``CacheManager/resume(overridingPolicy:)`` with `true` to continue anyway.
    case connectionNotAllowed
    case finished(SyncReport)
    case failed(SyncError)
}
