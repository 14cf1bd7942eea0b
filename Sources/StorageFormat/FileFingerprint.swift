/// What identifies a file's bytes: its size and SHA-256 (lower-case hex).
public struct FileFingerprint: Sendable, Hashable {
    public var size: Int64
    public var sha256: String

    public init(size: Int64, sha256: String) {
        self.size = size
        self.sha256 = sha256
    }
}
