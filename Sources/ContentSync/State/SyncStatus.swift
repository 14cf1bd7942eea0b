import FileKit
import StorageFormat
import Foundation

/// What the state database says about a synced folder, read without touching the network.
public struct SyncStatus: Sendable, Equatable, Codable {
    /// The synced version, or nil before the first successful update.
    public var version: String?
    /// The state the last run ended in (`unknown` when the folder was never synced).
    public var state: String
    /// The readable error of the last failed run.
    public var lastError: String?
    /// The ``SyncError/Code`` name of ``lastError`` (`network`, `invalidStatus`, …), for scripts.
    public var lastErrorCode: String?
    /// When the storage was last asked for its status.
    public var lastCheck: Date?
    public var contentDirectory: String
    /// The storage URL the last sync used.
    public var baseURL: String?
    public var stateFile: String
    /// The version an interrupted update was heading for, if one is pending.
    public var pendingVersion: String?
    /// The most recent updates, newest first.
    public var history: [UpdateHistoryRecord]

    /// Reads the status of `contentDirectory` from `statePath`. A missing database is not an
    /// error: it means the folder was never synced, and nothing is created.
    public static func read(statePath: String, contentDirectory: String, historyLimit: Int = 5) async throws(SyncError) -> SyncStatus {
        guard FileManager.default.fileExists(atPath: statePath) else {
            return SyncStatus(version: nil, state: "unknown", lastError: nil, lastErrorCode: nil, lastCheck: nil,
                              contentDirectory: contentDirectory, baseURL: nil,
                              stateFile: statePath, pendingVersion: nil, history: [])
        }
        let store = try StateStore(path: statePath)
        let record = try await store.syncState()
        let pending = try await store.pendingPlan()
        return SyncStatus(version: record?.localVersion, state: record?.state ?? "unknown", lastError: record?.lastError,
                          lastErrorCode: record?.lastErrorCode,
                          lastCheck: record?.lastCheck, contentDirectory: record?.contentDirectory ?? contentDirectory,
                          baseURL: record?.baseURL,
                          stateFile: statePath, pendingVersion: pending?.toVersion,
                          history: try await store.history(limit: historyLimit))
    }
}
