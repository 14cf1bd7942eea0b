import FileKit
import Foundation
import GRDB
import StorageFormat

/// A storage file the client keeps with its ETag, so the next fetch can be conditional
/// (`If-None-Match`) and a `304` costs no body.
struct CachedResourceRecord: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "cachedResource"

    var url: String
    var etag: String
    var body: Data
    var fetchedAt: Date
}
