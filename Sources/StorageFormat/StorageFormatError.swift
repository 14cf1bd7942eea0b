/// A protocol document that is malformed, unsafe, or not what its own integrity data or
/// signature says. The message names the document and the field at fault; both the client and
/// the publisher read documents through this target, so both get the same words.
public struct StorageFormatError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare against the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidStatus, invalidUpdateList, invalidChangeList, unsafePath, integrity, signature, invalidKey,
                invalidURL
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// `cacheStatus.json` is malformed or lacks a required field.
        public static let invalidStatus = Code(.invalidStatus)
        /// `listOfURLsToUpdatesByVersion.json` is malformed.
        public static let invalidUpdateList = Code(.invalidUpdateList)
        /// A `changes_A_B.json` is malformed or contradicts itself.
        public static let invalidChangeList = Code(.invalidChangeList)
        /// A path in a document would leave the content folder or breaks the path rules.
        public static let unsafePath = Code(.unsafePath)
        /// Bytes do not match the size or SHA-256 published for them.
        public static let integrity = Code(.integrity)
        /// The status's signature is missing, malformed, expired, wrong, or from a key not trusted.
        public static let signature = Code(.signature)
        /// A signing key given to the library is not an ed25519 key of the expected kind.
        public static let invalidKey = Code(.invalidKey)
        /// A storage URL cannot be used (not http(s), has a query).
        public static let invalidURL = Code(.invalidURL)

        public var description: String { base.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// What is wrong and what to do, naming the document.
    public var message: String
    /// The lower-level error, when there is one (a JSON syntax error, say).
    public var underlying: (any Error)?

    /// A failure with a message that names the document at fault.
    public init(code: Code, message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    public var description: String { message }
}
