import FileKit
import StorageFormat
/// How far the running update is. Delivered through ``CacheManager/events()``.
public struct SyncProgress: Sendable, Equatable {
    public enum Phase: String, Sendable, Equatable {
        case checking, planning, downloadingArchive, extracting, downloadingFiles, switching
    }

    public var phase: Phase
    /// Bytes received so far (network bytes; resumed bytes count once).
    public var bytesDone: Int64
    /// Bytes expected in all, when known (a restore knows the archive size).
    public var bytesTotal: Int64?
    /// Files finished so far and in all, for the current phase.
    public var filesDone: Int
    public var filesTotal: Int
    /// What is being worked on: a change description or a path.
    public var currentItem: String?

    public init(phase: Phase, bytesDone: Int64 = 0, bytesTotal: Int64? = nil, filesDone: Int = 0, filesTotal: Int = 0,
                currentItem: String? = nil) {
        self.phase = phase
        self.bytesDone = bytesDone
        self.bytesTotal = bytesTotal
        self.filesDone = filesDone
        self.filesTotal = filesTotal
        self.currentItem = currentItem
    }
}
