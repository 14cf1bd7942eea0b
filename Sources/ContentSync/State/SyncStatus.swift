import Foundation
import Transport

/// What the state database says about a synced folder, read without touching the network
/// (``read(statePath:contentDirectory:historyLimit:)``, ``CacheManager/status(historyLimit:)``,
/// `sync-agent status`).
public struct SyncStatus: Sendable, Equatable, Codable {
    /// An update (or verify, or reset) of the folder that is running right now.
    public struct RunningUpdate: Sendable, Equatable, Codable {
        /// The process that holds the folder's update lock.
        public var processID: Int32

        /// A running update held by `processID`.
        public init(processID: Int32) {
            self.processID = processID
        }
    }

    /// The synced version, or nil before the first successful update.
    public var version: String?
    /// ``CacheManagerState/working`` while an update runs (see ``runningUpdate``); otherwise the
    /// state the last attempt ended in (``CacheManagerState/unknown`` when the folder was never synced).
    public var state: CacheManagerState
    /// The update running right now, in this process or another; nil when none is.
    public var runningUpdate: RunningUpdate?
    /// The readable error of the last failed attempt; nil after a success. A URL in it shows no
    /// password or token.
    public var lastError: String?
    /// The code of ``lastError`` (`network`, `invalidStatus`, …), for scripts.
    public var lastErrorCode: SyncError.Code?
    /// When the storage last answered a status request. An attempt that got no answer (a
    /// network failure) leaves it: ``lastAttempt`` and ``consecutiveFailures`` tell those.
    public var lastCheck: Date?
    /// The newest attempt, whatever its outcome.
    public var lastAttempt: UpdateHistoryEntry?
    /// The newest attempt that succeeded or found the folder up to date.
    public var lastSuccess: UpdateHistoryEntry?
    /// Attempts that failed since the last success; cancelled attempts do not count.
    public var consecutiveFailures: Int
    /// The synced folder.
    public var contentDirectory: String
    /// The storage URL the last sync used, with its password or token redacted (`user:***@`,
    /// `***@`): to fetch from it again, give the URL with its secret.
    public var baseURL: String?
    /// The state database the status was read from.
    public var stateFile: String
    /// The version an interrupted update was heading for, if one is pending.
    public var pendingVersion: String?
    /// The most recent attempts, newest first.
    public var history: [UpdateHistoryEntry]
    /// The ids of the signing keys the folder was synced with: an update without them is refused
    /// until they are forgotten (``CacheManager/forgetTrustedKeys()``).
    public var trustedKeyIDs: [String] = []

    /// Reads the status of `contentDirectory` from `statePath`. A missing database is not an
    /// error: it means the folder was never synced, and nothing is created.
    public static func read(statePath: String, contentDirectory: String, historyLimit: Int = 5) async throws(SyncError)
        -> SyncStatus
    {
        let staging = StagingArea(contentDirectory: contentDirectory)
        let running = UpdateLockProbe.holder(statePath: statePath, stagingRoot: staging.location).map(
            RunningUpdate.init(processID:))
        guard FileManager.default.fileExists(atPath: statePath) else {
            return SyncStatus(
                version: nil, state: running == nil ? .unknown : .working, runningUpdate: running, lastError: nil,
                lastErrorCode: nil, lastCheck: nil, lastAttempt: nil, lastSuccess: nil, consecutiveFailures: 0,
                contentDirectory: contentDirectory, baseURL: nil, stateFile: statePath, pendingVersion: nil, history: []
            )
        }
        let store = try StateStore(path: statePath)
        // Another folder's database says nothing of this one (`status --check` once exited 0
        // for a folder never synced, reading another mirror's state); sync, verify and reset
        // refuse it the same way.
        if let owner = try await store.syncState()?.contentDirectory, owner != contentDirectory {
            throw SyncError(
                code: .configuration,
                message:
                    "the state database \(statePath) belongs to \(owner), not \(contentDirectory); use the state database of \(contentDirectory) (by default, the one its path names)"
            )
        }
        return try await read(store, contentDirectory: contentDirectory, running: running, historyLimit: historyLimit)
    }

    /// The status in `store`, with `running` as the update running now.
    static func read(_ store: StateStore, contentDirectory: String, running: RunningUpdate?, historyLimit: Int)
        async throws(SyncError) -> SyncStatus
    {
        let record = try await store.syncState()
        let pending = try await store.pendingPlan()
        let history = try await store.history(limit: max(historyLimit, 1))
        let stored = record.flatMap { CacheManagerState(rawValue: $0.state) } ?? .unknown
        // Redacted again on the way out: a row an older client wrote may still quote a password.
        return SyncStatus(
            version: record?.localVersion, state: running == nil ? stored : .working, runningUpdate: running,
            lastError: record?.lastError.map(Redaction.text),
            lastErrorCode: record?.lastErrorCode.flatMap(SyncError.Code.init(name:)),
            lastCheck: record?.lastCheck, lastAttempt: history.first?.entry,
            lastSuccess: try await store.lastSuccess()?.entry,
            consecutiveFailures: Int(record?.consecutiveFailures ?? 0),
            contentDirectory: record?.contentDirectory ?? contentDirectory,
            baseURL: record?.baseURL.map(Redaction.text),
            stateFile: store.path, pendingVersion: pending?.toVersion,
            history: Array(history.prefix(max(historyLimit, 0)).map(\.entry)),
            trustedKeyIDs: try await store.trustPins().keys.sorted())
    }
}
