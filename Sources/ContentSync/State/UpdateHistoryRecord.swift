import Foundation
import GRDB
import Transport

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

    /// The row that stores `entry`; a URL's password or token in its message is redacted.
    init(_ entry: UpdateHistoryEntry) {
        (startedAt, finishedAt, fromVersion, toVersion) = (
            entry.startedAt, entry.finishedAt, entry.fromVersion, entry.toVersion
        )
        (kind, outcome, error, errorCode) = (
            entry.kind, entry.outcome, entry.message.map(Redaction.text), entry.errorCode?.description
        )
        (bytesDownloaded, filesDownloaded) = (entry.bytesDownloaded, Int64(entry.filesDownloaded))
    }

    mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
    }

    /// The public value.
    var entry: UpdateHistoryEntry {
        UpdateHistoryEntry(
            startedAt: startedAt, finishedAt: finishedAt, fromVersion: fromVersion, toVersion: toVersion, kind: kind,
            outcome: outcome, errorCode: errorCode.flatMap(SyncError.Code.init(name:)),
            // Redacted again: a row written before "v8" or by an older client may quote a password.
            message: error.map(Redaction.text),
            bytesDownloaded: bytesDownloaded, filesDownloaded: Int(filesDownloaded))
    }
}
