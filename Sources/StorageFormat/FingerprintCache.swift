import FileKit
import Foundation
import Synchronization

/// File fingerprints already computed, by ``FileIdentity``, so that checking a staged tree
/// against the published digest hashes only files that are new or changed: kept files are hard
/// links to the previous version (same inode, size and time) and downloads were hashed on
/// arrival. Persisted in the state database between runs (`fileFingerprint`).
///
/// A change that keeps a file's size and modification time (deliberate, or bit rot) escapes this
/// quick check; `sync-agent verify` always hashes every byte.
package final class FingerprintCache: Sendable {
    package init() {}

    private struct Values {
        var known: [FileIdentity: FileFingerprint] = [:]
        /// Entries used or added since the last ``startTracking()``: the files of the tree being checked.
        var used: [FileIdentity: FileFingerprint] = [:]
        /// Whether the stored entries were asked for (see ``claimLoading()``).
        var loadClaimed = false
    }

    private let values = Mutex(Values())

    /// True the first time only: the caller then loads the stored entries, which every later
    /// caller (the planner, then the tree check, of one update) shares.
    package func claimLoading() -> Bool {
        values.withLock { values in
            defer { values.loadClaimed = true }
            return !values.loadClaimed
        }
    }

    /// Adds the stored entries. An entry already known wins: it was hashed by this process
    /// (``insert(_:for:)``), perhaps for an inode number a stored row names from a file since
    /// deleted, so loading while files arrive gives the same cache as loading before.
    package func load(_ entries: [FileIdentity: FileFingerprint]) {
        values.withLock { $0.known.merge(entries) { current, _ in current } }
    }

    package func insert(_ fingerprint: FileFingerprint, for identity: FileIdentity) {
        values.withLock {
            $0.known[identity] = fingerprint
            $0.used[identity] = fingerprint
        }
    }

    package func lookup(_ identity: FileIdentity) -> FileFingerprint? {
        values.withLock { values in
            guard let fingerprint = values.known[identity] else { return nil }
            values.used[identity] = fingerprint
            return fingerprint
        }
    }

    /// Whether `identity` is known (without counting it as used).
    package func contains(_ identity: FileIdentity) -> Bool {
        values.withLock { $0.known[identity] != nil }
    }

    package func startTracking() {
        values.withLock { $0.used = [:] }
    }

    /// The entries of the last checked tree, to persist with the version switch.
    package var used: [FileIdentity: FileFingerprint] {
        values.withLock { $0.used }
    }
}
