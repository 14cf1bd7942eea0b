import FileKit
import Foundation

/// A load's answer with its value as it is kept: bytes, or for a value larger than the memory
/// tier's item limit, its open file (``ItemLoader/value(for:parameters:varyingHeaders:context:options:)``).
public struct LoadedValue: Sendable {
    /// Where the bytes are.
    public enum Content: Sendable {
        /// In memory.
        case bytes(Data)
        /// In an open, checked file, readable while the ``ValueFile`` lives.
        case file(ValueFile)

        /// The value's size in bytes.
        public var size: Int64 {
            switch self {
            case .bytes(let data): Int64(data.count)
            case .file(let file): file.size
            }
        }
    }

    /// The item's key (a variant's, for a response chosen by `Vary`).
    public var key: CacheKey
    /// The bytes.
    public var content: Content
    /// The item's record.
    public var info: ItemInfo
    /// Where it came from.
    public var source: ItemSource
    /// The fetch failure a stale value stands in for (stale-if-error); nil otherwise.
    public var fetchError: ItemCacheError?
    /// Why a fetched value was delivered but not kept; nil when it was kept or was not to be.
    public var storeError: ItemCacheError?
    /// Whether the cache holds it (as ``LoadedItem/isStored``).
    public var isStored: Bool

    /// The value's size in bytes.
    public var size: Int64 { content.size }

    /// The HTTP status it was served with (200 for an item without a recorded response).
    public var status: Int { info.status }

    /// Passes the bytes to `body` in order, in chunks of at most `chunkSize` (a file is read
    /// chunk by chunk and checked: see ``ValueFile/forEachChunk(size:_:)``). A chunk is valid
    /// only during its call: copy what you keep.
    public func forEachChunk(size chunkSize: Int = 1 << 20, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        switch content {
        case .bytes(let data):
            try data.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let end = min(bytes.count, offset + chunkSize)
                    try body(UnsafeRawBufferPointer(rebasing: bytes[offset..<end]))
                    offset = end
                }
            }
        case .file(let file):
            try file.forEachChunk(size: chunkSize, body)
        }
    }

    /// The whole value in memory (a file is read and checked).
    public func data() throws(ItemCacheError) -> Data {
        switch content {
        case .bytes(let data): data
        case .file(let file): try file.data()
        }
    }

    init(_ loaded: LoadedItem) {
        key = loaded.item.key
        content = loaded.item.content
        info = loaded.item.info
        source = loaded.source
        fetchError = loaded.fetchError
        storeError = loaded.storeError
        isStored = loaded.isStored
    }
}

extension LoadedItem {
    /// The load with its value in memory, its file (if any) read on the I/O pool.
    func materialized() async throws(ItemCacheError) -> LoadedItem {
        guard let file = item.file else { return self }
        var loaded = self
        loaded.item.data = try await BlockingIOPool.shared.run { () throws(ItemCacheError) in try file.data() }
        loaded.item.file = nil
        return loaded
    }
}
