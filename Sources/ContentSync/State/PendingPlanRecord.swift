import DatabaseKit
import FileKit
import Foundation
import GRDB
import StorageFormat

/// The update in progress, so that a restarted process continues it instead of starting over.
struct PendingPlanRecord: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "pendingPlan"

    enum Phase: String, Codable, Sendable {
        /// Building the next version in the staging area.
        case staging
        /// The staged tree is complete and is being swapped in; see ``stagedInode``.
        case switching
    }

    var id: Int64 = 1
    /// ``SyncPlan/identity`` for replays, `restore:<version>:<archive URL>` for restores.
    var identity: String
    var kind: String
    var fromVersion: String?
    var toVersion: String
    var phase: Phase
    /// The staged folder's device and inode, recorded before the swap. After a crash, the
    /// content folder having this inode proves the swap happened.
    var stagedDevice: Int64?
    var stagedInode: Int64?
    var createdAt: Date
    /// Whether the previous version stays as the twin after the switch (``TwinState``).
    var keepsTwin = false
    /// Whether this plan's catch-up of the twin has done its removals (see ``Stager``).
    var twinCaughtUp = false
}

extension PendingPlanRecord {
    /// Read leniently (protocol.md §6): a plan missing any of its parts, or holding a value of
    /// the wrong type, is ``DamagedRow`` (read as no plan: the next update starts afresh).
    init(row: Row) throws {
        guard let identity: String = row.lenient("identity"), let kind: String = row.lenient("kind"),
            let toVersion: String = row.lenient("toVersion"),
            let phase = (row.lenient("phase") as String?).flatMap(Phase.init(rawValue:)),
            let createdAt: Date = row.lenient("createdAt")
        else { throw DamagedRow(table: Self.databaseTableName) }
        self.init(
            id: row.lenient("id") ?? 1, identity: identity, kind: kind, fromVersion: row.lenient("fromVersion"),
            toVersion: toVersion, phase: phase, stagedDevice: row.lenient("stagedDevice"),
            stagedInode: row.lenient("stagedInode"), createdAt: createdAt,
            keepsTwin: row.lenient("keepsTwin") ?? false, twinCaughtUp: row.lenient("twinCaughtUp") ?? false)
    }

    /// The plan row, or nil when there is none or it is damaged.
    static func fetchLenient(_ db: Database) throws -> PendingPlanRecord? {
        do {
            return try fetchOne(db, key: 1)
        } catch is DamagedRow {
            return nil
        }
    }
}
