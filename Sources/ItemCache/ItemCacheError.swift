/// Why a cache operation failed: a code to branch on, a message that names the key or input at
/// fault and the remedy, and the key itself when one is known.
public struct ItemCacheError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare against the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidKey, invalidExpiry
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A URL or key that cannot name an item (no scheme or host, a bad context name).
        public static let invalidKey = Code(.invalidKey)
        /// An expiry that cannot be read.
        public static let invalidExpiry = Code(.invalidExpiry)

        /// The code's name, e.g. `invalidKey`.
        public var description: String { base.rawValue }
    }

    /// The kind of failure, the words for people, and the item's key when one is known.
    public var code: Code, message: String, key: CacheKey?
    /// The lower-level error, if any (a file system or database error).
    public var underlying: (any Error)?

    /// A failure about `key` (when known), with a message naming the input and the remedy.
    public init(code: Code, message: String, key: CacheKey? = nil, underlying: (any Error)? = nil) {
        (self.code, self.message, self.key, self.underlying) = (code, message, key, underlying)
    }

    /// `code: message`, with the key when the message does not already name it.
    public var description: String {
        guard let key, !message.contains(key.rawValue) else { return "\(code): \(message)" }
        return "\(code): \(message) (key \(key.rawValue))"
    }
}
