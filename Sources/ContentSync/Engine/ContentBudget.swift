import Foundation
import StorageFormat
import Synchronization

/// What an update may download into its staging area: the content size the storage's status
/// declares (`unzippedArchiveSizeInMB`), with the slack an extraction gets for its rounding.
///
/// No published file can be larger than the whole content, and a replay's new files together
/// cannot be either. Without it, a file with no declared size (a storage without integrity
/// data) was limited by nothing: an endless body or a gzip bomb filled the disk and was
/// installed. A file whose integrity data declares a size reserves it when it starts (one that
/// does not fit is refused before a byte is fetched); a file of unknown size may take what is
/// left when it starts, and is counted when it ends.
final class ContentBudget: Sendable {
    /// The bytes the status allows.
    let limit: Int64
    /// How the status declared it, for messages.
    let declared: String
    private let used = Mutex<Int64>(0)

    init(status: CacheStatus) {
        let declared = status.unzippedBytes
        limit = declared + declared / 20 + (1 << 20)
        self.declared =
            "version \(status.actualVersion)'s status declares \(declared) bytes of content (unzippedArchiveSizeInMB)"
    }

    /// A budget of `limit` bytes (tests).
    init(limit: Int64) {
        self.limit = limit
        declared = "\(limit) bytes"
    }

    /// The bytes left.
    var remaining: Int64 { used.withLock { max(0, limit - $0) } }

    /// Reserves `size` bytes for a file that declares it; false when they do not fit.
    func reserve(_ size: Int64) -> Bool {
        used.withLock { used in
            guard size >= 0, size <= limit - used else { return false }
            used += size
            return true
        }
    }

    /// Gives back a reservation (a download that failed, or a file found smaller).
    func release(_ size: Int64) {
        used.withLock { $0 -= max(0, size) }
    }

    /// Counts `size` bytes written for a file of unknown size.
    func spend(_ size: Int64) {
        used.withLock { $0 += max(0, size) }
    }
}

/// What one download of unknown size took from a ``ContentBudget`` as its file grew: bytes are
/// taken as they come, so that downloads running at once share what is left (each used to be
/// allowed all of it, and eight endless bodies filled eight times the declared size). A size
/// the file already had (an attempt that started over) is not taken twice.
final class BudgetShare: Sendable {
    private let budget: ContentBudget
    private let taken = Mutex<Int64>(0)

    init(of budget: ContentBudget) { self.budget = budget }

    /// The bytes taken so far.
    var total: Int64 { taken.withLock { $0 } }

    /// Takes what a file of `size` bytes needs beyond what was taken; false when it does not fit.
    func admit(size: Int64) -> Bool {
        taken.withLock { taken in
            let growth = size - taken
            guard growth > 0 else { return true }
            guard budget.reserve(growth) else { return false }
            taken = size
            return true
        }
    }
}

/// The budget of the update in progress, if any: set by ``SyncEngine`` once it has the status,
/// read by ``VerifiedDownloader`` for each download.
final class ContentBudgetSlot: Sendable {
    private let budget = Mutex<ContentBudget?>(nil)

    var current: ContentBudget? { budget.withLock { $0 } }

    func set(_ value: ContentBudget?) { budget.withLock { $0 = value } }
}
