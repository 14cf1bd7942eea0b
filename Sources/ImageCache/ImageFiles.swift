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
        size = Int64(status.st_size)
        identity = FileIdentityKey(
            device: UInt64(status.st_dev), inode: UInt64(status.st_ino), size: Int64(status.st_size),
            modified: Int64(status.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(status.st_mtim.tv_nsec),
            changed: Int64(status.st_ctim.tv_sec) &* 1_000_000_000 &+ Int64(status.st_ctim.tv_nsec))
    }

    /// `count` bytes at `offset` (fewer at the end of the file).
    func read(at offset: Int64, count: Int) -> [UInt8] {
        guard count > 0, offset >= 0 else { return [] }
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
        return Array(bytes.prefix(done))
    }

    deinit { close(descriptor) }
}

/// A file's own integrity checks, read in pieces: ``JPEGStructure`` and ``PNGStructure`` for
/// files too large to hold whole.
enum FileStructure {
    /// How far from its end a JPEG's end marker is looked for: bytes appended after it (a
    /// camera's trailer) up to this much are allowed.
    static let jpegTail = 1 << 20

    /// What is wrong with `file` as a `format` file ("is a JPEG cut short…"), or nil.
    static func damage(of file: OpenFile, format: String, path: String) throws(ImageCacheError) -> String? {
        switch format {
        case "jpeg": jpegDamage(file)
        case "png": pngDamage(file)
        default: nil
        }
    }

    /// The segments before the first scan are walked by their lengths; then an end marker
    /// (`FF D9`) must follow the scan's start within the file's last ``jpegTail`` bytes.
    static func jpegDamage(_ file: OpenFile) -> String? {
        let cutShort =
            "is a JPEG cut short: no end-of-image marker follows its scan data (a truncated download or file); fetch it whole"
        var offset: Int64 = 2
        var scan: Int64?
        while offset + 4 <= file.size {
            let head = file.read(at: offset, count: 4)
            guard head.count == 4 else { return cutShort }
            guard head[0] == 0xFF else {
                offset += 1
                continue
            }
            let marker = head[1]
            if marker == 0xDA {
                scan = offset + 2
                break
            }
            if marker == 0xFF || marker == 0xD8 || (0xD0...0xD7).contains(marker) || marker < 0xC0 {
                offset += marker == 0xFF ? 1 : 2
                continue
            }
            let length = Int64(head[2]) << 8 | Int64(head[3])
            guard length >= 2 else { return cutShort }
            offset += 2 + length
        }
        guard let scan else { return cutShort }
        let start = max(scan, file.size - Int64(jpegTail))
        let tail = file.read(at: start, count: Int(file.size - start))
        for index in tail.indices.dropLast() where tail[index] == 0xFF && tail[index + 1] == 0xD9 { return nil }
        return cutShort
    }

    /// Every chunk's length within the file and its CRC-32, IHDR first, an IEND at the end.
    static func pngDamage(_ file: OpenFile) -> String? {
        var offset: Int64 = 8
        var first = true
        while true {
            guard offset + 12 <= file.size else { return "is a damaged PNG: it ends before its IEND chunk (cut short)" }
            let head = file.read(at: offset, count: 8)
            guard head.count == 8 else { return "is a damaged PNG: it cannot be read whole" }
            let length = Int64(head[0]) << 24 | Int64(head[1]) << 16 | Int64(head[2]) << 8 | Int64(head[3])
            guard length <= 0x7FFF_FFFF, offset + 12 + length <= file.size else {
                return "is a damaged PNG: a chunk at byte \(offset) claims \(length) bytes, past the end (cut short)"
            }
            let type = Array(head[4..<8])
            guard type.allSatisfy({ (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }) else {
                return "is a damaged PNG: the chunk at byte \(offset) has no valid type"
            }
            let name = String(decoding: type, as: UTF8.self)
            if first {
                guard name == "IHDR", length == 13 else {
                    return "is a damaged PNG: its first chunk is not a 13-byte IHDR"
                }
                first = false
            }
            var crc = CRC32.start
            crc = type.withUnsafeBytes { CRC32.update(crc, $0) }
            var done: Int64 = 0
            while done < length {
                let piece = file.read(at: offset + 8 + done, count: Int(min(length - done, 1 << 20)))
                guard !piece.isEmpty else { return "is a damaged PNG: it cannot be read whole" }
                crc = piece.withUnsafeBytes { CRC32.update(crc, $0) }
                done += Int64(piece.count)
            }
            let stored = file.read(at: offset + 8 + length, count: 4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            guard stored == ~crc else {
                return "is a damaged PNG: the CRC of its \(name) chunk at byte \(offset) is wrong"
            }
            if name == "IEND" { return nil }
            offset += 12 + length
        }
    }
}
