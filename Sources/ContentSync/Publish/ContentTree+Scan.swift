import Archive
import Crypto
import Foundation

extension ContentTree {
    /// Reads a folder and hashes every file (blocking). Refuses what a storage cannot carry:
    /// symlinks and special files, and names that break the path rules.
    public static func scan(_ directory: String) throws(SyncError) -> ContentTree {
        var tree = ContentTree(folders: [], files: [:])
        var pending: [SafeRelativePath] = [.root]
        while let folder = pending.popLast() {
            let absolute = folder.absolute(in: directory)
            let names: [String]
            do {
                names = try FileManager.default.contentsOfDirectory(atPath: absolute)
            } catch {
                throw SyncError(code: .fileSystem, message: "cannot read folder \(absolute): \(error)", underlying: error)
            }
            for name in names {
                let child: SafeRelativePath
                do {
                    child = folder.appending(try SafeRelativePath(validating: name))
                } catch {
                    throw SyncError(code: .unsafePath, message: "\(absolute)/\(name): \(error); rename it", underlying: error)
                }
                let path = child.absolute(in: directory)
                var info = stat()
                guard lstat(path, &info) == 0 else {
                    throw SyncError.fileSystem("cannot read", path: path, errno: errno)
                }
                switch info.st_mode & S_IFMT {
                case S_IFDIR:
                    tree.folders.insert(child)
                    pending.append(child)
                case S_IFREG:
                    tree.files[child] = try fingerprint(of: path)
                default:
                    throw SyncError(code: .unsafePath,
                                    message: "\(path) is a symlink or special file; a storage carries regular files and folders only: replace it with a copy or remove it")
                }
            }
        }
        return tree
    }

    /// Size and SHA-256 of one file, read in 1 MiB chunks.
    public static func fingerprint(of path: String) throws(SyncError) -> FileFingerprint {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SyncError.fileSystem("cannot open", path: path, errno: errno) }
        defer { close(fd) }
        var hasher = SHA256()
        var size: Int64 = 0
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let count = read(fd, buffer.baseAddress, buffer.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw SyncError.fileSystem("cannot read", path: path, errno: errno)
            }
            if count == 0 { break }
            hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            size += Int64(count)
        }
        let digest = hasher.finalize().map { String(format: "%02x", $0) }.joined()
        return FileFingerprint(size: size, sha256: digest)
    }
}
