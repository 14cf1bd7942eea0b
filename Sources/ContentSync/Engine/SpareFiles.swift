import CLinux
import FileKit
import Foundation
import Synchronization

/// Files a twin's catch-up takes out of the tree and keeps, in `partial/`, for its small
/// downloads to be written over (``DownloadDestination/recycled(descriptor:spare:target:)``).
///
/// A catch-up removes the twin's stale files and downloads about as many new ones. Freeing a
/// file and allocating another costs the filesystem an inode and its blocks each way, and on a
/// disk mounted with `discard` each free waits for the disk (on ext4 without a journal, 100 files
/// of 512 bytes: 13–27 ms, with stalls to 600 ms, against 4–9 ms written over spares). A spare
/// is only ever a file outside every tree: it gets a name in `next/` by a rename once its new
/// bytes are verified, and one left over (unused, or killed part-way) goes with `partial/`.
/// It is written over only when nothing else has it open
/// (``DownloadDestination/openRecycled(_:for:)``): a reader of an old version keeps its bytes.
final class SpareFiles: Sendable {
    private struct Kept {
        var count = 0
        var ready: [String] = []
    }

    private let folder: String
    private let limit: Int
    private let kept = Mutex(Kept())

    /// Spares kept in `folder` (the staging area's `partial/`), at most `limit` of them.
    init(in folder: String, limit: Int) {
        self.folder = folder
        self.limit = limit
    }

    /// Takes `path` out of the tree: a file that ``canRecycle(_:)`` is moved to a spare while
    /// fewer than the limit are kept; anything else is removed (a folder with all it holds).
    func remove(_ path: String) throws(FileSystemError) {
        if let spare = keep(path) {
            kept.withLock { $0.ready.append(spare) }
        } else {
            try FileSystem.removeTree(path)
        }
    }

    /// A spare for one download, if any is left; each is handed out once.
    func take() -> String? {
        kept.withLock { $0.ready.popLast() }
    }

    /// The process's effective user, read once (it does not change while files are staged).
    private static let user = geteuid()

    /// Whether a file with status `info` (by `lstat` or `fstat`) may be written over as a
    /// download: a regular file of this user's, one link (nothing else sees its bytes change),
    /// at most 1 MiB, and no execute or special mode bits (a fresh download has none).
    static func canRecycle(_ info: stat) -> Bool {
        info.st_mode & S_IFMT == S_IFREG && info.st_nlink == 1 && info.st_uid == user
            && info.st_mode & 0o7111 == 0 && Int64(info.st_size) <= VerifiedDownloader.unnamedDownloadLimit
    }

    /// Moves the file at `path` to a new spare name and returns it; nil when it is not to be
    /// kept (over the limit, not a recyclable file, or the move failed: then it is removed).
    private func keep(_ path: String) -> String? {
        guard limit > 0, let info = FileSystem.status(of: path), Self.canRecycle(info) else { return nil }
        // A name a run killed part-way may have left is skipped, never replaced.
        for _ in 0..<4 {
            let number: Int? = kept.withLock { kept in
                guard kept.ready.count < limit else { return nil }
                kept.count += 1
                return kept.count
            }
            guard let number else { return nil }
            let spare = folder + "/spare.\(number)"
            do {
                try LongPath.at(path) { (from, rest) throws(FileSystemError) in
                    if clinux_rename_noreplace(from, rest, AT_FDCWD, spare) != 0 {
                        throw FileSystemError(
                            "cannot keep a spare at", path: spare, syscall: "renameat2", errno: clinux_errno())
                    }
                }
                return spare
            } catch {
                if error.errno != EEXIST { return nil }
            }
        }
        return nil
    }
}
