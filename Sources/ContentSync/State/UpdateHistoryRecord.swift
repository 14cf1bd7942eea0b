import DatabaseKit
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

    /// Read leniently (protocol.md §6): a row missing a part or holding a value of the wrong
    /// type is ``DamagedRow``, and history reads skip it.
    init(row: Row) throws {
        guard let startedAt: Date = row.lenient("startedAt"), let finishedAt: Date = row.lenient("finishedAt"),
            let kind = (row.lenient("kind") as String?).flatMap(UpdateHistoryEntry.Kind.init(rawValue:)),
            let outcome = (row.lenient("outcome") as String?).flatMap(UpdateHistoryEntry.Outcome.init(rawValue:))
        else { throw DamagedRow(table: Self.databaseTableName) }
        (id, self.startedAt, self.finishedAt, self.kind, self.outcome) = (
            row.lenient("id"), startedAt, finishedAt, kind, outcome
        )
        (fromVersion, toVersion, error, errorCode) = (
            row.lenient("fromVersion"), row.lenient("toVersion"), row.lenient("error"), row.lenient("errorCode")
        )
        (bytesDownloaded, filesDownloaded) = (
            max(0, row.lenient("bytesDownloaded") ?? 0), max(0, row.lenient("filesDownloaded") ?? 0)
        )
    }

    /// Each row of `request` that reads, newest first as asked; damaged ones are skipped.
    static func fetchLenient(_ db: Database, _ request: QueryInterfaceRequest<Self>) throws -> [Self] {
        try Row.fetchAll(db, request).compactMap { try? Self(row: $0) }
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
