import FileKit
import GRDB
import StorageFormat

/// A file of the pending plan that is fully downloaded into the staging area.
struct CompletedDownloadRecord: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "completedDownload"

    var planIdentity: String
    var path: String
    var bytes: Int64
}
