import Foundation

/// One update attempt and how it ended: what ``CacheManager/history(limit:)`` and
/// ``SyncStatus/history`` list, newest first.
///
/// Every attempt is recorded, including checks that found the folder up to date and updates
/// that were cancelled or stopped by the connection policy. An attempt refused because another
/// update of the folder was running is not: that one records its own.
public struct UpdateHistoryEntry: Sendable, Equatable, Codable {
    /// What an attempt did, or was doing when it ended.
    public enum Kind: String, Sendable, Equatable, Codable, CaseIterable {
        /// Asked the storage for its status and stopped there: up to date, or it ended before
        /// it knew whether to replay or restore.
        case check
        /// Replayed change lists to reach the storage's version.
        case replay
        /// Restored the storage's version from its archive.
        case restore
        /// Repaired the folder to match the published tree digest (``CacheManager/verify(repair:)``).
        case repair
    }

    /// How an attempt ended.
    public enum Outcome: String, Sendable, Equatable, Codable, CaseIterable {
        /// The folder was switched to ``UpdateHistoryEntry/toVersion``.
        case succeeded
        /// The folder already held the storage's version; nothing changed.
        case upToDate
        /// The attempt failed; ``UpdateHistoryEntry/errorCode`` and ``UpdateHistoryEntry/message`` say why.
        /// The folder kept its last good version.
        case failed
        /// The attempt was suspended, reset, or stopped by the connection policy before it
        /// finished; finished downloads are kept for the next one.
        case cancelled

        /// Whether the folder is at the storage's version after an attempt that ended so.
        public var isSuccess: Bool { self == .succeeded || self == .upToDate }
    }

    /// When the attempt started.
    public var startedAt: Date
    /// When it ended.
    public var finishedAt: Date
    /// The version the folder held when the attempt started, if any.
    public var fromVersion: String?
    /// The version the attempt was heading for, once the storage's status was read.
    public var toVersion: String?
    /// What the attempt did.
    public var kind: Kind
    /// How it ended.
    public var outcome: Outcome
    /// Why a failed or cancelled attempt ended (``SyncError/Code/cancelled``,
    /// ``SyncError/Code/connectionNotAllowed``, ``SyncError/Code/network``, …).
    public var errorCode: SyncError.Code?
    /// The readable reason of a failed or cancelled attempt, or a note on a successful one.
    public var message: String?
    /// Body bytes downloaded for content.
    public var bytesDownloaded: Int64
    /// Files downloaded (for a repair: paths fixed).
    public var filesDownloaded: Int

    /// An entry with every field given.
    public init(
        startedAt: Date, finishedAt: Date, fromVersion: String?, toVersion: String?, kind: Kind, outcome: Outcome,
        errorCode: SyncError.Code? = nil, message: String? = nil, bytesDownloaded: Int64 = 0, filesDownloaded: Int = 0
    ) {
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.fromVersion = fromVersion
        self.toVersion = toVersion
        self.kind = kind
        self.outcome = outcome
        self.errorCode = errorCode
        self.message = message
        self.bytesDownloaded = bytesDownloaded
        self.filesDownloaded = filesDownloaded
    }
}
