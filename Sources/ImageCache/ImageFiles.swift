import FileKit
import Foundation
import ItemCache

/// A file's identity: a new version published by rename (as ContentSync does) or rewritten in
/// place has another.
struct FileIdentityKey: Hashable, Sendable {
    var device: UInt64, inode: UInt64, size: Int64
    var modified: Int64, changed: Int64
}

/// An original opened read-only from a mirrored folder, closed when the last user lets go (a
/// variant being made keeps it open, even if the caller that opened it has gone).
final class OpenFile: Sendable {
    let descriptor: Int32
    let size: Int64
    let identity: FileIdentityKey

    /// Takes `descriptor` (from `dup`: -1 for a failed one), an open regular file named
    /// `shownAs` in messages; it is closed with this object.
    init(adopting descriptor: Int32, shownAs name: String) throws(ImageCacheError) {
        var status = stat()
        guard descriptor >= 0, fstat(descriptor, &status) == 0 else {
            let reason = String(cString: strerror(errno))
            if descriptor >= 0 { close(descriptor) }
            throw ImageCacheError(
                ItemCacheError(code: .storage, message: "cannot open the stored original \(name): \(reason)"))
        }
        self.descriptor = descriptor
        (size, identity) = Self.facts(status)
    }

    private static func facts(_ status: stat) -> (Int64, FileIdentityKey) {
        let identity = FileIdentityKey(
            device: UInt64(status.st_dev), inode: UInt64(status.st_ino), size: Int64(status.st_size),
            modified: status.st_mtim.nanoseconds, changed: status.st_ctim.nanoseconds)
        return (Int64(status.st_size), identity)
    }

    /// Opens the regular file at `path`, at most `limit` bytes. A FIFO or device is refused
    /// without blocking on it.
    init(path: String, limit: Int) throws(ImageCacheError) {
        let descriptor = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
        guard descriptor >= 0 else {
            let reason = String(cString: strerror(errno))
            throw ImageCacheError(
                ItemCacheError(code: .fetch, message: "cannot read the image \(path): \(reason); check the path"))
        }
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else {
            close(descriptor)
            throw ImageCacheError(
                code: .refused, message: "\(path) is not a regular file; give the path of an image file")
        }
        guard status.st_size <= limit else {
            close(descriptor)
            throw ImageCacheError(
                code: .refused,
                message: "\(path) is \(status.st_size) bytes, over the \(limit)-byte limit (ImageLimits.maxBytes)")
        }
        // Reads block as usual from here.
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
        self.descriptor = descriptor
        (size, identity) = Self.facts(status)
    }

    deinit { close(descriptor) }
}

/// An open file's bytes, read with `pread` a piece at a time (its offset is not moved).
extension OpenFile: ImageBytes {
    func withBytes<T>(at offset: Int64, count: Int, _ body: (UnsafeRawBufferPointer) -> T) -> T {
        let count = Int(max(0, min(Int64(count), size - max(0, offset))))
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let got = bytes.withUnsafeMutableBytes {
                pread(descriptor, $0.baseAddress! + done, count - done, off_t(offset) + off_t(done))
            }
            if got < 0, errno == EINTR { continue }
            guard got > 0 else { break }
            done += got
        }
        return bytes.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[..<done])) }
    }
}
