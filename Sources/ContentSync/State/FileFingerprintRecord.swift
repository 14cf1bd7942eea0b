import FileKit
import GRDB
import StorageFormat

/// One remembered file fingerprint (see ``FingerprintCache``): the quick-check identity of a file
/// of the current version, and its size and SHA-256.
struct FileFingerprintRecord: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "fileFingerprint"

    var device: Int64
    var inode: Int64
    var size: Int64
    var modifiedNanoseconds: Int64
    var sha256: String

    init(_ identity: FileIdentity, _ fingerprint: FileFingerprint) {
        device = Int64(bitPattern: identity.device)
        inode = Int64(bitPattern: identity.inode)
        size = identity.size
        modifiedNanoseconds = identity.modifiedNanoseconds
        sha256 = fingerprint.sha256
    }

    var identity: FileIdentity {
        FileIdentity(
            device: UInt64(bitPattern: device), inode: UInt64(bitPattern: inode), size: size,
            modifiedNanoseconds: modifiedNanoseconds)
    }

    var fingerprint: FileFingerprint {
        FileFingerprint(size: size, sha256: sha256)
    }
}
