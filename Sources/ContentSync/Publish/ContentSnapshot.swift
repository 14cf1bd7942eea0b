import Archive
import Foundation

/// Copies a content folder into the publish's work folder, so that the hashes, the change list,
/// the archive and the published content all come from one reading of it, however `--content`
/// changes meanwhile.
///
/// Names are copied as raw bytes (``RawTree``; the scan of the copy judges them), folders are
/// created 0755 and files 0644 (what static hosting needs; modes are not part of a version).
/// Symlinks and special files are refused before anything is opened, so a fifo cannot block
/// the copy.
enum ContentSnapshot {
    /// Copies `source` to `destination` (which must not exist). Returns bytes copied.
    @discardableResult
    static func copy(_ source: String, to destination: String) throws(SyncError) -> Int64 {
        guard mkdir(destination, 0o755) == 0 else {
            throw SyncError.fileSystem("cannot create the content snapshot folder", path: destination, errno: errno)
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        var copied: Int64 = 0
        // Relative paths as raw bytes; "" is the root.
        var pending: [[UInt8]] = [[]]
        while let folder = pending.popLast() {
            for (name, kind) in try RawTree.entries(source, folder) {
                let child = RawTree.appending(folder, name)
                let from = RawTree.join(source, child)
                let to = RawTree.join(destination, child)
                switch kind {
                case S_IFDIR:
                    guard RawTree.withCPath(to, { mkdir($0, 0o755) }) == 0 else {
                        throw SyncError.fileSystem("cannot create folder", path: RawTree.shown(to), errno: errno)
                    }
                    pending.append(child)
                case S_IFREG:
                    copied += try copyFile(from, to, buffer: buffer)
                default:
                    throw SyncError(code: .unsafePath,
                                    message: "\(RawTree.shown(from)) is a symlink or special file; a storage carries regular files and folders only: replace it with a copy or remove it")
                }
            }
        }
        return copied
    }

    private static func copyFile(_ from: [UInt8], _ to: [UInt8], buffer: UnsafeMutableRawBufferPointer) throws(SyncError) -> Int64 {
        // O_NOFOLLOW | O_NONBLOCK: a file swapped for a symlink or fifo since the listing is
        // refused or opened without blocking, then refused by the fstat below.
        let input = RawTree.withCPath(from) { open($0, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
        guard input >= 0 else { throw SyncError.fileSystem("cannot open", path: RawTree.shown(from), errno: errno) }
        defer { close(input) }
        var info = stat()
        guard fstat(input, &info) == 0 else { throw SyncError.fileSystem("cannot read", path: RawTree.shown(from), errno: errno) }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw SyncError(code: .unsafePath,
                            message: "\(RawTree.shown(from)) is a symlink or special file; a storage carries regular files and folders only: replace it with a copy or remove it")
        }
        let output = RawTree.withCPath(to) { open($0, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644) }
        guard output >= 0 else { throw SyncError.fileSystem("cannot create", path: RawTree.shown(to), errno: errno) }
        defer { close(output) }
        var total: Int64 = 0
        // sendfile copies inside the kernel; a filesystem that cannot do it falls back to read/write.
        while true {
            let count = sendfile(output, input, nil, 1 << 30)
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                if total == 0 && (errno == EINVAL || errno == ENOSYS) { break }
                throw SyncError.fileSystem("cannot copy \(RawTree.shown(from)) to", path: RawTree.shown(to), errno: errno)
            }
            if count == 0 { return total }
            total += Int64(count)
        }
        while true {
            let count = read(input, buffer.baseAddress, buffer.count)
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw SyncError.fileSystem("cannot read", path: RawTree.shown(from), errno: errno)
            }
            if count == 0 { break }
            var written = 0
            while written < count {
                let result = write(output, buffer.baseAddress! + written, count - written)
                if result < 0 {
                    if errno == EINTR { continue }
                    throw SyncError.fileSystem("cannot write", path: RawTree.shown(to), errno: errno)
                }
                written += result
            }
            total += Int64(count)
        }
        return total
    }
}
