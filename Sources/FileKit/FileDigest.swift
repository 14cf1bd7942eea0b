import Crypto
import Foundation

/// SHA-256 of a file on disk, read in 1 MiB chunks: blocking, so call it on a
/// ``BlockingIOPool``.
public enum FileDigest {
    /// Size and SHA-256 (lower-case hex) of the regular file at `path`: a symlink there is not
    /// followed and a fifo not waited on, both refused (a planted one can lead nowhere).
    public static func sha256(ofFileAt path: String) throws(FileSystemError) -> (size: Int64, sha256: String) {
        // Never through a symlink at the end, and never waiting on a fifo: only a regular file is read.
        let fd = try LongPath.at(path) { folder, rest throws(FileSystemError) in
            openat(folder, rest, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        }
        guard fd >= 0 else { throw FileSystemError("cannot open", path: path, syscall: "openat", errno: errno) }
        defer { close(fd) }
        let info = try status(of: fd, shownAs: path)
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw FileSystemError("cannot hash (not a regular file)", path: path, syscall: "fstat", errno: EINVAL)
        }
        return try sha256(ofDescriptor: fd, shownAs: path)
    }

    /// Size and SHA-256 of the entry `name` of the open folder `folder`, which must still be the
    /// regular file `identity` names (device and inode) when it is opened: a walk hashes what it
    /// listed, never what was put in its place meanwhile. It is opened without following a symlink
    /// and without blocking (a fifo put there is refused, not waited on), and checked before a
    /// byte is read. Also returns its identity after the reading (a file written meanwhile has
    /// another one).
    public static func sha256(
        ofEntry name: String, in folder: Int32, expecting identity: FileIdentity, shownAs path: String
    ) throws(FileSystemError) -> (size: Int64, sha256: String, identity: FileIdentity) {
        let fd = openat(folder, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ELOOP || errno == ENOENT || errno == ENXIO { throw changed(path) }
            throw FileSystemError("cannot open", path: path, syscall: "openat", errno: errno)
        }
        defer { close(fd) }
        var info = try status(of: fd, shownAs: path)
        guard info.st_mode & S_IFMT == S_IFREG, UInt64(info.st_dev) == identity.device,
            UInt64(info.st_ino) == identity.inode
        else { throw changed(path) }
        let digest = try sha256(ofDescriptor: fd, shownAs: path)
        info = try status(of: fd, shownAs: path)
        return (digest.size, digest.sha256, FileIdentity(info))
    }

    private static func status(of fd: Int32, shownAs path: String) throws(FileSystemError) -> stat {
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw FileSystemError("cannot read the status of", path: path, syscall: "fstat", errno: errno)
        }
        return info
    }

    private static func changed(_ path: String) -> FileSystemError {
        FileSystemError(
            code: .changedUnderneath, operation: "a file was replaced while its folder was being read:", path: path,
            remedy: "make sure nothing else changes the folder meanwhile, and try again")
    }

    /// Size and SHA-256 of the open file `descriptor`, from its first byte (`pread`, so the
    /// descriptor's offset and access mode do not matter as long as it can be read).
    public static func sha256(ofDescriptor descriptor: Int32, shownAs path: String) throws(FileSystemError) -> (
        size: Int64, sha256: String
    ) {
        var hasher = SHA256()
        let size = try DescriptorIO.forEachChunk(of: descriptor, path: path) { chunk in
            hasher.update(bufferPointer: chunk)
            return true
        }
        return (size, HexDigest.string(hasher.finalize()))
    }

    /// SHA-256 of bytes in memory, as lower-case hex.
    public static func sha256(_ bytes: some DataProtocol) -> String {
        HexDigest.string(SHA256.hash(data: bytes))
    }
}
