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
        let local = try scanLocal(directory, cache: cache)
        guard let intruder = local.intruders.first else { return local.tree }
        let shown = directory + "/" + intruder.shownPath
        switch intruder.kind {
        case .symlink, .fifo, .socket, .device:
            throw SyncError(code: .unsafePath,
                            message: "\(shown) is a symlink or special file; a storage carries regular files and folders only: replace it with a copy or remove it")
        case .normalizationTwin:
            // Swift compares names by canonical equivalence: "é" (U+00E9) and "e" + U+0301
            // are one key, though Linux keeps two files. Refuse rather than drop one.
            throw SyncError(code: .unsafePath,
                            message: "\(shown) has a sibling whose name differs only in Unicode normalization (for example precomposed 'é' and 'e' + combining accent); a storage cannot carry both: rename one")
        case .undecodableName:
            throw SyncError(code: .unsafePath, message: "\(shown): the name is not UTF-8, and storages name files in UTF-8; rename it")
        case .unsafeName:
            throw SyncError(code: .unsafePath, message: "\(shown): \(intruder.detail ?? "the path rules refuse the name"); rename it")
        }
    }

    /// A local folder as it is: its content tree, and everything in it that content cannot be
    /// (``Intruder``s), instead of refusing the folder for them. This is how the client reads a
    /// mirror, where such entries are drift to report and remove.
    static func scanLocal(_ directory: String, cache: FingerprintCache? = nil) throws(SyncError) -> (tree: ContentTree, intruders: [Intruder]) {
        var tree = ContentTree(folders: [], files: [:])
        var intruders: [Intruder] = []
        try DirectoryWalker.walk(directory) { entry throws(SyncError) in
            switch entry {
            case .folder(let path), .file(let path, _):
                if tree.folders.contains(path) || tree.files[path] != nil {
                    intruders.append(Intruder(folder: path.parent, name: Array(path.lastComponent!.utf8), kind: .normalizationTwin))
                    return
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
            case .special(let path, let mode):
                intruders.append(Intruder(folder: path.parent, name: Array(path.lastComponent!.utf8), kind: Intruder.kind(ofMode: mode)))
            case .unsafeName(let name, let folder, let error):
                intruders.append(Intruder(folder: folder, name: Array(name.utf8), kind: .unsafeName, detail: "\(error)"))
            case .undecodableName(let name, let folder):
                intruders.append(Intruder(folder: folder, name: name, kind: .undecodableName))
            }
        }
        return (tree, intruders)
    }

    /// Size and SHA-256 of one file, read in 1 MiB chunks.
    public static func fingerprint(of path: String) throws(SyncError) -> FileFingerprint {
        let fd = try LongPath.at(path) { folder, rest throws(SyncError) in openat(folder, rest, O_RDONLY | O_CLOEXEC) }
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
