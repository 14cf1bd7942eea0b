import Foundation
import GRDB

/// A row of the `updateHistory` table: one ``UpdateHistoryEntry`` as stored. Internal, so the
/// public API shows plain values and no GRDB protocol.
struct UpdateHistoryRecord: Codable, Sendable, Equatable, FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "updateHistory"

    var id: Int64?
    var startedAt: Date
    var finishedAt: Date
    var fromVersion: String?
    var toVersion: String?
    var kind: UpdateHistoryEntry.Kind
    var outcome: UpdateHistoryEntry.Outcome
    /// The readable reason of a failure or cancellation, or a note on a success.
    var error: String?
    var bytesDownloaded: Int64
    var filesDownloaded: Int64
    /// The ``SyncError/Code`` name of a failure or cancellation (column added in "v6").
    var errorCode: String?

    init(startedAt: Date, finishedAt: Date, fromVersion: String?, toVersion: String?, kind: UpdateHistoryEntry.Kind,
         outcome: UpdateHistoryEntry.Outcome, error: String?, errorCode: String? = nil, bytesDownloaded: Int64, filesDownloaded: Int64) {
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.fromVersion = fromVersion
        self.toVersion = toVersion
        self.kind = kind
        self.outcome = outcome
        self.error = error
        self.errorCode = errorCode
        self.bytesDownloaded = bytesDownloaded
        self.filesDownloaded = filesDownloaded
    }

    mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
    }

    /// The public value.
    var entry: UpdateHistoryEntry {
        UpdateHistoryEntry(startedAt: startedAt, finishedAt: finishedAt, fromVersion: fromVersion, toVersion: toVersion, kind: kind,
                           outcome: outcome, errorCode: errorCode.flatMap(SyncError.Code.init(name:)), message: error,
                           bytesDownloaded: bytesDownloaded, filesDownloaded: Int(filesDownloaded))
    }
}
