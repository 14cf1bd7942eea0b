import FileKit
import Foundation
import StorageFormat

/// What a publish in progress has promised to do, written to its work folder so that the next
/// publish can finish or undo it after a kill.
///
/// The journal is written twice: in phase `staging` when the work folder is created (nothing
/// in the storage has changed yet), and in phase `installing`, with every install step, once
/// every new file is staged and flushed. From then until `cacheStatus.json` is renamed into
/// place the storage may hold some new files beside the old status; the staged status's
/// SHA-256 tells the next run whether that rename happened.
struct PublishJournal: Codable, Equatable, Sendable {
    enum Phase: String, Codable, Sendable {
        case staging, installing
    }

    /// One file or folder the install puts in place, in install order.
    struct Step: Codable, Equatable, Sendable {
        /// Relative to the storage, e.g. `RXCacheContent.zip`.
        var path: String
        /// Whether the storage had something at `path` when the publish staged. A step that
        /// replaces something keeps it in the work folder first, so it can be put back.
        var existed: Bool
        /// The content folder (swapped by `renameat2(RENAME_EXCHANGE)`), not a file.
        var isFolder = false
    }

    /// Device and inode of the staged content folder: the content folder has them once swapped.
    struct Identity: Codable, Equatable, Sendable {
        var device: Int64
        var inode: Int64
    }

    var format = 1
    var phase: Phase
    /// The process that wrote it (for diagnostics; the lock tells who holds the storage now).
    var pid: Int32
    /// The version the storage showed when the publish started; nil for `--init`.
    var fromVersion: String?
    var toVersion: String
    var minimalVersion: String
    /// The staged content's tree digest (installing only).
    var treeDigest: String?
    /// SHA-256 of the staged `cacheStatus.json`: the commit point (installing only).
    var statusSHA256: String?
    /// The staged content folder's identity (installing only).
    var content: Identity?
    /// Folders the install creates (`RXCacheConfig/`, its history folder), parents first.
    var createdFolders: [String] = []
    /// Install order: change list, update list, content manifest, archive, content, status.
    var steps: [Step] = []

    // MARK: - Decisions (no I/O)

    /// What is wrong with this journal's paths, or nil: a publish only ever installs its change
    /// list (`RXCacheConfig/HistoryOfVersions/changes_….json`), the update list, the content
    /// manifest, the archive, the content folder and the status, and creates only
    /// `RXCacheConfig/` and its history folder. The journal lies in the storage, where a
    /// neighbour may write it: a step it names elsewhere (`../victim`) once had recovery delete
    /// or replace files outside the storage (an outside audit).
    var pathProblem: String? {
        let files: Set<String> = [
            StorageLayout.updateListPath, StorageWriter.contentManifestPath, StorageWriter.archivePath,
            StorageLayout.statusPath,
        ]
        let history = "RXCacheConfig/HistoryOfVersions/"
        for step in steps {
            let name = step.path.hasPrefix(history) ? step.path.dropFirst(history.count) : ""
            let isChangeList =
                name.hasPrefix("changes_") && name.hasSuffix(".json") && !name.contains("/")
                && !name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
            let fits = step.isFolder ? step.path == "RXCacheContent" : files.contains(step.path) || isChangeList
            if !fits { return "a step names \(step.path.debugDescription), which no publish installs" }
        }
        if let folder = createdFolders.first(where: {
            !["RXCacheConfig", "RXCacheConfig/HistoryOfVersions"].contains($0)
        }) {
            return "it creates \(folder.debugDescription), which no publish creates"
        }
        return nil
    }

    /// What recovery does with an interrupted publish's work folder.
    enum Recovery: Equatable {
        /// Nothing of it is visible: delete the work folder.
        case discard
        /// Some new files may be in place but the status is not: undo every step.
        case rollBack
        /// The staged status is the visible one: the publish is done; delete the work folder.
        case finish
    }

    /// Decides from the journal (nil when the work folder has none) and the SHA-256 of the
    /// storage's visible `cacheStatus.json` (nil when there is none).
    static func recovery(for journal: PublishJournal?, visibleStatusSHA256: String?) -> Recovery {
        guard let journal, journal.phase == .installing, let staged = journal.statusSHA256 else { return .discard }
        return visibleStatusSHA256 == staged ? .finish : .rollBack
    }

    /// How to undo one file step.
    enum FileUndo: Equatable {
        /// Rename the kept copy back over the destination.
        case restoreKept
        /// The destination is new: delete it (missing is fine).
        case remove
        /// Nothing was replaced: a step keeps the old file before it replaces it.
        case nothing
    }

    static func undo(fileExisted: Bool, keptExists: Bool) -> FileUndo {
        if keptExists { return .restoreKept }
        return fileExisted ? .nothing : .remove
    }

    /// How to undo the content folder's swap.
    enum FolderUndo: Equatable {
        /// Swapped by `RENAME_EXCHANGE` (the old content sits at the staged path): swap back.
        case exchangeBack
        /// Moved by two renames (the old content was kept): move the new one out, the kept one back.
        case moveOutAndRestoreKept
        /// There was no content folder: move the new one out.
        case moveOut
        /// The fallback's two renames were cut between them: rename the kept one back.
        case restoreKept
        /// Not swapped.
        case nothing
    }

    /// Decides from what is on disk: whether the content folder has the staged identity, and
    /// whether something is at the staged path, at the kept path, and at the destination.
    static func undoFolder(
        destinationIsStaged: Bool, stagedPathExists: Bool, keptExists: Bool,
        destinationExists: Bool
    ) -> FolderUndo {
        if destinationIsStaged {
            if stagedPathExists { return .exchangeBack }
            return keptExists ? .moveOutAndRestoreKept : .moveOut
        }
        if !destinationExists && keptExists { return .restoreKept }
        return .nothing
    }
}
