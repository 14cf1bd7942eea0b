/// What identifies a file's bytes: its size and SHA-256 (lower-case hex).
public struct FileFingerprint: Sendable, Hashable {
    /// The size in bytes.
    public var size: Int64
    /// The SHA-256 of the bytes, as 64 lower-case hex digits.
    public var sha256: String

    /// A fingerprint of `size` bytes hashing to `sha256`; fingerprints compare the text as it is, so
    /// pass lower-case hex.
    public init(size: Int64, sha256: String) {
        self.size = size
        self.sha256 = sha256
    }
}
