import Archive
import Crypto
import Foundation

extension ContentTree {
    /// Reads a folder and hashes every file (blocking). Refuses what a storage cannot carry:
    /// symlinks and special files, and names that break the path rules.
    public static func scan(_ directory: String) throws(SyncError) -> ContentTree {
        try scan(directory, cache: nil)
    }

    /// ``scan(_:)``, taking the fingerprints of files whose identity `cache` knows.
    static func scan(_ directory: String, cache: FingerprintCache?) throws(SyncError) -> ContentTree {
        var tree = ContentTree(folders: [], files: [:])
        try DirectoryWalker.walk(directory) { entry throws(SyncError) in
            switch entry {
            case .folder(let path), .file(let path, _):
                // Swift compares names by canonical equivalence: "é" (U+00E9) and "e" + U+0301
                // are one key, though Linux keeps two files. Refuse rather than drop one.
                if tree.folders.contains(path) || tree.files[path] != nil {
                    throw SyncError(code: .unsafePath,
                                    message: "\(path.absolute(in: directory)) has a sibling whose name differs only in Unicode normalization (for example precomposed 'é' and 'e' + combining accent); a storage cannot carry both: rename one")
                }
            default:
                break
            }
            switch entry {
            case .folder(let path):
                tree.folders.insert(path)
            case .file(let path, let identity):
                let absolute = path.absolute(in: directory)
                if let cache {
                    tree.files[path] = try cache.fingerprint(of: absolute, identity: identity)
                } else {
                    tree.files[path] = try fingerprint(of: absolute)
                }
            case .special(let path):
                throw SyncError(code: .unsafePath,
                                message: "\(path.absolute(in: directory)) is a symlink or special file; a storage carries regular files and folders only: replace it with a copy or remove it")
            case .unsafeName(let name, let folder, let error):
                throw SyncError(code: .unsafePath, message: "\(folder.absolute(in: directory))/\(name): \(error); rename it", underlying: error)
            }
        }
        return tree
    }

    /// Size and SHA-256 of one file, read in 1 MiB chunks.
    public static func fingerprint(of path: String) throws(SyncError) -> FileFingerprint {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SyncError.fileSystem("cannot open", path: path, errno: errno) }
        defer { close(fd) }
        return try fingerprint(ofDescriptor: fd, shownAs: path)
    }

    /// Size and SHA-256 of the open file `descriptor`, from its first byte (`pread`, so the
    /// descriptor's offset and access mode do not matter as long as it can be read).
    static func fingerprint(ofDescriptor descriptor: Int32, shownAs path: String) throws(SyncError) -> FileFingerprint {
        var hasher = SHA256()
        var size: Int64 = 0
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let count = pread(descriptor, buffer.baseAddress, buffer.count, off_t(size))
            if count < 0 {
                if errno == EINTR { continue }
                throw SyncError.fileSystem("cannot read", path: path, errno: errno)
            }
            if count == 0 { break }
            hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            size += Int64(count)
        }
        let digest = HexDigest.string(hasher.finalize())
        return FileFingerprint(size: size, sha256: digest)
    }
}
