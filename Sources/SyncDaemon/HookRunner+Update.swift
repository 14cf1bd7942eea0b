import ContentSync
import Foundation
import Logging
import StorageFormat

/// The two places hooks run in an update, and what they are told.
///
/// Every hook gets the agent's environment plus these variables (the operator guide's table):
///
/// | Variable | Value |
/// |---|---|
/// | `SYNC_AGENT_HOOK` | `pre-switch` or `post-update` |
/// | `SYNC_AGENT_STORAGE` | the storage's name in the config file |
/// | `SYNC_AGENT_DIR` | the content folder (before a first restore's switch it does not exist yet) |
/// | `SYNC_AGENT_STAGED_DIR` | `pre-switch` only: the staged tree, complete and checked, that becomes `SYNC_AGENT_DIR`; read it, never write to it (its unchanged files are hard links to the current content) |
/// | `SYNC_AGENT_OLD_VERSION` | the version the folder held before; empty for a first restore |
/// | `SYNC_AGENT_NEW_VERSION` | the version the update switches (or switched) to |
/// | `SYNC_AGENT_OUTCOME` | `replayed` (change lists) or `restored` (the archive); `repaired` for a `verify --repair` |
/// | `SYNC_AGENT_FILES_DOWNLOADED` | files downloaded by this run (for a restore: extracted from the archive) |
/// | `SYNC_AGENT_FILES_REUSED` | files carried over from the previous version |
/// | `SYNC_AGENT_BYTES_DOWNLOADED` | content bytes downloaded by this run |
/// | `SYNC_AGENT_CHANGE_LISTS` | change lists replayed (0 for a restore) |
///
/// A pre-switch hook runs in the staged tree, a post-update hook in the content folder.
/// Pre-switch hooks run in order and the first that fails vetoes the switch: a non-zero exit, a
/// signal, a timeout or a program that cannot start; the rest do not run. Post-update hooks
/// run in order after every update that changed the version; a failure is logged at error and
/// changes nothing (the update stands).
extension HookRunner {
    /// The environment variables' names (the table above says what each holds).
    public enum Variable {
        /// `SYNC_AGENT_HOOK`: `pre-switch` or `post-update`.
        public static let hook = "SYNC_AGENT_HOOK"
        /// `SYNC_AGENT_STORAGE`: the storage's name.
        public static let storage = "SYNC_AGENT_STORAGE"
        /// `SYNC_AGENT_DIR`: the content folder.
        public static let directory = "SYNC_AGENT_DIR"
        /// `SYNC_AGENT_STAGED_DIR`: the staged tree (pre-switch only).
        public static let stagedDirectory = "SYNC_AGENT_STAGED_DIR"
        /// `SYNC_AGENT_OLD_VERSION`: the version before; empty for a first restore.
        public static let oldVersion = "SYNC_AGENT_OLD_VERSION"
        /// `SYNC_AGENT_NEW_VERSION`: the version switched to.
        public static let newVersion = "SYNC_AGENT_NEW_VERSION"
        /// `SYNC_AGENT_OUTCOME`: `replayed`, `restored` or `repaired`.
        public static let outcome = "SYNC_AGENT_OUTCOME"
        /// `SYNC_AGENT_FILES_DOWNLOADED`: files downloaded (or extracted) by this run.
        public static let filesDownloaded = "SYNC_AGENT_FILES_DOWNLOADED"
        /// `SYNC_AGENT_FILES_REUSED`: files carried over from the previous version.
        public static let filesReused = "SYNC_AGENT_FILES_REUSED"
        /// `SYNC_AGENT_BYTES_DOWNLOADED`: content bytes downloaded by this run.
        public static let bytesDownloaded = "SYNC_AGENT_BYTES_DOWNLOADED"
        /// `SYNC_AGENT_CHANGE_LISTS`: change lists replayed.
        public static let changeLists = "SYNC_AGENT_CHANGE_LISTS"
    }

