/// Limits and layout rules for ``ZipExtractor``.
public struct ZipExtractionOptions: Sendable {
    /// The most inflated bytes the extraction may write, summed over all files. The caller sets it,
    /// usually to the unzipped size the storage declares plus some slack. Both the sum of the sizes
    /// the archive declares and the bytes really inflated are held to it, since headers can lie.
    public var maxTotalBytes: Int64
    /// The most entries the archive may hold (files and folders). Default 10,000,000: a mirror of
    /// a few million files restores, and what an archive's entries cost in memory stays bounded.
    /// (It was 1,000,000, which refused a tree of 1,000,000 files in folders of 100.)
    public var maxEntries: Int = 10_000_000
    /// A top-level folder to strip when every kept entry lies under it, so that
    /// `RXCacheContent/a.txt` lands at `a.txt`. `nil` never strips. Default `"RXCacheContent"`.
    public var stripTopLevelFolder: String? = "RXCacheContent"
    /// Top-level folders whose entries are skipped without error (their names are still checked).
    /// Default `["__MACOSX"]`, the resource-fork folder that macOS's Archive Utility adds.
    public var skippedTopLevelFolders: [String] = ["__MACOSX"]
    /// Threads inflating at once, each with its own libzip handle. Values below 1 count as 1.
    /// Default 2.
    public var workers: Int = 2
    /// Central-directory records one libzip handle reads at a time. libzip keeps every record of
    /// what it opens in memory (about 320 bytes each), so an archive is opened in windows of this
    /// many entries, each as an archive of its own; 0 or less opens it whole. An archive that is
    /// not plainly laid out (data before it or after it, two possible end records) is opened
    /// whole. Default 16,384 (about 5 MiB per handle).
    public var centralDirectoryWindow: Int = 16_384

    /// Options with the given byte limit and the defaults above.
    public init(maxTotalBytes: Int64) {
        self.maxTotalBytes = maxTotalBytes
    }
}
