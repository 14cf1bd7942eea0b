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

    /// A value from its parts: for a storage of the app's own (``ItemCaching``) that hands values
    /// over as ``ItemStore/withValue(for:_:)`` does. A descriptor stays the caller's to close.
    public init(content: Content, size: Int64, info: ItemInfo) {
        (self.content, self.size, self.info) = (content, size, info)
    }

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
            var failure: (any Error)?
            try DescriptorIO.forEachChunk(of: descriptor, limit: size, chunkSize: chunkSize, path: "the cached value") {
                chunk in
                do {
                    try body(Data(chunk))
                    return true
                } catch {
                    failure = error
                    return false
                }
            }
            if let failure { throw failure }
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
            guard let opened = try self.onDisk({ disk throws(ItemCacheError) in try disk.openValue(key) }) else {
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
