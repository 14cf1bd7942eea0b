import Crypto
import Foundation

/// SHA-256 of a file on disk, read in 1 MiB chunks: blocking, so call it on a
/// ``BlockingIOPool``.
public enum FileDigest {
    /// Size and SHA-256 (lower-case hex) of the file at `path`.
    public static func sha256(ofFileAt path: String) throws(FileSystemError) -> (size: Int64, sha256: String) {
        let fd = try LongPath.at(path) { folder, rest throws(FileSystemError) in
            openat(folder, rest, O_RDONLY | O_CLOEXEC)
        }
        guard fd >= 0 else { throw FileSystemError("cannot open", path: path, syscall: "openat", errno: errno) }
        defer { close(fd) }
        return try sha256(ofDescriptor: fd, shownAs: path)
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
