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
            let entry = try anchored(folder)
            guard mkdirat(entry.folder, entry.name, 0o755) == 0 || errno == EEXIST, entry.isFolder else {
                throw PublishError.fileSystem(
                    "cannot create the storage's folder", path: work.destination(folder), syscall: "mkdirat",
                    errno: entry.isFolder ? errno : ENOTDIR)
            }
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
        let destination = try anchored(step.path)
        let staged = try anchored(PublishPaths.workFolderName + "/stage/" + step.path)
        if step.existed {
            let kept = try anchored(PublishPaths.workFolderName + "/kept/" + step.path)
            try run.checkpoint(.install, "keep the previous \(step.path)")
            if linkat(destination.folder, destination.name, kept.folder, kept.name, 0) != 0 {
                let code = errno
                guard code == EPERM || code == EXDEV || code == EMLINK || code == ENOTSUP else {
                    throw PublishError.fileSystem(
                        "cannot keep the previous \(step.path) as", path: kept.path, syscall: "link", errno: code)
                }
                // No hard links here: move it aside (readers miss the file for a moment).
                guard Self.rename(destination, kept) == 0 else {
                    throw PublishError.fileSystem(
                        "cannot keep the previous \(step.path) as", path: kept.path, syscall: "rename", errno: errno)
                }
            }
            try run.checkpoint(.install, "put \(step.path) in place")
            guard Self.rename(staged, destination) == 0 else {
                throw PublishError.fileSystem(
                    "cannot put the new \(step.path) in place at", path: destination.path, syscall: "rename",
                    errno: errno)
            }
        } else {
            try run.checkpoint(.install, "put \(step.path) in place")
            try Self.renameNoReplace(staged, destination)
        }
    }

    private func installFolder(_ step: PublishJournal.Step) throws(PublishError) {
        let destination = try anchored(step.path)
        let staged = try anchored(PublishPaths.workFolderName + "/stage/" + step.path)
        try run.checkpoint(.install, "swap in \(step.path)/")
        guard step.existed else {
            try Self.renameNoReplace(staged, destination)
            return
        }
        if !run.exchangeUnsupported
            && clinux_rename_exchange(staged.folder, staged.name, destination.folder, destination.name) == 0
        {
            return
        }
        let code = run.exchangeUnsupported ? EINVAL : clinux_errno()
        guard code == EINVAL || code == ENOSYS || code == EOPNOTSUPP else {
            throw PublishError.fileSystem(
                "cannot swap the new content into place at", path: destination.path, syscall: "renameat2", errno: code)
        }
        // Two renames: a moment without a content folder.
        let kept = try anchored(PublishPaths.workFolderName + "/kept/" + step.path)
        guard Self.rename(destination, kept) == 0 else {
            throw PublishError.fileSystem(
                "cannot move the previous content aside to", path: kept.path, syscall: "rename", errno: errno)
        }
        try run.checkpoint(.install, "move the new \(step.path)/ into place")
        guard Self.rename(staged, destination) == 0 else {
            throw PublishError.fileSystem(
                "cannot move the new content into place at", path: destination.path, syscall: "rename", errno: errno)
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
        for folder in journal.createdFolders.reversed() {
            guard let entry = try anchoredIfPresent(folder), entry.exists else { continue }
            try run.checkpoint(.recovery, "remove the created \(folder)/")
            // Only if empty: the publish created it, and put nothing else there.
            if unlinkat(entry.folder, entry.name, AT_REMOVEDIR) != 0 && errno != ENOENT && errno != ENOTEMPTY {
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
        let kept = try anchoredIfPresent(PublishPaths.workFolderName + "/kept/" + step.path)
        switch PublishJournal.undo(fileExisted: step.existed, keptExists: kept?.exists == true) {
        case .restoreKept:
            guard let kept else { return }
            let destination = try anchored(step.path)
            try run.checkpoint(.recovery, "put back the previous \(step.path)")
            guard Self.rename(kept, destination) == 0 else {
                throw PublishError.fileSystem(
                    "cannot put back the previous \(step.path) at", path: destination.path, syscall: "rename",
                    errno: errno)
            }
        case .remove:
            guard let destination = try anchoredIfPresent(step.path), destination.exists else { return }
            try run.checkpoint(.recovery, "remove the new \(step.path)")
            guard unlinkat(destination.folder, destination.name, 0) == 0 || errno == ENOENT else {
                throw PublishError.fileSystem(
                    "cannot remove the new \(step.path) at", path: destination.path, syscall: "unlink", errno: errno)
            }
        case .nothing:
            return
        }
    }

    private func undoFolder(_ step: PublishJournal.Step) throws(PublishError) {
        let destination = try anchored(step.path)
        let staged = try anchored(PublishPaths.workFolderName + "/stage/" + step.path)
        let kept = try anchored(PublishPaths.workFolderName + "/kept/" + step.path)
        let identity = destination.status.map {
            PublishJournal.Identity(device: Int64($0.st_dev), inode: Int64($0.st_ino))
        }
        let isStaged = identity == journal.content && journal.content != nil
        let decision = PublishJournal.undoFolder(
            destinationIsStaged: isStaged, stagedPathExists: staged.exists,
            keptExists: kept.exists, destinationExists: identity != nil)
        switch decision {
        case .exchangeBack:
            try run.checkpoint(.recovery, "swap the previous \(step.path)/ back")
            guard clinux_rename_exchange(staged.folder, staged.name, destination.folder, destination.name) == 0 else {
                throw PublishError.fileSystem(
                    "cannot swap the previous content back into", path: destination.path, syscall: "renameat2",
                    errno: clinux_errno())
            }
        case .moveOutAndRestoreKept, .moveOut:
            try run.checkpoint(.recovery, "move the new \(step.path)/ out")
            guard Self.rename(destination, staged) == 0 else {
                throw PublishError.fileSystem(
                    "cannot move the new content out of", path: destination.path, syscall: "rename", errno: errno)
            }
            if decision == .moveOutAndRestoreKept { try restoreKeptFolder(step, kept: kept, destination: destination) }
        case .restoreKept:
            try restoreKeptFolder(step, kept: kept, destination: destination)
        case .nothing:
            return
        }
    }

    private func restoreKeptFolder(_ step: PublishJournal.Step, kept: AnchoredEntry, destination: AnchoredEntry)
        throws(PublishError)
    {
        try run.checkpoint(.recovery, "put back the previous \(step.path)/")
        guard Self.rename(kept, destination) == 0 else {
            throw PublishError.fileSystem(
                "cannot put back the previous content at", path: destination.path, syscall: "rename", errno: errno)
        }
    }

    // MARK: - Primitives

    /// `relative` (a path under the storage) as its folder, opened from the storage one name at
    /// a time without following a link, and its last name. Every rename, link and removal of
    /// the install and the roll-back goes through one: a folder of the storage swapped for a
    /// link after the publish checked it (a neighbour's race) is refused, never written through,
    /// where a call by whole path followed it outside the storage (an outside audit).
    private func anchored(_ relative: String) throws(PublishError) -> AnchoredEntry {
        guard let entry = try anchoredIfPresent(relative) else {
            throw PublishError.fileSystem(
                "cannot open the folder of", path: storage + "/" + relative, syscall: "openat", errno: ENOENT)
        }
        return entry
    }

    /// ``anchored(_:)``, or nil when a folder on the way does not exist (a roll-back of what
    /// was never made). A path in the work folder starts from the held work folder, not from its
    /// name in the storage: what is installed is what this publish staged.
    private func anchoredIfPresent(_ relative: String) throws(PublishError) -> AnchoredEntry? {
        var names = relative.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        let name = names.removeLast()
        var beneath = storage
        if let held = work.held, names.first == PublishPaths.workFolderName {
            names.removeFirst()
            beneath = held.path
        }
        do {
            let folder = try FileSystem.openFolderChain(names, beneath: beneath)
            return AnchoredEntry(folder: folder, name: name, path: storage + "/" + relative)
        } catch {
            if error.errno == ENOENT, error.path != beneath { return nil }
            guard error.errno == ELOOP || error.errno == ENOTDIR else {
                throw PublishError.fileSystem(
                    "cannot open the folder", path: error.path, syscall: "openat", errno: error.errno)
            }
            throw PublishError(
                code: .invalidStorage,
                message:
                    "\(error.path) is no longer a folder (a symlink or a file was put there while publishing); a publish never writes through a link or outside the storage: put the folder back, then publish again (the next publish finishes or rolls back this one)"
            )
        }
    }

    private static func rename(_ source: AnchoredEntry, _ destination: AnchoredEntry) -> Int32 {
        renameat(source.folder, source.name, destination.folder, destination.name)
    }

    /// Renames, refusing to replace anything (where the filesystem can tell).
    private static func renameNoReplace(_ source: AnchoredEntry, _ destination: AnchoredEntry) throws(PublishError) {
        if clinux_rename_noreplace(source.folder, source.name, destination.folder, destination.name) == 0 { return }
        let code = clinux_errno()
        if code == EINVAL || code == ENOSYS || code == EOPNOTSUPP, rename(source, destination) == 0 { return }
        throw PublishError.fileSystem(
            "cannot move \(source.path) into place at", path: destination.path, syscall: "renameat2",
            errno: code == EINVAL || code == ENOSYS || code == EOPNOTSUPP ? errno : code)
    }
}

/// A name in a folder held open (``PublishInstaller``'s `anchored`), closed with it.
private final class AnchoredEntry {
    let folder: Int32
    let name: String
    /// The whole path, for messages.
    let path: String

    init(folder: Int32, name: String, path: String) {
        self.folder = folder
        self.name = name
        self.path = path
    }

    deinit { close(folder) }

    /// The entry's own `lstat`, or nil when there is none.
    var status: stat? {
        var info = stat()
        return fstatat(folder, name, &info, AT_SYMLINK_NOFOLLOW) == 0 ? info : nil
    }

    var exists: Bool { status != nil }

    var isFolder: Bool { status.map { $0.st_mode & S_IFMT == S_IFDIR } ?? false }
}
