import FileKit

/// A content folder's shape with every file's fingerprint: what the publisher compares.
public struct ContentTree: Sendable, Equatable {
    /// Every folder, by content path (the root not included).
    public var folders: Set<SafeRelativePath>
    /// Every file's size and SHA-256, by content path.
    public var files: [SafeRelativePath: FileFingerprint]

    /// A tree of these folders and files.
    public init(folders: Set<SafeRelativePath>, files: [SafeRelativePath: FileFingerprint]) {
        self.folders = folders
        self.files = files
    }
}
