import FileKit
import Foundation
import StorageFormat

/// What `sync-agent publish` is asked to do.
public struct PublishOptions: Sendable {
    /// The storage folder (holding, or to hold, `RXCacheConfig/` and `RXCacheContent/`).
    public var storage: String
    /// The folder with the new version's content.
    public var content: String
    /// The new version; it must be above the storage's current one.
    public var version: CacheVersion
    /// The new `minimalCacheVersion`. Default: unchanged (the new version for `--init`).
    public var minimal: CacheVersion?
    /// Where the storage is published, e.g. `https://raw.githubusercontent.com/OWNER/REPO/main/`:
    /// the absolute URLs in its files start with it.
    public var baseURL: URL
    /// Plan and report, write nothing.
    public var dryRun = false
    /// Create the storage from `content` at its first version.
    public var initialize = false
    /// Sign `cacheStatus.json` with this ed25519 private key (base64 of its 32 raw bytes).
    /// Default: unsigned.
    public var signingKey: String?
    /// How long the signature stays valid; clients refuse an expired status. Default 30 days.
    /// Not checked here (tests publish expired statuses on purpose); `sync-agent publish`
    /// refuses a lifetime that is not positive.
    public var signatureLifetime: Duration = .seconds(30 * 86_400)
    /// Copies the storage to where clients read it once it holds the new version (also when it
    /// already did: a re-run uploads what an interrupted upload left out), step by step in
    /// ``StorageUploadStep/order``, under the publish's lock. Not called for a dry run.
    /// Default: none.
    public var uploader: (any StorageUploading)?
    /// Tests only: called before every change the publish makes on disk; may stop it there as a
    /// kill or an I/O failure would. Default: none.
    var checkpoint: (@Sendable (PublishCheckpoint) -> PublishCheckpoint.Decision)?
    /// Tests only: swap the content folder as on a filesystem without `RENAME_EXCHANGE`.
    var exchangeUnsupported = false

    /// Options to publish `content` into `storage` as `version`, served at `baseURL`; every other
    /// field keeps its default.
    public init(storage: String, content: String, version: CacheVersion, minimal: CacheVersion? = nil, baseURL: URL) {
        self.storage = storage
        self.content = content
        self.version = version
        self.minimal = minimal
        self.baseURL = baseURL
    }
}

extension PublishOptions {
    /// One of the options, for errors that blame it (``PublishError/option``).
    public enum Option: String, Sendable, Equatable {
        /// ``PublishOptions/storage``.
        case storage
        /// ``PublishOptions/content``.
        case content
        /// ``PublishOptions/version``.
        case version
        /// ``PublishOptions/minimal``.
        case minimal
        /// ``PublishOptions/baseURL``.
        case baseURL
        /// ``PublishOptions/initialize``.
        case initialize
        /// ``PublishOptions/dryRun``.
        case dryRun
        /// ``PublishOptions/signingKey``.
        case signingKey
    }
}

/// How long one step of a publish took (`sync-agent publish --verbose` prints them).
public struct PublishPhaseTiming: Sendable, Equatable {
    /// What the step did, e.g. "check the published tree".
    public var name: String
    /// Its wall-clock duration.
    public var seconds: Double

    /// A step's timing.
    public init(name: String, seconds: Double) {
        self.name = name
        self.seconds = seconds
    }
}

/// What a publish did (or, for a dry run, would do).
public struct PublishReport: Sendable {
    /// The steps of the publish with their durations, in order (recovery and upload not included).
    public var phases: [PublishPhaseTiming] = []
    /// The version the storage published before; nil for `--init`, and when ``alreadyPublished``.
    public var fromVersion: CacheVersion?
    /// The version published.
    public var toVersion: CacheVersion
    /// The `minimalCacheVersion` the storage has now.
    public var minimalVersion: CacheVersion
    /// The entries of the change list, in order; empty for `--init`.
    public var changes: [Change.Kind]
    /// Bytes a client one version behind downloads: added and edited files.
    public var bytesToDownload: Int64
    /// Files in the new version's content.
    public var files: Int
    /// Folders in the new version's content, the content folder itself not counted.
    public var folders: Int
    /// Bytes of all files in the new version's content.
    public var contentBytes: Int64
    /// The archive's size; 0 for a dry run.
    public var archiveBytes: Int64
    /// The change list written, relative to the storage; nil for `--init`.
    public var changeListPath: String?
    /// Archive entries copied still deflated from the previous version's archive.
    public var reusedArchiveEntries = 0
    /// Content files hard-linked from the previous version instead of copied from `--content`
    /// (unchanged since the publish that copied them); 0 for `--init` and a dry run.
    public var linkedContentFiles = 0
    /// Of those, the ones the previous publish's retired version already held (nothing written).
    public var keptContentFiles = 0
    /// Files of the previous version taken from the last publish's index instead of hashed
    /// (recorded there, and unchanged since: same stamp).
    public var indexedContentFiles = 0
    /// What this publish did first about an interrupted one; nil when there was none.
    public var recovery: PublishRecovery?
    /// Files an older `sync-agent`'s interrupted publish left in the storage, deleted first
    /// (relative to the storage).
    public var removedLeftovers: [String] = []
    /// The storage already published this version with this content (an earlier run, perhaps
    /// one that recovery just completed): nothing was written.
    public var alreadyPublished = false
    /// The expiry of the signature written on an ``alreadyPublished`` version's status: with a
    /// signing key, publishing the same version again re-signs its status (a new expiry, or a
    /// signature for an unsigned one; nothing else changes). nil otherwise; set by a dry run
    /// too, which writes nothing.
    public var resignedUntil: Date?
    /// The key id of the signature on the previous status, when it had one (`"unknown"` when the
    /// signature names none); nil when it was unsigned, for `--init` and when ``alreadyPublished``.
    /// Compared with ``signatureKeyID``, it tells a front end that clients trusting the old key
    /// will refuse this version.
    public var previousSignatureKeyID: String?
    /// Whether this publish's signing key verified the previous status's signature before its
    /// integrity block (the hashes of the change lists and update list) was trusted. False when
    /// a signed publish goes over a status that is unsigned, another key's, or altered so that
    /// it names no signature of this key: those lists were taken as they are (the first signed
    /// publish, a key change, or someone who may write the storage changed them).
    public var previousStatusVerified = false
    /// The key id this publish signed the status with; nil when unsigned.
    public var signatureKeyID: String?
    /// URLs of the previous status (update list, archive) that lie outside the new base URL,
    /// when that status's base could not be told from its URLs (a base it shows plainly is
    /// ``previousBaseURL``). Clients fetch this version's files under the new base instead.
    public var previousURLsOutsideBase: [URL] = []
    /// The base URL the previous status was published under, when it is not
    /// ``PublishOptions/baseURL``: the storage moved (or the new base is mistyped). Clients
    /// configured with the old base see this version only if it serves this storage too. The
    /// change lists published under it name their paths there, so ``minimalVersion`` is at
    /// least ``fromVersion``. nil when the base stayed, for `--init`, and when ``alreadyPublished``.
    public var previousBaseURL: URL?
    /// The minimal version asked for (``PublishOptions/minimal``, else the previous status's),
    /// when the publish raised it to ``minimalVersion``: clients below that would replay change
    /// lists published under another base URL, whose paths they refuse, so they restore from
    /// the archive instead (protocol.md §8.5). nil when nothing was raised.
    public var requestedMinimalVersion: CacheVersion?
    /// ``PublishOptions/uploader`` copied every step to the remote.
    public var uploaded = false
}
