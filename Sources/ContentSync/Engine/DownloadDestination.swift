import CLinux
import FileKit
import Foundation
import StorageFormat
import Synchronization

/// Where one verified download is written.
enum DownloadDestination {
    /// A named file in `partial/`: it survives a restart and resumes with `If-Range` (bodies
    /// over 1 MiB, the archive, and any file whose size the storage does not declare).
    case partial(String)
    /// An unnamed `O_TMPFILE` file in the folder it belongs to, linked to its name once verified
    /// (declared sizes up to 1 MiB). No shared folder to contend for, no rename across folders,
    /// and nothing left behind if the process dies: the inode goes with its descriptor.
    case unnamed(descriptor: Int32, target: String)
    /// A spare file (a file of the twin's that the catch-up took out of the tree, see
    /// ``SpareFiles``) written over in place and renamed to its name once verified (declared
    /// sizes up to 1 MiB): its inode and blocks are reused, none freed or allocated. Killed
    /// part-way, it stays a spare in `partial/`, which is never part of a tree.
    case recycled(descriptor: Int32, spare: String, target: String)

    /// Size and identity of what was written so far.
    var identity: FileIdentity? {
        switch self {
        case .partial(let path):
            return FileIdentity(path: path)
        case .unnamed(let descriptor, _), .recycled(let descriptor, _, _):
            var info = stat()
            guard fstat(descriptor, &info) == 0 else { return nil }
            return FileIdentity(info)
        }
    }

    /// Opens an unnamed file in `folder`, or nil where the filesystem has no `O_TMPFILE` (the
    /// caller then uses a named partial file).
    static func openUnnamed(in folder: String, for target: String) -> DownloadDestination? {
        guard
            // `folder/.`: below a held folder, `folder` itself is then opened without following a link.
            let descriptor = try? LongPath.at(
                folder + "/.", { parent, rest throws(FileSystemError) in clinux_openat_tmpfile(parent, rest, 0o644) }),
            descriptor >= 0
        else { return nil }
        return .unnamed(descriptor: descriptor, target: target)
    }

    /// Opens an unnamed file in the open folder `folder` (a ``FolderHandles`` descriptor) for
    /// `target`, its path; nil where that fails (the caller then uses the path).
    static func openUnnamed(inFolder folder: Int32, for target: String) -> DownloadDestination? {
        let descriptor = clinux_openat_tmpfile(folder, ".", 0o644)
        guard descriptor >= 0 else { return nil }
        return .unnamed(descriptor: descriptor, target: target)
    }

    /// Whether unnamed files made in `folder` can be given names there: `O_TMPFILE` works and so
    /// does `linkat` (through /proc, or `AT_EMPTY_PATH`, which old kernels allow only with
    /// `CAP_DAC_READ_SEARCH`). Probed once per update, with a throwaway file named for this
    /// probe alone (two updates' probes at once must not take each other's file); where it fails,
    /// every download uses a named partial file instead.
    static func namingWorks(in folder: String) -> Bool {
        let probe = folder + "/unnamed-file-probe.\(getpid()).\(probes.add(1, ordering: .relaxed).oldValue)"
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

    /// Probes made by this process, to name each one's file.
    private static let probes = Atomic<Int>(0)

    /// Opens the spare file `spare` to be written over for `target`, or nil when it is not a
    /// plain file of this user's with one link and no execute or special mode bits, or when
    /// anything else has it open (a reader that opened it while its tree was the content
    /// folder, or maps it: writing over it would change the bytes under that reader). Then
    /// nothing else may see its bytes change, and the file is as a fresh download's would be.
    static func openRecycled(_ spare: String, for target: String) -> DownloadDestination? {
        let descriptor = open(spare, O_RDWR | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        var info = stat()
        guard fstat(descriptor, &info) == 0, SpareFiles.canRecycle(info), clinux_sole_opener(descriptor) == 1 else {
            _ = Glibc.close(descriptor)
            return nil
        }
        return .recycled(descriptor: descriptor, spare: spare, target: target)
    }

    /// Gives an unnamed or recycled file its name in the staged tree. A file present there is a
    /// finished, verified download, exactly as after the rename of a partial file.
    func link() throws(SyncError) {
        if case .recycled(_, let spare, let target) = self {
            return try fileWork { () throws(FileSystemError) in
                try LongPath.at(spare) { spareFolder, spareRest throws(FileSystemError) in
                    try LongPath.at(target) { folder, rest throws(FileSystemError) in
                        if clinux_rename_noreplace(spareFolder, spareRest, folder, rest) != 0 {
                            throw FileSystemError(
                                "cannot name the downloaded file", path: target, syscall: "renameat2",
                                errno: clinux_errno())
                        }
                    }
                }
            }
        }
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

    /// ``link()`` of an unnamed file as `name` in the open folder `folder` (where
    /// ``openUnnamed(inFolder:for:)`` made it): no path is walked again.
    func link(in folder: Int32, name: String) throws(SyncError) {
        guard case .unnamed(let descriptor, let target) = self else { return try link() }
        if clinux_linkat_fd(descriptor, folder, name) != 0 {
            throw SyncError.wrap(
                FileSystemError(
                    "cannot name the downloaded file", path: target, syscall: "linkat", errno: clinux_errno()))
        }
    }

    /// Names this unnamed file `name` in `folder` (``link(in:name:)``) when the bytes `digest`
    /// saw are exactly `fingerprint` (its size and SHA-256) and the file holds that many, and
    /// records the fingerprint for the file's inode, as a verified download is; false, naming
    /// nothing, otherwise. For files taken from the archive, whole or as they stream in.
    func nameIfVerified(
        _ fingerprint: FileFingerprint, digest: StreamingDigest, in folder: Int32, name: String,
        recordingIn fingerprints: FingerprintCache
    ) -> Bool {
        guard let sha256 = digest.sha256(ofFileWithSize: fingerprint.size, resumedFrom: 0),
            FileFingerprint(size: fingerprint.size, sha256: sha256) == fingerprint,
            let identity, identity.size == fingerprint.size
        else { return false }
        fingerprints.insert(fingerprint, for: identity)
        do { try link(in: folder, name: name) } catch { return false }
        return true
    }

    /// Deletes a refused partial file. A refused unnamed file needs nothing: it vanishes when
    /// its owner calls ``close()`` without having linked it; a refused recycled one stays a
    /// spare in `partial/`, cleared with the staging area's leftovers.
    func discard() {
        if case .partial(let path) = self {
            unlink(path)
            unlink(path + ".etag")
        }
    }

    /// Closes an unnamed or recycled file's descriptor, named or not; a partial file has none open.
    func close() {
        switch self {
        case .unnamed(let descriptor, _), .recycled(let descriptor, _, _): _ = Glibc.close(descriptor)
        case .partial: break
        }
    }
}
