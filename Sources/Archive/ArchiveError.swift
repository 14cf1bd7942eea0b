#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Why reading or writing a zip archive failed.
///
/// The message names the archive or entry and says what to do about it. Write failures keep the
/// raw `errno` so callers can tell a full disk (`ENOSPC`) from a bug.
public struct ArchiveError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare with the static members, e.g. `error.code == .corrupt`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case cannotOpen
            case corrupt
            case unsafeEntryName
            case forbiddenEntryType
            case duplicateEntry
            case sizeLimitExceeded
            case encryptedEntry
            case invalidDestination
            case io
            case cancelled
        }

        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The archive (or a file given to the writer) could not be opened or is not a zip file.
        public static let cannotOpen = Code(.cannotOpen)
        /// The archive's structure or data is damaged: bad CRC, sizes that disagree, bad deflate data.
        public static let corrupt = Code(.corrupt)
        /// An entry name could leave the destination (`..`, absolute, backslash, NUL, control characters).
        public static let unsafeEntryName = Code(.unsafeEntryName)
        /// An entry is a symlink, hard link, device, fifo or socket.
        public static let forbiddenEntryType = Code(.forbiddenEntryType)
        /// Two entries share one name, or one name is used both as a file and as a folder.
        public static let duplicateEntry = Code(.duplicateEntry)
        /// The archive would inflate past the caller's byte limit or has too many entries.
        public static let sizeLimitExceeded = Code(.sizeLimitExceeded)
        /// An entry is encrypted; encrypted archives are not supported.
        public static let encryptedEntry = Code(.encryptedEntry)
        /// The destination folder is missing, not a folder, or not empty.
        public static let invalidDestination = Code(.invalidDestination)
        /// A system call failed while writing; `errno` holds the cause (e.g. `ENOSPC`).
        public static let io = Code(.io)
        /// The caller cancelled the operation.
        public static let cancelled = Code(.cancelled)

        /// The code's name, e.g. `unsafeEntryName`.
        public var description: String { base.rawValue }
    }

    /// What kind of failure this is.
    public var code: Code
    /// What went wrong, naming the input, and how to fix it.
    public var message: String
    /// The system error number, for failures of system calls.
    public var errno: Int32?
    /// The error that caused this one, if any.
    public var underlying: (any Error)?

    /// Makes an error; prefer the static helpers inside the module.
    public init(code: Code, message: String, errno: Int32? = nil, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.errno = errno
        self.underlying = underlying
    }

    /// The code and the message, e.g. `ArchiveError.io: writing 'a.bin' into /dest: …`.
    public var description: String { "ArchiveError.\(code): \(message)" }
}

extension ArchiveError {
    /// The archive at `path` holds `count` entries, more than `options` allow.
    static func tooManyEntries(_ path: String, count: Int, options: ZipExtractionOptions) -> ArchiveError {
        ArchiveError(
            code: .sizeLimitExceeded,
            message:
                "\(path) has \(count) entries, more than the limit of \(options.maxEntries); refusing the archive (raise ZipExtractionOptions.maxEntries if it is genuine)"
        )
    }

    /// A failed system call, with `strerror` text and a remedy chosen from the errno.
    static func io(_ what: String, errno code: Int32) -> ArchiveError {
        ArchiveError(code: .io, message: "\(what): \(systemMessage(code)); \(remedy(forErrno: code))", errno: code)
    }

    static func systemMessage(_ code: Int32) -> String {
        String(cString: strerror(code))
    }

    private static func remedy(forErrno code: Int32) -> String {
        switch code {
        case ENOSPC: "free space and retry"
        case EDQUOT: "raise the disk quota or free space and retry"
        case EACCES, EPERM, EROFS: "check that the folder is writable and retry"
        case EMFILE, ENFILE: "raise the open-file limit or use fewer workers"
        case ENAMETOOLONG: "use a shorter destination path"
        default: "check the destination folder and retry"
        }
    }
}
