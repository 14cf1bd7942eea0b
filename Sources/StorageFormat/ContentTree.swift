import FileKit

/// A content folder's shape with every file's fingerprint: what the publisher compares.
public struct ContentTree: Sendable, Equatable {
    public var folders: Set<SafeRelativePath>
    public var files: [SafeRelativePath: FileFingerprint]

    public init(folders: Set<SafeRelativePath>, files: [SafeRelativePath: FileFingerprint]) {
        self.folders = folders
        self.files = files
    }
}
