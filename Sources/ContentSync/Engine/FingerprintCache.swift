import Foundation
import Synchronization

/// What identifies a file's bytes without reading them, as rsync's quick check does: the inode
/// (hard links share it), the size and the modification time in nanoseconds.
struct FileIdentity: Hashable, Sendable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var modifiedNanoseconds: Int64

    /// The identity of the regular file at `path`, or nil when it cannot be read.
    init?(path: String) {
        guard let info = try? LongPath.at(path, { folder, rest throws(SyncError) -> stat? in
            var info = stat()
            return fstatat(folder, rest, &info, AT_SYMLINK_NOFOLLOW) == 0 ? info : nil
        }) ?? nil, info.st_mode & S_IFMT == S_IFREG else { return nil }
        self.init(info)
    }

    /// The identity in a `stat` result.
    init(_ info: stat) {
        self.init(device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
                  modifiedNanoseconds: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec))
    }

    init(device: UInt64, inode: UInt64, size: Int64, modifiedNanoseconds: Int64) {
        self.device = device
        self.inode = inode
        self.size = size
        self.modifiedNanoseconds = modifiedNanoseconds
    }
}

/// File fingerprints already computed, by ``FileIdentity``, so that checking a staged tree
/// against the published digest hashes only files that are new or changed: kept files are hard
/// links to the previous version (same inode, size and time) and downloads were hashed on
/// arrival. Persisted in the state database between runs (`fileFingerprint`).
///
/// A change that keeps a file's size and modification time (deliberate, or bit rot) escapes this
/// quick check; `sync-agent verify` always hashes every byte.
final class FingerprintCache: Sendable {
    private struct Values {
        var known: [FileIdentity: FileFingerprint] = [:]
        /// Entries used or added since the last ``startTracking()``: the files of the tree being checked.
        var used: [FileIdentity: FileFingerprint] = [:]
    }

    private let values = Mutex(Values())

    func load(_ entries: [FileIdentity: FileFingerprint]) {
        values.withLock { $0.known.merge(entries) { _, new in new } }
    }

    func insert(_ fingerprint: FileFingerprint, for identity: FileIdentity) {
        values.withLock {
            $0.known[identity] = fingerprint
            $0.used[identity] = fingerprint
        }
    }

    func lookup(_ identity: FileIdentity) -> FileFingerprint? {
        values.withLock { values in
            guard let fingerprint = values.known[identity] else { return nil }
            values.used[identity] = fingerprint
            return fingerprint
        }
    }

    func startTracking() {
        values.withLock { $0.used = [:] }
    }

    /// The entries of the last checked tree, to persist with the version switch.
    var used: [FileIdentity: FileFingerprint] {
        values.withLock { $0.used }
    }

    /// The fingerprint of the file at `path`: from the cache when its identity is known, else
    /// hashed and remembered.
    func fingerprint(of path: String, identity: FileIdentity? = nil) throws(SyncError) -> FileFingerprint {
        if let identity = identity ?? FileIdentity(path: path), let known = lookup(identity) { return known }
        let fingerprint = try ContentTree.fingerprint(of: path)
        // Stat again: a file that changed while it was read must not be remembered under its new identity.
        if let identity = FileIdentity(path: path), identity.size == fingerprint.size { insert(fingerprint, for: identity) }
        return fingerprint
    }
}
