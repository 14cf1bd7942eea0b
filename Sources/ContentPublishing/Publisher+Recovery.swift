import FileKit
import Foundation
import StorageFormat

extension Publisher {
    /// Names an older `sync-agent` (before the work folder) wrote while publishing, relative to
    /// the storage. A run of it that was killed left them; nothing else uses these names.
    static let legacyLeftovers = [
        ".RXCacheContent.incoming", ".RXCacheContent.retired", "RXCacheContent.zip.tmp",
        StorageLayout.statusPath + ".tmp", StorageLayout.updateListPath + ".tmp",
        StorageWriter.contentManifestPath + ".tmp",
    ]

    /// Finishes or undoes an interrupted publish (run with the lock held, before anything else):
    /// - no journal, or one that never reached the install → nothing is visible: delete the work folder;
    /// - the visible status is not the staged one → roll every step back, then delete the work folder;
    /// - the visible status is the staged one → committed: delete the work folder.
    /// Then deletes what an older `sync-agent`'s interrupted publish left (``legacyLeftovers``).
    static func recover(_ paths: PublishPaths, run: PublishRun) throws(PublishError) -> (PublishRecovery?, [String]) {
        var work = PublishWorkFolder(storage: paths.storage)
        var recovery: PublishRecovery?
        if work.exists {
            // Held: the journal is read, and everything deleted, in the folder opened here.
            try work.hold()
            do throws(PublishError) {
                recovery = try recover(work, paths: paths, run: run)
            } catch {
                throw work.shown(error)
            }
        }
        return (recovery, try removeLegacyLeftovers(paths, run: run))
    }

    /// Deletes what an older publisher's interrupted run left (``legacyLeftovers``, and
    /// `changes_*.json.tmp` in the history), each through its folder held open without following
    /// a link (``HeldFolder``): `RXCacheConfig/` swapped for a link to an outside folder had that
    /// folder's `*.json.tmp` files deleted (an outside audit). Returns what was deleted.
    private static func removeLegacyLeftovers(_ paths: PublishPaths, run: PublishRun) throws(PublishError) -> [String] {
        // Not a folder of its own (a link, a file), or gone: nothing of ours to clean there.
        let config = (try? HeldFolder(opening: "RXCacheConfig", in: paths.storage)) ?? nil
        let history = config.flatMap { (try? HeldFolder(opening: "HistoryOfVersions", in: $0.path)) ?? nil }
        var candidates: [(relative: String, path: String, folder: HeldFolder?)] = []
        for relative in legacyLeftovers {
            if relative.hasPrefix("RXCacheConfig/") {
                guard let config else { continue }
                candidates.append((relative, config.path + "/" + relative.dropFirst("RXCacheConfig/".count), config))
            } else {
                candidates.append((relative, paths.storage + "/" + relative, nil))
            }
        }
        if let history {
            for name in try fileWork({ () throws(FileSystemError) in try DirectoryWalker.names(in: history.path) })
                .sorted() where name.hasPrefix("changes_") && name.hasSuffix(".json.tmp")
            {
                candidates.append(("RXCacheConfig/HistoryOfVersions/" + name, history.path + "/" + name, history))
            }
        }
        var removed: [String] = []
        for candidate in candidates where FileSystem.exists(candidate.path) {
            try run.checkpoint(.recovery, "delete the leftover \(candidate.relative)")
            do {
                try TreeRemoval.remove(candidate.path)
            } catch {
                throw PublishError(candidate.folder.map { $0.shown(error) } ?? error)
            }
            removed.append(candidate.relative)
        }
        // The folders stay open until every path through them is used.
        withExtendedLifetime((config, history)) {}
        return removed
    }

    /// The interrupted publish whose work folder `work` holds, finished or undone.
    private static func recover(_ work: PublishWorkFolder, paths: PublishPaths, run: PublishRun)
        throws(PublishError) -> PublishRecovery
    {
        let journal = try work.readJournal()
        let visible = try PublishWorkFolder.sha256(of: paths.storage + "/" + StorageLayout.statusPath)
        let target = journal.flatMap { try? CacheVersion($0.toVersion) }
        let from = journal?.fromVersion.flatMap { try? CacheVersion($0) }
        switch PublishJournal.recovery(for: journal, visibleStatusSHA256: visible) {
        case .discard:
            try run.checkpoint(.recovery, "delete the work folder of a publish that installed nothing")
            try work.remove()
            return .discarded(version: target)
        case .rollBack:
            guard let journal, let target else { preconditionFailure("a rollback has a journal") }
            try PublishInstaller(work: work, journal: journal, run: run).rollBack()
            try run.checkpoint(.recovery, "delete the work folder of the rolled-back publish")
            try work.remove()
            return .rolledBack(version: target, restored: from)
        case .finish:
            guard let target else { preconditionFailure("a committed publish has a journal") }
            try run.checkpoint(.recovery, "delete the work folder of the committed publish")
            try work.remove()
            return .finished(version: target, from: from)
        }
    }

    /// A dry run writes nothing, so it cannot roll back: it refuses when an interrupted publish
    /// left new files beside the old status (the storage is then neither version). Leftovers of
    /// a publish that installed nothing, or that committed, change nothing a dry run reads.
    static func refuseDryRunOverInterruptedPublish(_ paths: PublishPaths) throws(PublishError) {
        var work = PublishWorkFolder(storage: paths.storage)
        guard work.exists else { return }
        // Read in the folder held, as recovery reads it (a link or another user's folder: refused).
        try work.hold()
        guard let journal = try work.readJournal() else { return }
        let visible = try PublishWorkFolder.sha256(of: paths.storage + "/" + StorageLayout.statusPath)
        if PublishJournal.recovery(for: journal, visibleStatusSHA256: visible) == .rollBack {
            throw PublishError(
                code: .configuration,
                message:
                    "a publish of \(journal.toVersion) into \(paths.storage) was interrupted while installing (\(work.shownJournalPath)); a dry run writes nothing, so it cannot roll it back: run the publish for real, which rolls it back first",
                option: .dryRun)
        }
    }
}
