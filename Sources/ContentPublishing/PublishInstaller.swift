import CLinux
import FileKit
import Foundation
import StorageFormat

/// Puts a staged publish in place, step by step in the journal's order, and undoes it.
///
/// Every step can be undone from what is on disk plus the journal, so a run killed anywhere,
/// in the install or in a rollback, is rolled back (or finished) by the next one:
/// - a file that replaces another first keeps the old one in `kept/` (a hard link, so the
///   destination never disappears), then is renamed over it;
/// - a new file is renamed into place with `RENAME_NOREPLACE`;
/// - the content folder is swapped with `renameat2(RENAME_EXCHANGE)`, which leaves the previous
///   content at the staged path; without it (some filesystems), two renames through `kept/`.
///
/// `cacheStatus.json` is the last step, and the commit point.
struct PublishInstaller {
    let work: PublishWorkFolder
    let journal: PublishJournal
    let run: PublishRun

    var storage: String { work.storage }

    // MARK: - Install

    func install() throws(PublishError) {
        for folder in journal.createdFolders {
            try run.checkpoint(.install, "create \(folder)/")
            try fileWork { () throws(FileSystemError) in try FileSystem.makeFolder(work.destination(folder)) }
        }
        for step in journal.steps {
            if step.isFolder {
                try installFolder(step)
            } else {
                try installFile(step)
            }
        }
        // The status rename is the commit; make the renames durable before the work folder goes.
        // A flush the disk refuses fails the publish (and rolls it back): a version is published
        // only when the disk said it holds it.
        try syncInstalledFolders()
    }

    private func installFile(_ step: PublishJournal.Step) throws(PublishError) {
        let destination = work.destination(step.path)
        let staged = work.staged(step.path)
        if step.existed {
            let kept = work.kept(step.path)
            try run.checkpoint(.install, "keep the previous \(step.path)")
            if link(destination, kept) != 0 {
                let code = errno
                guard code == EPERM || code == EXDEV || code == EMLINK || code == ENOTSUP else {
                    throw PublishError.fileSystem(
                        "cannot keep the previous \(step.path) as", path: kept, syscall: "link", errno: code)
                }
                // No hard links here: move it aside (readers miss the file for a moment).
                guard rename(destination, kept) == 0 else {
                    throw PublishError.fileSystem(
                        "cannot keep the previous \(step.path) as", path: kept, syscall: "rename", errno: errno)
                }
            }
            try run.checkpoint(.install, "put \(step.path) in place")
            guard rename(staged, destination) == 0 else {
                throw PublishError.fileSystem(
                    "cannot put the new \(step.path) in place at", path: destination, syscall: "rename", errno: errno)
            }
        } else {
            try run.checkpoint(.install, "put \(step.path) in place")
            try Self.renameNoReplace(staged, destination)
        }
    }

    private func installFolder(_ step: PublishJournal.Step) throws(PublishError) {
        let destination = work.destination(step.path)
        let staged = work.staged(step.path)
        try run.checkpoint(.install, "swap in \(step.path)/")
        guard step.existed else {
            try Self.renameNoReplace(staged, destination)
            return
        }
        if !run.exchangeUnsupported && clinux_rename_exchange(AT_FDCWD, staged, AT_FDCWD, destination) == 0 { return }
        let code = run.exchangeUnsupported ? EINVAL : clinux_errno()
        guard code == EINVAL || code == ENOSYS || code == EOPNOTSUPP else {
            throw PublishError.fileSystem(
                "cannot swap the new content into place at", path: destination, syscall: "renameat2", errno: code)
        }
        // Two renames: a moment without a content folder.
        let kept = work.kept(step.path)
        guard rename(destination, kept) == 0 else {
            throw PublishError.fileSystem(
                "cannot move the previous content aside to", path: kept, syscall: "rename", errno: errno)
        }
        try run.checkpoint(.install, "move the new \(step.path)/ into place")
        guard rename(staged, destination) == 0 else {
            throw PublishError.fileSystem(
                "cannot move the new content into place at", path: destination, syscall: "rename", errno: errno)
        }
    }

    // MARK: - Roll back

