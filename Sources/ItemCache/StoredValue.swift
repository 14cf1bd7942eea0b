import FileKit
import Foundation

/// A stored value opened for reading without copying it into one `Data`: the open file of a value
/// kept in a file (hand its descriptor to libvips, `sendfile`, a parser that reads from a file),
/// or the bytes of a small value kept inside the index. Valid only inside the closure that
/// receives it; the descriptor is closed after.
public struct StoredValue: ~Copyable {
    /// Where the bytes are.
    public enum Content {
        /// An open, read-only descriptor of the value's file, positioned at its start. The file is
        /// immutable: a later store of the key writes another file.
        case file(descriptor: Int32)
        /// A value small enough to live in the index.
        case bytes(Data)
    }

    /// The bytes, in a file or in memory.
    public let content: Content
    /// The value's size in bytes.
    public let size: Int64
    /// Its record.
    public let info: ItemInfo

    /// Reads the bytes in chunks of at most `chunkSize`, passing each to `body`, without holding
    /// the whole value in memory.
    public func forEachChunk(size chunkSize: Int = 1 << 20, _ body: (Data) throws -> Void) throws {
        switch content {
        case .bytes(let data):
            var offset = 0
            while offset < data.count {
                let end = min(data.count, offset + chunkSize)
                try body(data.subdata(in: offset..<end))
                offset = end
            }
        case .file(let descriptor):
            var offset: Int64 = 0
            var buffer = Data(count: chunkSize)
            while offset < size {
                let wanted = Int(min(Int64(chunkSize), size - offset))
                let got = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress!, wanted, off_t(offset)) }
                if got < 0 {
                    if errno == EINTR { continue }
                    throw FileSystemError(
                        "cannot read the cached value", path: "descriptor \(descriptor)", syscall: "pread", errno: errno
                    )
                }
                if got == 0 { break }
                try body(buffer.prefix(got))
                offset += Int64(got)
            }
        }
    }
}

extension ItemStore {
    /// Opens the stored value of `key` for reading without copying it into memory, passes it to
    /// `body` (on the I/O pool: `body` may block, as a decoder reading the file does), and closes
    /// it; nil when nothing is stored. The value is checked (kind, size and checksum, read once
    /// in chunks) before `body` sees it; a damaged one is dropped as a miss. Values waiting in
    /// a group write are flushed first.
    public func withValue<T: Sendable>(
        for key: CacheKey, _ body: @escaping @Sendable (borrowing StoredValue) throws -> T
    ) async throws -> T? {
        if configuration.groupWrites != nil { try await flush() }
        return try await io.run { () throws -> T? in
            guard let opened = try self.disk.openValue(key) else {
                // Gone from disk (or dropped as damaged): memory must not keep answering for it.
                self.memory.remove(key)
                return nil
            }
            switch opened.content {
            case .bytes(let data):
                return try body(StoredValue(content: .bytes(data), size: opened.info.size, info: opened.info))
            case .file(let descriptor):
                defer { Glibc.close(descriptor) }
                return try body(
                    StoredValue(content: .file(descriptor: descriptor), size: opened.info.size, info: opened.info))
            }
        }
    }
}

extension DiskTier {
    /// The value of `key`, opened and checked: its bytes when inline, else its open file
    /// (checked for kind, size and checksum by one chunked read, then rewound). Nil when none
    /// is stored, or it was damaged (then dropped).
    func openValue(_ key: CacheKey) throws(ItemCacheError) -> (content: StoredValue.Content, info: ItemInfo)? {
        for _ in 0..<4 {
            guard let row = try indexRow(for: key) else { return nil }
            if row.inlineValue != nil {
                guard let item = try read(key) else { return nil }
                return (.bytes(item.data), item.info)
            }
            guard let text = row.file, let name = BlobName(text) else {
                damaged.increment()
                if drop(row) { return nil } else { continue }
            }
            let opened: BlobFolder.Opened
            do {
                opened = try blobs.openVerified(name, size: row.info.size)
            } catch {
                throw storageError("cannot read \(key.rawValue) from", error)
            }
            switch opened {
            case .unusable(.missing):
                if drop(row) { return nil }
            case .unusable:
                damaged.increment()
                if drop(row) { return nil }
            case .file(let descriptor):
                if let checksum = row.checksum, Self.checksum(of: descriptor, size: row.info.size) != checksum {
                    close(descriptor)
                    damaged.increment()
                    if drop(row) { return nil }
                    continue
                }
                touch(row)
                return (.file(descriptor: descriptor), row.info)
            }
        }
        return nil
    }

    /// The CRC-32C of the first `size` bytes of `descriptor`, read in 1 MiB chunks (`pread`:
    /// the offset stays at the start); nil when it cannot be read.
    static func checksum(of descriptor: Int32, size: Int64) -> UInt32? {
        var crc: UInt32 = 0
        var offset: Int64 = 0
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while offset < size {
            let wanted = Int(min(Int64(buffer.count), size - offset))
            let got = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress!, wanted, off_t(offset)) }
            if got < 0 && errno == EINTR { continue }
            guard got > 0 else { return nil }
            crc = buffer.withUnsafeBytes {
                CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0.prefix(got)), continuing: crc)
            }
            offset += Int64(got)
        }
        return crc
    }
}
