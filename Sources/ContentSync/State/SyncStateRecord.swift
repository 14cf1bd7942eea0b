import DatabaseKit
import Foundation
import GRDB

/// The single row that says which version the content folder holds and how the last run went.
struct SyncStateRecord: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "syncState"

    var id: Int64 = 1
    /// The version the content folder holds; nil before the first successful update.
    var localVersion: String?
    /// The manager state the last run ended in (`succeeded`, `failed`, …).
    var state: String
    /// The readable error of the last failed run.
    var lastError: String?
    /// The ``SyncError/Code`` name of that error.
    var lastErrorCode: String?
    /// When the storage was last asked for its status.
    var lastCheck: Date?
    /// The content folder this state belongs to; a state file is never shared between folders.
    var contentDirectory: String
    /// The storage the folder mirrors, as last configured, its user info redacted (`Redaction`):
    /// `sync-agent verify` uses it when it holds no password or token.
    var baseURL: String?
    /// The highest version a signed status was ever accepted at: a lower one is a rollback.
    var highestAcceptedVersion: String?
    /// Attempts that failed since the last one that succeeded (cancelled ones leave it as it is).
    var consecutiveFailures: Int64 = 0

    init(
        localVersion: String?, state: String, lastError: String? = nil, lastErrorCode: String? = nil,
        lastCheck: Date? = nil, contentDirectory: String
    ) {
        self.localVersion = localVersion
        self.state = state
        self.lastError = lastError
        self.lastErrorCode = lastErrorCode
        self.lastCheck = lastCheck
        self.contentDirectory = contentDirectory
    }

    /// Read leniently (protocol.md §6): a value of the wrong type (a date that is no date, text
    /// for a count) reads as missing, never as an error that stops every command, `reset` too.
    init(row: Row) throws {
        id = row.lenient("id") ?? 1
        localVersion = row.lenient("localVersion")
        state = row.lenient("state") ?? "failed"
        lastError = row.lenient("lastError")
        lastErrorCode = row.lenient("lastErrorCode")
        lastCheck = row.lenient("lastCheck")
        // Another folder's, for all this run can tell: the checks that compare it refuse.
        contentDirectory = row.lenient("contentDirectory") ?? ""
        baseURL = row.lenient("baseURL")
        highestAcceptedVersion = row.lenient("highestAcceptedVersion")
        consecutiveFailures = max(0, row.lenient("consecutiveFailures") ?? 0)
    }
}
