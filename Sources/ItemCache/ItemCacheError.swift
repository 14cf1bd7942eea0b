import Transport

/// Why a cache operation failed: a code to branch on, a message that names the key or input at
/// fault and the remedy, and the key itself when one is known.
public struct ItemCacheError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare against the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidKey, invalidExpiry, tooLarge, storage, fetch, notCached, decoding, closed, invalidAction,
                folderRefused, damagedIndex, cancelled, rejected, nestedWrite
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A URL or key that cannot name an item (no scheme or host, a bad context name).
        public static let invalidKey = Code(.invalidKey)
        /// An expiry that cannot be read.
        public static let invalidExpiry = Code(.invalidExpiry)
        /// A value that cannot fit under the disk limit (bigger than the limit, or than what
        /// pinned items leave free).
        public static let tooLarge = Code(.tooLarge)
        /// The cache folder or its index failed (permissions, a full disk, a damaged database).
        public static let storage = Code(.storage)
        /// A fetch failed and no stored value could stand in.
        public static let fetch = Code(.fetch)
        /// An offline lookup found nothing stored.
        public static let notCached = Code(.notCached)
        /// A value is not in the asked form (not UTF-8, not the JSON type).
        public static let decoding = Code(.decoding)
        /// The cache was closed.
        public static let closed = Code(.closed)
        /// A provider's list action that does not apply to the stored list (an index out of
        /// range, removing from an empty list).
        public static let invalidAction = Code(.invalidAction)

        /// The cache folder may not be used: it is not a cache (and not empty), it does not
        /// exist where only an existing cache may be opened, or others could plant files or
        /// links in it (another user's, writable by others). The message names the fix.
        public static let folderRefused = Code(.folderRefused)
        /// The cache's index is damaged (a page that does not read back, not a database). The
        /// store sets it aside as `index.sqlite.damaged` and starts again empty: a retry works.
        public static let damagedIndex = Code(.damagedIndex)
        /// The load was cancelled (its task was): neither a failure of the network nor of the
        /// cache. The loader and providers throw it alike.
        public static let cancelled = Code(.cancelled)
        /// A fetcher's own check refused the bytes it fetched (ImageCache: not an image it
        /// accepts, or over its limits): nothing was stored, and the processes that waited for
        /// that fetch get this code too.
        public static let rejected = Code(.rejected)
        /// A write started inside another write's closure (``ItemStore/update(_:options:_:)``'s
        /// transform, a provider's list action), which holds the folder's write lock it would
        /// wait for: nothing was written by the inner call. Return the value from the closure,
        /// or write after it returns.
        public static let nestedWrite = Code(.nestedWrite)

        /// The code's name, e.g. `invalidKey`.
        public var description: String { base.rawValue }

        /// The code of a name ``description`` gave (as stored by the index); nil for none.
        init?(named name: String) {
            guard let base = Base(rawValue: name) else { return nil }
            self.base = base
        }
    }

    /// The kind of failure, the words for people, and the item's key when one is known.
    public var code: Code, message: String, key: CacheKey?
    /// The lower-level error, if any (a file system or database error).
    public var underlying: (any Error)?
    /// For a fetch the origin answered with a failing status (500, 502, 503, 504, 429) and
    /// nothing could stand in: that status, also when this load shared another's fetch or was
    /// answered by the origin's backoff. Nil otherwise.
    public var httpStatus: Int?

    /// A failure about `key` (when known), with a message naming the input and the remedy. The
    /// message is kept with every secret in a URL it quotes masked (`Redaction`: a password, a
    /// `token=` parameter), since apps print and log it; ``key`` keeps the key whole.
    public init(code: Code, message: String, key: CacheKey? = nil, underlying: (any Error)? = nil) {
        (self.code, self.message, self.key, self.underlying) = (code, Redaction.text(message), key, underlying)
    }

    /// `code: message`, with the key (its secrets masked) when the message does not already
    /// name it.
    public var description: String {
        guard let key else { return "\(code): \(message)" }
        let shown = Redaction.text(key.rawValue)
        guard !message.contains(shown) else { return "\(code): \(message)" }
        return "\(code): \(message) (key \(shown))"
    }
}

extension ItemCacheError {
    /// The error for a load of `key` that was cancelled.
    static func cancelled(_ key: CacheKey) -> ItemCacheError {
        ItemCacheError(
            code: .cancelled, message: "the load of \(key.rawValue) was cancelled", key: key,
            underlying: CancellationError())
    }

    /// Whether `error` is a cancellation: Swift's, the transport's, or this cache's.
    static func isCancellation(_ error: any Error) -> Bool {
        if error is CancellationError { return true }
        if let error = error as? ItemCacheError { return error.code == .cancelled }
        // The transport's `cancelled` also means "shut down": only the task's own counts.
        if let error = error as? TransportError { return error.code == .cancelled && Task.isCancelled }
        return false
    }
}
