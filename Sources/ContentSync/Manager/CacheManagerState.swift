/// Where a ``CacheManager`` is. The names follow the original RXCacheManager's states.
public enum CacheManagerState: String, Sendable, Equatable, Codable {
    /// Not yet known: the folder was never synced (``SyncStatus`` of a fresh folder).
    case unknown
    /// Idle and ready to check for updates.
    case ready
    /// Checking or updating now.
    case working
    /// The last update succeeded (or found nothing to do).
    case succeeded
    /// The last update failed; see ``CacheManager/lastError()``.
    case failed
    /// Suspended by the app (or by the connection policy): nothing runs until
    /// ``CacheManager/resume(overridingPolicy:)`` or ``CacheManager/checkForUpdates()``.
    case suspended
    /// Forgetting the state and deleting the content (``CacheManager/reset()``), after the
    /// running update has stopped.
    case resetting
}

/// Something a ``CacheManager`` observer is told (``CacheManager/events()``).
///
/// Each stream starts with the current state. Every update the app sees end is followed by one
/// of ``finished(_:)``, ``failed(_:)``, ``connectionNotAllowed`` or ``suspended``: an update
/// paused and played again before it had stopped, or stopped by a reset, just goes on or goes.
public enum CacheManagerEvent: Sendable {
    /// The state changed; the same state is never sent twice in a row.
    case stateChanged(CacheManagerState)
    /// How far the running update is.
    case progress(SyncProgress)
    /// The connection policy turned false mid-update and the manager suspended. Ask the user,
    /// then call ``CacheManager/resume(overridingPolicy:)`` with `true` to continue anyway.
    case connectionNotAllowed
    /// The update finished: the folder holds ``SyncReport/toVersion``.
    case finished(SyncReport)
    /// The update failed; the folder keeps its last good version.
    case failed(SyncError)
    /// The update stopped because the app suspended it (``CacheManager/suspend()``, the toggle,
    /// or a cancelled caller). Finished downloads are kept for the next update.
    case suspended
}
