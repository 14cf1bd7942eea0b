/// What ``ZipExtractor`` wrote.
public struct ZipExtractionReport: Sendable, Equatable {
    /// Regular files created.
    public var files: Int
    /// Folders created, both those listed in the archive and parents implied by file names.
    public var folders: Int
    /// Inflated bytes written, summed over all files.
    public var bytesWritten: Int64
    /// Entries skipped because they lie under one of ``ZipExtractionOptions/skippedTopLevelFolders``.
    public var skippedEntries: Int

    /// A report with the given counts.
    public init(files: Int, folders: Int, bytesWritten: Int64, skippedEntries: Int) {
        self.files = files
        self.folders = folders
        self.bytesWritten = bytesWritten
        self.skippedEntries = skippedEntries
    }
}
