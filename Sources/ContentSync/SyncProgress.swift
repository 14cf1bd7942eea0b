import FileKit
import StorageFormat

/// How far the running update is. Delivered through ``CacheManager/events()``.
public struct SyncProgress: Sendable, Equatable {
    /// The step an update is at, in the order they come.
    public enum Phase: String, Sendable, Equatable {
        /// Fetching the storage's status.
        case checking
        /// Fetching change lists and planning the net changes.
        case planning
        /// Downloading the archive for a restore.
        case downloadingArchive
        /// Extracting the archive into the staging area.
        case extracting
        /// Downloading changed files for a replay (or files a repair fetches).
        case downloadingFiles
        /// Switching the folder to the staged version.
        case switching
    }

    /// The current step.
    public var phase: Phase
    /// Bytes received so far (network bytes; resumed bytes count once).
    public var bytesDone: Int64
    /// Bytes expected in all, when known (a restore knows the archive size).
    public var bytesTotal: Int64?
    /// Files finished so far in the current phase.
    public var filesDone: Int
    /// Files the current phase handles in all.
    public var filesTotal: Int
    /// What is being worked on: a change description or a path.
    public var currentItem: String?
    /// The version being installed, once the storage's status is read (nil while checking).
    public var toVersion: CacheVersion?

    /// Progress with every field given.
    public init(
        phase: Phase, bytesDone: Int64 = 0, bytesTotal: Int64? = nil, filesDone: Int = 0, filesTotal: Int = 0,
        currentItem: String? = nil
    ) {
        self.phase = phase
        self.bytesDone = bytesDone
        self.bytesTotal = bytesTotal
        self.filesDone = filesDone
        self.filesTotal = filesTotal
        self.currentItem = currentItem
    }
}
