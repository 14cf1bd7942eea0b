import Foundation

/// One stored item: its bytes and what the cache knows about them.
public struct CachedItem: Sendable, Equatable {
    /// The item's key.
    public var key: CacheKey
    /// The value's bytes.
    public var data: Data
    /// The item's record: times, expiry, validators, groups, the caller's metadata.
    public var info: ItemInfo
    /// Inside the loader, a value larger than the memory tier's item limit: its open file
    /// (``data`` is then empty). Never set on an item a public API returns
    /// (``LoadedItem/materialized()`` reads it first).
    var file: ValueFile?

    /// An item from its parts.
    public init(key: CacheKey, data: Data, info: ItemInfo) {
        (self.key, self.data, self.info) = (key, data, info)
    }

    /// An item whose value is the open file `file`.
    init(key: CacheKey, file: ValueFile, info: ItemInfo) {
        (self.key, self.data, self.info, self.file) = (key, Data(), info, file)
    }

    /// An item whose value is `content`: bytes, or an open file.
    init(key: CacheKey, content: LoadedValue.Content, info: ItemInfo) {
        switch content {
        case .bytes(let data): self.init(key: key, data: data, info: info)
        case .file(let file): self.init(key: key, file: file, info: info)
        }
    }

    /// The value as it is held: its file, or its bytes.
    var content: LoadedValue.Content { file.map(LoadedValue.Content.file) ?? .bytes(data) }

    /// The bytes as UTF-8 text; throws ``ItemCacheError/Code/decoding`` when they are not.
    public func string() throws(ItemCacheError) -> String {
        guard let text = String(validating: data, as: UTF8.self) else {
            throw ItemCacheError(
                code: .decoding,
                message: "the value of \(key.rawValue) is not UTF-8 text (\(data.count) bytes); read it as Data",
                key: key)
        }
        return text
    }

    /// The bytes decoded as JSON into `type`; throws ``ItemCacheError/Code/decoding`` naming the
    /// key and the decoder's complaint.
    public func decode<T: Decodable>(_ type: T.Type, using decoder: JSONDecoder = JSONDecoder()) throws(ItemCacheError)
        -> T
    {
        do {
            return try decoder.decode(type, from: data)
        } catch {
            throw ItemCacheError(
                code: .decoding, message: "the value of \(key.rawValue) is not a JSON \(T.self): \(error)", key: key,
                underlying: error)
        }
    }
}

/// What the index keeps for each item besides its bytes.
public struct ItemInfo: Sendable, Equatable {
    /// The value's size in bytes.
    public var size: Int64
    /// When the value was stored (or last replaced).
    public var created: Date
    /// When it was last read or stored (the least recently used go first when room is needed;
    /// reads are recorded in batches, so another process's reads show up a little later).
    public var accessed: Date
    /// When it stops being fresh; nil for never.
    public var expires: Date?
    /// True when every use must revalidate it first (a server's `no-cache`).
    public var mustRevalidate: Bool
    /// Pinned items are never evicted.
    public var pinned: Bool
    /// The groups or tags it belongs to, sorted.
    public var groups: [String]
    /// The server's entity tag, for revalidation.
    public var etag: String?
    /// The server's `Last-Modified`, for revalidation.
    public var lastModified: String?
    /// The value's media type, as the server or the caller gave it.
    public var contentType: String?
    /// The caller's own metadata (NBImageCache keeps it beside each image).
    public var metadata: [String: String]
    /// The HTTP response the item came from (status, headers, age base); nil for an item
    /// stored directly or fetched by a fetcher that reports none.
    public var response: HTTPResponseRecord?

    /// A record with these fields; the defaults describe an item stored now that never expires.
    public init(
        size: Int64, created: Date = Date(), accessed: Date? = nil, expires: Date? = nil, mustRevalidate: Bool = false,
        pinned: Bool = false, groups: [String] = [], etag: String? = nil, lastModified: String? = nil,
        contentType: String? = nil, metadata: [String: String] = [:], response: HTTPResponseRecord? = nil
    ) {
        self.response = response
        self.size = size
        self.created = created
        self.accessed = accessed ?? created
        self.expires = expires
        self.mustRevalidate = mustRevalidate
        self.pinned = pinned
        self.groups = Array(Set(groups)).sorted()
        self.etag = etag
        self.lastModified = lastModified
        self.contentType = contentType
        self.metadata = metadata
    }