    /// A ``SyncConfiguration/beforeSwitch`` closure that runs `hooks` (a storage's pre-switch
    /// hooks) in the staged tree and throws a ``HookVeto`` when one fails. A cancelled update
    /// stops the running hook and throws `CancellationError`.
    public static func beforeSwitch(
        _ hooks: [Hook], storage: String, directory: String, logger: Logger,
        runner: HookRunner = HookRunner()
    ) -> @Sendable (PendingSwitch) async throws -> Void {
        var logger = logger
        logger[metadataKey: "storage"] = "\(storage)"
        return { [logger] pending in
            let environment = Self.environment(for: pending, storage: storage, directory: directory)
            for hook in hooks {
                let outcome = await runner.run(
                    hook, environment: environment, workingDirectory: pending.stagedDirectory, logger: logger)
                if outcome.termination == .cancelled { throw CancellationError() }
                guard outcome.succeeded else {
                    let veto = HookVeto(hook: hook.displayName, outcome: outcome)
                    logger.warning(
                        "\(veto); not switching to \(pending.toVersion)", metadata: ["hook": "\(hook.displayName)"])
                    throw veto
                }
                logger.info("pre-switch hook \(outcome)", metadata: ["hook": "\(hook.displayName)"])
            }
        }
    }

    /// Runs `hooks` (a storage's post-update hooks) in the content folder after `report`'s
    /// update, when it changed the version (an up-to-date check runs none). Failures are logged
    /// at error, never thrown: the update stands.
    public static func afterUpdate(
        _ hooks: [Hook], storage: String, directory: String, report: SyncReport, logger: Logger,
        runner: HookRunner = HookRunner()
    ) async {
        guard report.outcome != .upToDate else { return }
        var logger = logger
        logger[metadataKey: "storage"] = "\(storage)"
        let environment = Self.environment(for: report, storage: storage, directory: directory)
        for hook in hooks {
            let outcome = await runner.run(hook, environment: environment, workingDirectory: directory, logger: logger)
            let metadata: Logger.Metadata = ["hook": "\(hook.displayName)"]
            if outcome.succeeded {
                logger.info("post-update hook \(outcome)", metadata: metadata)
            } else if outcome.termination == .cancelled {
                logger.warning("post-update hook \(outcome); the rest do not run", metadata: metadata)
                return
            } else {
                logger.error(
                    "post-update hook '\(hook.displayName)' \(outcome)\(HookVeto.lastWords(outcome)); the update to \(report.toVersion) stands",
                    metadata: metadata)
            }
        }
    }

    /// What a pre-switch hook is told.
    static func environment(for pending: PendingSwitch, storage: String, directory: String) -> [String: String] {
        let outcome =
            switch pending.kind {
            case .replay: SyncReport.Outcome.replayed.rawValue
            case .restore: SyncReport.Outcome.restored.rawValue
            case .repair: "repaired"
            }
        return [
            Variable.hook: "pre-switch", Variable.storage: storage, Variable.directory: directory,
            Variable.stagedDirectory: pending.stagedDirectory,
            Variable.oldVersion: pending.fromVersion?.text ?? "", Variable.newVersion: pending.toVersion.text,
            Variable.outcome: outcome,
            Variable.filesDownloaded: "\(pending.filesDownloaded)", Variable.filesReused: "\(pending.filesReused)",
            Variable.bytesDownloaded: "\(pending.bytesDownloaded)",
            Variable.changeLists: "\(pending.changeListsApplied)",
        ]
    }

    /// What a post-update hook is told.
    static func environment(for report: SyncReport, storage: String, directory: String) -> [String: String] {
        [
            Variable.hook: "post-update", Variable.storage: storage, Variable.directory: directory,
            Variable.oldVersion: report.fromVersion?.text ?? "", Variable.newVersion: report.toVersion.text,
            Variable.outcome: report.outcome.rawValue,
            Variable.filesDownloaded: "\(report.filesDownloaded)", Variable.filesReused: "\(report.filesReused)",
            Variable.bytesDownloaded: "\(report.bytesDownloaded)", Variable.changeLists: "\(report.changeListsApplied)",
        ]
    }
}

/// A pre-switch hook refused the switch: what ``HookRunner/beforeSwitch(_:storage:directory:logger:runner:)``
/// throws, and what the update's ``SyncError`` (code ``SyncError/Code/vetoed``) quotes.
public struct HookVeto: Error, Sendable, CustomStringConvertible {
    /// The hook's name.
    public var hook: String
    /// How it ended.
    public var outcome: HookOutcome

    /// `pre-switch hook 'check' exited with status 3: config.yaml line 4: bad indentation`.
    public var description: String {
        "pre-switch hook '\(hook)' \(outcome)\(Self.lastWords(outcome))"
    }

    /// `: <its last output line>`, or nothing when it wrote none.
    static func lastWords(_ outcome: HookOutcome) -> String {
        guard let line = outcome.lastOutputLine else { return "" }
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        return ": " + (trimmed.count > 300 ? trimmed.prefix(300) + "…" : trimmed)
    }
}
