import FileKit

/// What ``ZipWriter/archive(folder:to:topLevelFolder:reusing:)`` may copy from the archive of the
/// previous version: its path, and for files of the new folder whose bytes the previous version
/// already had, where they were (a file kept in place maps to itself; a moved or renamed one to
/// its old path). Each entry is still checked by CRC-32 and size before it is copied.
public struct ArchiveReuse: Sendable {
    /// The path of the previous version's archive; its entries are copied only when this library
    /// wrote it with the same zlib, else nothing is reused.
    public var previousArchive: String
    /// New path → the previous version's path holding the same bytes.
    public var sources: [SafeRelativePath: SafeRelativePath]

    /// Reuse of `previousArchive`'s entries for the new files in `sources`.
    public init(previousArchive: String, sources: [SafeRelativePath: SafeRelativePath]) {
        self.previousArchive = previousArchive
        self.sources = sources
    }
}