    /// True when the item is no longer fresh at `now`: past its expiry, or marked to revalidate
    /// on every use.
    public func isExpired(at now: Date = Date()) -> Bool {
        mustRevalidate || (expires.map { $0 <= now } ?? false)
    }

    /// True when a conditional request can revalidate it (it has an ETag or a Last-Modified).
    public var canRevalidate: Bool { etag != nil || lastModified != nil }

    /// The HTTP status it was stored with: 200 for an item with no recorded response.
    public var status: Int { response?.status ?? 200 }

    /// Its current age in seconds at `now` (RFC 9111 §4.2.3): from the response's age base, or
    /// from when it was stored.
    public func age(at now: Date = Date()) -> Double {
        max(0, now.timeIntervalSince(response?.born ?? created))
    }
}

/// How to store one value.
public struct StoreOptions: Sendable, Equatable {
    /// How long it stays fresh; nil for the configuration's ``CacheConfiguration/defaultExpiry``.
    public var expiry: Expiry?
    /// Groups or tags, for queries and for evicting together.
    public var groups: [String]
    /// Never evict it. Pinned items count against the disk limit; one that cannot fit fails
    /// with ``ItemCacheError/Code/tooLarge``.
    public var pinned: Bool
    /// The caller's metadata, kept beside the value.
    public var metadata: [String: String]
    /// The value's media type.
    public var contentType: String?
    /// Validators, for values that came from a server.
    public var etag: String?, lastModified: String?
    /// Revalidate on every use (a server's `no-cache`).
    public var mustRevalidate: Bool
    /// The HTTP response the value came from (status, headers, age base), kept with it.
    public var response: HTTPResponseRecord?

    /// Options with these fields; by default the configured expiry, no groups, not pinned.
    public init(
        expiry: Expiry? = nil, groups: [String] = [], pinned: Bool = false, metadata: [String: String] = [:],
        contentType: String? = nil, etag: String? = nil, lastModified: String? = nil, mustRevalidate: Bool = false,
        response: HTTPResponseRecord? = nil
    ) {
        self.response = response
        self.expiry = expiry
        self.groups = groups
        self.pinned = pinned
        self.metadata = metadata
        self.contentType = contentType
        self.etag = etag
        self.lastModified = lastModified
        self.mustRevalidate = mustRevalidate
    }
}

/// Where a result came from.
public enum ItemSource: String, Sendable, Equatable, CustomStringConvertible {
    /// The memory tier.
    case memory
    /// The disk tier.
    case disk
    /// A fetch that downloaded the value.
    case network
    /// A stored value that a conditional request confirmed (`304 Not Modified`): no body moved.
    case revalidated
    /// An expired value, returned because the fetch failed (stale-if-error) or while a
    /// background refresh runs (stale-while-revalidate).
    case stale

    /// The source's name.
    public var description: String { rawValue }
}

/// Disk usage as the index counts it.
public struct CacheStatistics: Sendable, Equatable, Codable {
    /// Items stored.
    public var count: Int
    /// Bytes of their values, inline and in files.
    public var bytes: Int64
    /// The disk limit.
    public var limit: Int64
    /// Pinned items, and their bytes.
    public var pinned: Int, pinnedBytes: Int64
    /// Items past their expiry.
    public var expired: Int
}

/// What opening a cache found wrong and put right (``ItemStore/openingRepairs``). A cache can
/// refetch anything, so damage costs items, never a wrong value.
public struct CacheRepairs: Sendable, Equatable {
    /// Files no row named (a crash between writing a file and committing its row), removed.
    public var orphanFiles = 0
    /// Rows whose value was missing, cut short or not a regular file, or whose file name is not
    /// one the cache makes, removed.
    public var orphanRows = 0
    /// Whether the index's totals were missing or wrong, and were counted again.
    public var statsRepaired = false
    /// Whether the index was damaged, set aside as `index.sqlite.damaged`, and begun again
    /// empty (its files then went as orphans).
    public var indexSetAside = false

    /// Repairs with these counts.
    public init(orphanFiles: Int = 0, orphanRows: Int = 0, statsRepaired: Bool = false, indexSetAside: Bool = false) {
        (self.orphanFiles, self.orphanRows, self.statsRepaired, self.indexSetAside) = (
            orphanFiles, orphanRows, statsRepaired, indexSetAside
        )
    }

    /// Whether anything was repaired.
    public var isEmpty: Bool { self == CacheRepairs() }
}
