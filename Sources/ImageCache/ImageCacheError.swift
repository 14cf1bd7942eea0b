import ItemCache

/// Why an image operation failed: a code to branch on and a message that names the input and
/// the remedy.
public struct ImageCacheError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare against the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case refused, processing, configuration, cache
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The input is not an image this cache accepts: not an allowed format (SVG, PDF, HTML,
        /// empty), damaged or cut short, or larger than the limits. Nothing is cached for it.
        public static let refused = Code(.refused)
        /// libvips failed on an accepted image.
        public static let processing = Code(.processing)
        /// The image runtime was asked for settings it cannot take (libvips' loader blocking is
        /// process-wide: it is set once).
        public static let configuration = Code(.configuration)
        /// The item cache under the images failed: the network with nothing stored, an offline
        /// miss, the cache folder. ``ImageCacheError/cacheError`` says which.
        public static let cache = Code(.cache)

        /// The code's name, e.g. `refused`.
        public var description: String { base.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// The words for people: the input at fault and the remedy.
    public var message: String

    /// The item cache's failure, for ``Code/cache``.
    public var cacheError: ItemCacheError?

    /// A failure with its code and message.
    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    /// The item cache's `error`: ``Code/refused`` for bytes a fetcher's image check rejected
    /// (`ItemCacheError/Code/rejected`, also when another process fetched them), else
    /// ``Code/cache``.
    public init(_ error: ItemCacheError) {
        self.init(code: error.code == .rejected ? .refused : .cache, message: error.message)
        cacheError = error
    }

    /// `code: message`.
    public var description: String { "\(code): \(message)" }
}

extension ImageMetadata {
    /// Throws ``ImageCacheError/Code/configuration`` for caller metadata that uses the
    /// cache's own names.
    static func checkCustom(_ custom: [String: String]) throws(ImageCacheError) {
        if let name = custom.keys.sorted().first(where: { $0.hasPrefix(reservedPrefix) }) {
            throw ImageCacheError(
                code: .configuration,
                message:
                    "the metadata name '\(name)' begins with '\(reservedPrefix)', which the image cache keeps for its own facts; rename it"
            )
        }
    }
}
