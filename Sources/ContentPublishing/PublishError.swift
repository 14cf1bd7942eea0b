import FileKit
import StorageFormat

/// Why a publish failed. The message names the input at fault and the remedy; the storage is
/// left at its last published version (a half-done publish is rolled back or finished by the
/// next one).
public struct PublishError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare against the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case configuration, busy, invalidContent, invalidStorage, fileSystem, insufficientSpace, archive,
                interrupted, upload
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The options contradict each other or the storage (a version not above the current
        /// one, `--init` over an existing storage, a bad signing key), or the content folder
        /// holds what a storage cannot carry: a symlink or special file, or names that differ
        /// only in case or Unicode normalization (docs/protocol.md §8.5: exit 6).
        public static let configuration = Code(.configuration)
        /// Another publish of the same storage holds its lock.
        public static let busy = Code(.busy)
        /// The content folder holds a name the path rules refuse (unsafe, or not UTF-8), or a
        /// change the protocol cannot express.
        public static let invalidContent = Code(.invalidContent)
        /// The storage's own documents are malformed, so the next version cannot follow them.
        public static let invalidStorage = Code(.invalidStorage)
        /// A local file operation failed.
        public static let fileSystem = Code(.fileSystem)
        /// The filesystem is full.
        public static let insufficientSpace = Code(.insufficientSpace)
        /// The archive could not be written or the previous one read.
        public static let archive = Code(.archive)
        /// The publish was stopped part-way (the test hook's simulated kill); run it again.
        public static let interrupted = Code(.interrupted)
        /// The storage holds the new version, but handing it to the remote failed
        /// (``StorageUploading``): the remote still shows its previous status. Run it again.
        public static let upload = Code(.upload)

        public var description: String { base.rawValue }
    }

    /// The kind of failure.
    public var code: Code
    /// What went wrong, naming the input and the remedy.
    public var message: String
    /// The lower-level error, if any: a `FileSystemError` keeps the system call and errno.
    public var underlying: (any Error)?
    /// The option at fault, when one is: a command-line front end names its flag.
    public var option: PublishOptions.Option?
    /// What the publish did, when the failure came after it committed (an ``Code/upload``
    /// failure): the storage holds that version, and a front end can still report it.
    public var report: PublishReport?

    /// A failure with a code and a message naming the input at fault.
    public init(code: Code, message: String, underlying: (any Error)? = nil, option: PublishOptions.Option? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
        self.option = option
    }

    /// A failed file operation, keeping the system's words.
    public init(_ error: FileSystemError) {
        self.init(
            code: error.code == .noSpace ? .insufficientSpace : .fileSystem, message: error.description,
            underlying: error)
    }

    /// A storage document that cannot be read or written.
    public init(_ error: StorageFormatError) {
        let code: Code =
            switch error.code {
            case .invalidKey: .configuration
            case .unsafePath: .invalidContent
            default: .invalidStorage
            }
        self.init(code: code, message: error.message, underlying: error)
    }

    /// A failed system call (`operation` on `path`).
    static func fileSystem(_ operation: String, path: String, syscall: String, errno code: Int32) -> PublishError {
        PublishError(FileSystemError(operation, path: path, syscall: syscall, errno: code))
    }

    public var description: String { message }
}

/// Runs file work that fails with a ``FileSystemError`` inside a publish step.
func fileWork<T: ~Copyable>(_ body: () throws(FileSystemError) -> T) throws(PublishError) -> T {
    do {
        return try body()
    } catch {
        throw PublishError(error)
    }
}

/// Runs document work that fails with a ``StorageFormatError`` inside a publish step.
func formatWork<T>(_ body: () throws(StorageFormatError) -> T) throws(PublishError) -> T {
    do {
        return try body()
    } catch {
        throw PublishError(error)
    }
}
