import FileKit
import StorageFormat

/// What one update did.
public struct SyncReport: Sendable, Equatable {
    /// What the update did.
    public enum Outcome: String, Sendable, Equatable {
        /// The content already was at the storage's version.
        case upToDate
        /// Change lists were replayed.
        case replayed
        /// The content was restored from the archive.
        case restored
    }

    /// What the update did.
    public var outcome: Outcome
    /// The version the folder held before, if any.
    public var fromVersion: CacheVersion?
    /// The version the folder holds now.
    public var toVersion: CacheVersion
    /// Body bytes fetched over the network for content (archive or files), not counting JSON.
    public var bytesDownloaded: Int64
    /// Files downloaded (for a restore: files extracted from the archive).
    public var filesDownloaded: Int
    /// Files carried over from the previous version by hard link.
    public var filesReused: Int
    /// Downloads skipped because an interrupted run had already finished them.
    public var filesAlreadyDownloaded: Int
    /// Change lists replayed.
    public var changeListsApplied: Int
    /// Tolerated storage mistakes, each naming the change.
    public var warnings: [String]
    /// Paths fixed after the update because the tree did not match the published digest.
    public var repairedFiles = 0

    /// A report with every field given.
    public init(
        outcome: Outcome, fromVersion: CacheVersion?, toVersion: CacheVersion, bytesDownloaded: Int64 = 0,
        filesDownloaded: Int = 0, filesReused: Int = 0, filesAlreadyDownloaded: Int = 0,
        changeListsApplied: Int = 0, warnings: [String] = []
    ) {
        self.outcome = outcome
        self.fromVersion = fromVersion
        self.toVersion = toVersion
        self.bytesDownloaded = bytesDownloaded
        self.filesDownloaded = filesDownloaded
        self.filesReused = filesReused
        self.filesAlreadyDownloaded = filesAlreadyDownloaded
        self.changeListsApplied = changeListsApplied
        self.warnings = warnings
    }
}
