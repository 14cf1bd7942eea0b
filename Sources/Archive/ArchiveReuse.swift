/// What ``ZipWriter/archive(folder:to:topLevelFolder:reusing:)`` may copy from the archive of the
/// previous version: its path, and the files (relative to the archived folder) whose content the
/// caller knows to be unchanged. Each is still checked by CRC-32 and size before it is copied.
public struct ArchiveReuse: Sendable {
    public var previousArchive: String
    public var unchanged: Set<SafeRelativePath>

    public init(previousArchive: String, unchanged: Set<SafeRelativePath>) {
        self.previousArchive = previousArchive
        self.unchanged = unchanged
    }
}
