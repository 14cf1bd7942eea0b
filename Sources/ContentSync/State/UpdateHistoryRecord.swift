import FileKit
import StorageFormat
import Foundation
import GRDB

/// One finished update attempt and its outcome.
public struct UpdateHistoryRecord: Codable, Sendable, Equatable, FetchableRecord, MutablePersistableRecord {
    public static let databaseTableName = "updateHistory"

    public var id: Int64?
    public var startedAt: Date
    public var finishedAt: Date
    public var fromVersion: String?
    public var toVersion: String?
    /// `replay`, `restore` or `check` (nothing to do).
    public var kind: String
    /// `succeeded`, `failed`, `cancelled` or `upToDate`.
    public var outcome: String
    public var error: String?
    public var bytesDownloaded: Int64
    public var filesDownloaded: Int64

    public mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
    }
}
