import CLinux
import FileKit
import Foundation
import StorageFormat

/// Where one verified download is written.
enum DownloadDestination {
    /// A named file in `partial/`: it survives a restart and resumes with `If-Range` (bodies
    /// over 1 MiB, the archive, and any file whose size the storage does not declare).
    case partial(String)
    /// An unnamed `O_TMPFILE` file in the folder it belongs to, linked to its name once verified
    /// (declared sizes up to 1 MiB). No shared folder to contend for, no rename across folders,
    /// and nothing left behind if the process dies: the inode goes with its descriptor.
    case unnamed(descriptor: Int32, target: String)

    /// Size and identity of what was written so far.
    var identity: FileIdentity? {
        switch self {
        case .partial(let path):
            return FileIdentity(path: path)
        case .unnamed(let descriptor, _):
            var info = stat()
            guard fstat(descriptor, &info) == 0 else { return nil }
            return FileIdentity(info)
        }
    }

    /// Opens an unnamed file in `folder`, or nil where the filesystem has no `O_TMPFILE` (the
    /// caller then uses a named partial file).
    static func openUnnamed(in folder: String, for target: String) -> DownloadDestination? {
        guard
            let descriptor = try? LongPath.at(
                folder, { parent, rest throws(FileSystemError) in clinux_openat_tmpfile(parent, rest, 0o644) }),
            descriptor >= 0
        else { return nil }
        return .unnamed(descriptor: descriptor, target: target)
    }

    /// Whether unnamed files made in `folder` can be given names there: `O_TMPFILE` works and so
    /// does `linkat` (through /proc, or `AT_EMPTY_PATH`, which old kernels allow only with
    /// `CAP_DAC_READ_SEARCH`). Probed once per update, with a throwaway file; where it fails,
    /// every download uses a named partial file instead.
    static func namingWorks(in folder: String) -> Bool {
        let probe = folder + "/unnamed-file-probe"
        unlink(probe)
        guard let unnamed = openUnnamed(in: folder, for: probe) else { return false }
        defer {
            unnamed.close()
            unlink(probe)
        }
        do {
            try unnamed.link()
            return true
        } catch {
            return false
        }
    }

    /// Gives an unnamed file its name in the staged tree. A file present there is a finished,
    /// verified download, exactly as after the rename of a partial file.
    func link() throws(SyncError) {
        guard case .unnamed(let descriptor, let target) = self else { return }
        try fileWork { () throws(FileSystemError) in
            try LongPath.at(target) { folder, rest throws(FileSystemError) in
                if clinux_linkat_fd(descriptor, folder, rest) != 0 {
                    throw FileSystemError(
                        "cannot name the downloaded file", path: target, syscall: "linkat", errno: clinux_errno())
                }
            }
        }
    }

    /// Deletes a refused partial file. A refused unnamed file needs nothing: it vanishes when
    /// its owner calls ``close()`` without having linked it.
    func discard() {
        if case .partial(let path) = self {
            unlink(path)
            unlink(path + ".etag")
        }
    }

    /// Closes an unnamed file's descriptor, linked or not; a partial file has none open.
    func close() {
        if case .unnamed(let descriptor, _) = self { _ = Glibc.close(descriptor) }
    }
}
