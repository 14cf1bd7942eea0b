import StorageFormat

/// A version switch about to happen: what ``SyncConfiguration/beforeSwitch`` is shown before the
/// staged tree becomes the content folder.
///
/// The staged tree is complete and has been checked against the published tree digest: it is
/// exactly the tree the switch makes current. Treat it as read-only: files the update carried
/// over are hard links to the current content, so writing to one changes the current version too.
public struct PendingSwitch: Sendable, Equatable {
    /// How the staged tree was built.
    public enum Kind: String, Sendable, Equatable, CaseIterable {
        /// Change lists were replayed onto the current content.
        case replay
        /// The content was restored from the storage's archive.
        case restore
        /// The current version was repaired to match its published tree digest
        /// (``CacheManager/verify(repair:)``): ``PendingSwitch/fromVersion`` equals ``PendingSwitch/toVersion``.
        case repair
    }

    /// How the staged tree was built.
    public var kind: Kind
    /// The version the content folder holds now; nil for a first restore.
    public var fromVersion: CacheVersion?
    /// The version the switch makes current.
    public var toVersion: CacheVersion
    /// The content folder the switch replaces (it may not exist yet before a first restore).
    public var contentDirectory: String
    /// The staged tree that becomes ``contentDirectory``: complete and checked.
    public var stagedDirectory: String
    /// Body bytes fetched for content (the archive, for a restore) by this run.
    public var bytesDownloaded: Int64
    /// Files downloaded by this run (for a restore: extracted from the archive; for a repair: paths fixed).
    public var filesDownloaded: Int
    /// Files carried over from the current version by hard link.
    public var filesReused: Int
    /// Change lists replayed (0 for a restore or a repair).
    public var changeListsApplied: Int

    /// A pending switch with every field given.
    public init(
        kind: Kind, fromVersion: CacheVersion?, toVersion: CacheVersion, contentDirectory: String,
        stagedDirectory: String,
        bytesDownloaded: Int64 = 0, filesDownloaded: Int = 0, filesReused: Int = 0, changeListsApplied: Int = 0
    ) {
        self.kind = kind
        self.fromVersion = fromVersion
        self.toVersion = toVersion
        self.contentDirectory = contentDirectory
        self.stagedDirectory = stagedDirectory
        self.bytesDownloaded = bytesDownloaded
        self.filesDownloaded = filesDownloaded
        self.filesReused = filesReused
        self.changeListsApplied = changeListsApplied
    }
}
