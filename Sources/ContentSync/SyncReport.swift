import FileKit
import StorageFormat

/// What one update did.
public struct SyncReport: Sendable, Equatable {
    /// What the update did.
    public enum Outcome: String, Sendable, Equatable {
        /// The content already was at the storage's version.
        case upToDate
        /// Change lists were replayed.
        case replayed
        /// The content was restored from the archive.
        case restored
    }

    /// What the update did.
    public var outcome: Outcome
    /// The version the folder held before, if any.
    public var fromVersion: CacheVersion?
    /// The version the folder holds now.
    public var toVersion: CacheVersion
    /// Body bytes fetched over the network for content (archive or files), not counting JSON.
    public var bytesDownloaded: Int64
    /// Files downloaded (for a restore: files extracted from the archive).
    public var filesDownloaded: Int
    /// Files carried over from the previous version by hard link.
    public var filesReused: Int
    /// Downloads skipped because an interrupted run had already finished them.
    public var filesAlreadyDownloaded: Int
    /// Change lists replayed.
    public var changeListsApplied: Int
    /// Tolerated storage mistakes, each naming the change.
    public var warnings: [String]
    /// Paths fixed after the update because the tree did not match the published digest.
    public var repairedFiles = 0
    /// How long each phase took, in the order they ran (empty in a report made by hand).
    public var phases: [PhaseTiming] = []
    /// Whether the tree check before the switch read only the tree index and the changed paths
    /// (a caught-up twin), rather than the whole staged tree.
    var checkedIncrementally = false
    /// Whether the replay planned from the tree index, without listing the content folder
    /// (no full check was due and no folder had changed).
    var plannedFromIndex = false

    /// A report with every field given.
    public init(
        outcome: Outcome, fromVersion: CacheVersion?, toVersion: CacheVersion, bytesDownloaded: Int64 = 0,
        filesDownloaded: Int = 0, filesReused: Int = 0, filesAlreadyDownloaded: Int = 0,
        changeListsApplied: Int = 0, warnings: [String] = []
    ) {
        self.outcome = outcome
        self.fromVersion = fromVersion
        self.toVersion = toVersion
        self.bytesDownloaded = bytesDownloaded
        self.filesDownloaded = filesDownloaded
        self.filesReused = filesReused
        self.filesAlreadyDownloaded = filesAlreadyDownloaded
        self.changeListsApplied = changeListsApplied
        self.warnings = warnings
    }
}

/// How long one phase of an update took.
public struct PhaseTiming: Sendable, Equatable {
    /// The phases of an update, in the order they can run.
    public enum Phase: String, Sendable, Equatable, CaseIterable {
        /// Finishing a switch a crash interrupted (usually nothing to do).
        case recover
        /// Reading the state and checking the content folder against it.
        case localCheck = "local check"
        /// Fetching `cacheStatus.json`.
        case status
        /// Fetching the change lists and planning the net change (replay).
        case plan
        /// Building the next version: hard links of kept files and downloads (replay).
        case stage
        /// Downloading and extracting the archive (restore).
        case archive
        /// Checking the staged tree against the published tree digest, and repairing it.
        case treeCheck = "tree check"
        /// The pre-switch hook, the flush, the swap, the state written and the previous
        /// version deleted.
        case `switch`
        /// Clearing leftovers and recording a check that found the folder up to date.
        case upToDate = "up to date"
    }

    /// The phase.
    public var phase: Phase
    /// Its wall-clock time in seconds.
    public var seconds: Double

    /// A timing of `phase`: `seconds` of wall time.
    public init(phase: Phase, seconds: Double) {
        self.phase = phase
        self.seconds = seconds
    }

    /// `seconds` with three decimals (`0.012`).
    public static func format(_ seconds: Double) -> String { String(format: "%.3f", seconds) }
}
