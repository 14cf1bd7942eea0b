import Archive
import Foundation

/// Copies a content folder into the publish's work folder, so that the hashes, the change list,
/// the archive and the published content all come from one reading of it, however `--content`
/// changes meanwhile.
///
/// Names are copied as raw bytes (the scan of the copy judges them), folders are created 0755
/// and files 0644 (what static hosting needs; modes are not part of a version). Symlinks and
/// special files are refused before anything is opened, so a fifo cannot block the copy. The
/// walk keeps one folder open at a time, so deep trees cost no descriptors.
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
            for (name, kind) in try entries(source, folder) {
                let child = folder.isEmpty ? name : folder + [0x2F] + name
                let from = join(source, child)
                let to = join(destination, child)
                switch kind {
                case S_IFDIR:
                    guard cPath(to, { mkdir($0, 0o755) }) == 0 else {
                        throw SyncError.fileSystem("cannot create folder", path: shown(to), errno: errno)
                    }
                    pending.append(child)
                case S_IFREG:
                    copied += try copyFile(from, to, buffer: buffer)
                default:
                    throw SyncError(code: .unsafePath,
                                    message: "\(shown(from)) is a symlink or special file; a storage carries regular files and folders only: replace it with a copy or remove it")
                }
            }
        }
        return copied
    }

    /// The entries of one folder with their file type (`lstat`), read completely before the
    /// folder is closed.
    private static func entries(_ root: String, _ folder: [UInt8]) throws(SyncError) -> [([UInt8], mode_t)] {
        let path = join(root, folder)
        guard let handle = cPath(path, { opendir($0) }) else {
            throw SyncError.fileSystem("cannot read folder", path: shown(path), errno: errno)
        }
        defer { closedir(handle) }
        let fd = dirfd(handle)
        var result: [([UInt8], mode_t)] = []
        while true {
            errno = 0
            guard let entry = readdir(handle) else {
                if errno != 0 { throw SyncError.fileSystem("cannot read folder", path: shown(path), errno: errno) }
                break
            }
            if DirectoryEntryName.isDotOrDotDot(entry) { continue }
            let name = Array(DirectoryEntryName.bytes(entry))
            var info = stat()
            guard fstatat(fd, DirectoryEntryName.pointer(entry), &info, AT_SYMLINK_NOFOLLOW) == 0 else {
                throw SyncError.fileSystem("cannot read", path: shown(join(root, folder.isEmpty ? name : folder + [0x2F] + name)), errno: errno)
            }
            result.append((name, info.st_mode & S_IFMT))
        }
        return result
    }

    private static func copyFile(_ from: [UInt8], _ to: [UInt8], buffer: UnsafeMutableRawBufferPointer) throws(SyncError) -> Int64 {
        // O_NOFOLLOW | O_NONBLOCK: a file swapped for a symlink or fifo since the listing is
        // refused or opened without blocking, then refused by the fstat below.
        let input = cPath(from) { open($0, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
        guard input >= 0 else { throw SyncError.fileSystem("cannot open", path: shown(from), errno: errno) }
        defer { close(input) }
        var info = stat()
        guard fstat(input, &info) == 0 else { throw SyncError.fileSystem("cannot read", path: shown(from), errno: errno) }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw SyncError(code: .unsafePath,
                            message: "\(shown(from)) is a symlink or special file; a storage carries regular files and folders only: replace it with a copy or remove it")
        }
        let output = cPath(to) { open($0, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644) }
        guard output >= 0 else { throw SyncError.fileSystem("cannot create", path: shown(to), errno: errno) }
        defer { close(output) }
        var total: Int64 = 0
        // sendfile copies inside the kernel; a filesystem that cannot do it falls back to read/write.
        while true {
            let count = sendfile(output, input, nil, 1 << 30)
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                if total == 0 && (errno == EINVAL || errno == ENOSYS) { break }
                throw SyncError.fileSystem("cannot copy \(shown(from)) to", path: shown(to), errno: errno)
            }
            if count == 0 { return total }
            total += Int64(count)
        }
        while true {
            let count = read(input, buffer.baseAddress, buffer.count)
            if count < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw SyncError.fileSystem("cannot read", path: shown(from), errno: errno)
            }
            if count == 0 { break }
            var written = 0
            while written < count {
                let result = write(output, buffer.baseAddress! + written, count - written)
                if result < 0 {
                    if errno == EINTR { continue }
                    throw SyncError.fileSystem("cannot write", path: shown(to), errno: errno)
                }
                written += result
            }
            total += Int64(count)
        }
        return total
    }

    /// `root` + "/" + `relative`, NUL-terminated.
    private static func join(_ root: String, _ relative: [UInt8]) -> [UInt8] {
        var path = Array(root.utf8)
        if !relative.isEmpty { path.append(0x2F); path += relative }
        path.append(0)
        return path
    }

    /// Calls `body` with a NUL-terminated byte path as a C string.
    private static func cPath<T>(_ path: [UInt8], _ body: (UnsafePointer<CChar>) -> T) -> T {
        path.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) }
        }
    }

    /// A NUL-terminated path for a message (bytes that are not UTF-8 shown as U+FFFD).
    private static func shown(_ path: [UInt8]) -> String {
        String(decoding: path.last == 0 ? path.dropLast() : path[...], as: UTF8.self)
    }
}