    /// Undoes every step in reverse order. Each undo is decided from the disk, so running this
    /// again after it was cut short is harmless.
    func rollBack() throws(PublishError) {
        for step in journal.steps.reversed() {
            if step.isFolder {
                try undoFolder(step)
            } else {
                try undoFile(step)
            }
        }
        for folder in journal.createdFolders.reversed() where FileSystem.exists(work.destination(folder)) {
            try run.checkpoint(.recovery, "remove the created \(folder)/")
            // Only if empty: the publish created it, and put nothing else there.
            if rmdir(work.destination(folder)) != 0 && errno != ENOENT && errno != ENOTEMPTY {
                throw PublishError.fileSystem(
                    "cannot remove the folder the publish created at", path: work.destination(folder), syscall: "rmdir",
                    errno: errno)
            }
        }
        try syncInstalledFolders()
    }

    /// fsyncs the folders whose entries an install or a roll-back renames.
    private func syncInstalledFolders() throws(PublishError) {
        for folder in ["RXCacheConfig/HistoryOfVersions", "RXCacheConfig", ""] {
            let path = folder.isEmpty ? storage : work.destination(folder)
            guard FileSystem.exists(path) else { continue }
            try fileWork { () throws(FileSystemError) in try DiskFlush.folder(path) }
        }
    }

    private func undoFile(_ step: PublishJournal.Step) throws(PublishError) {
        let destination = work.destination(step.path)
        let kept = work.kept(step.path)
        switch PublishJournal.undo(fileExisted: step.existed, keptExists: FileSystem.exists(kept)) {
        case .restoreKept:
            try run.checkpoint(.recovery, "put back the previous \(step.path)")
            guard rename(kept, destination) == 0 else {
                throw PublishError.fileSystem(
                    "cannot put back the previous \(step.path) at", path: destination, syscall: "rename", errno: errno)
            }
        case .remove:
            guard FileSystem.exists(destination) else { return }
            try run.checkpoint(.recovery, "remove the new \(step.path)")
            guard unlink(destination) == 0 || errno == ENOENT else {
                throw PublishError.fileSystem(
                    "cannot remove the new \(step.path) at", path: destination, syscall: "unlink", errno: errno)
            }
        case .nothing:
            return
        }
    }

    private func undoFolder(_ step: PublishJournal.Step) throws(PublishError) {
        let destination = work.destination(step.path)
        let staged = work.staged(step.path)
        let kept = work.kept(step.path)
        let identity = FileSystem.identity(of: destination)
        let isStaged =
            identity.map { PublishJournal.Identity(device: $0.device, inode: $0.inode) } == journal.content
            && journal.content != nil
        let decision = PublishJournal.undoFolder(
            destinationIsStaged: isStaged, stagedPathExists: FileSystem.exists(staged),
            keptExists: FileSystem.exists(kept), destinationExists: identity != nil)
        switch decision {
        case .exchangeBack:
            try run.checkpoint(.recovery, "swap the previous \(step.path)/ back")
            guard clinux_rename_exchange(AT_FDCWD, staged, AT_FDCWD, destination) == 0 else {
                throw PublishError.fileSystem(
                    "cannot swap the previous content back into", path: destination, syscall: "renameat2",
                    errno: clinux_errno())
            }
        case .moveOutAndRestoreKept, .moveOut:
            try run.checkpoint(.recovery, "move the new \(step.path)/ out")
            guard rename(destination, staged) == 0 else {
                throw PublishError.fileSystem(
                    "cannot move the new content out of", path: destination, syscall: "rename", errno: errno)
            }
            if decision == .moveOutAndRestoreKept { try restoreKeptFolder(step, kept: kept, destination: destination) }
        case .restoreKept:
            try restoreKeptFolder(step, kept: kept, destination: destination)
        case .nothing:
            return
        }
    }

    private func restoreKeptFolder(_ step: PublishJournal.Step, kept: String, destination: String) throws(PublishError)
    {
        try run.checkpoint(.recovery, "put back the previous \(step.path)/")
        guard rename(kept, destination) == 0 else {
            throw PublishError.fileSystem(
                "cannot put back the previous content at", path: destination, syscall: "rename", errno: errno)
        }
    }

    // MARK: - Primitives

    /// Renames, refusing to replace anything (where the filesystem can tell).
    static func renameNoReplace(_ source: String, _ destination: String) throws(PublishError) {
        if clinux_rename_noreplace(AT_FDCWD, source, AT_FDCWD, destination) == 0 { return }
        let code = clinux_errno()
        if code == EINVAL || code == ENOSYS || code == EOPNOTSUPP, rename(source, destination) == 0 { return }
        throw PublishError.fileSystem(
            "cannot move \(source) into place at", path: destination, syscall: "renameat2",
            errno: code == EINVAL || code == ENOSYS || code == EOPNOTSUPP ? errno : code)
    }
}
