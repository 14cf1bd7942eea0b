import Archive
import FileKit
import Foundation
import StorageFormat
import Transport

/// Why an update failed. The message names the input at fault and what to do about it; the
/// local content is always left at its last good version.
public struct SyncError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare against the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable, CaseIterable {
            case invalidStatus, invalidUpdateList, invalidChangeList, unsafePath, insufficientSpace
            case network, archive, fileSystem, stateStore, cancelled, connectionNotAllowed, configuration, integrity,
                signature
            case busy, decoding, vetoed
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// Every code, in a stable order (a monitor that starts each failure series at 0).
        public static var allCases: [Code] { Base.allCases.map(Code.init) }

        /// The code whose ``description`` is `name`, e.g. when read back from the state database.
        public init?(name: String) {
            guard let base = Base(rawValue: name) else { return nil }
            self.base = base
        }

        /// `cacheStatus.json` is missing, malformed, or lacks a required field.
        public static let invalidStatus = Code(.invalidStatus)
        /// `listOfURLsToUpdatesByVersion.json` is malformed.
        public static let invalidUpdateList = Code(.invalidUpdateList)
        /// A `changes_A_B.json` is malformed or contradicts itself.
        public static let invalidChangeList = Code(.invalidChangeList)
        /// A change path or archive entry would leave the content folder.
        public static let unsafePath = Code(.unsafePath)
        /// The filesystem lacks the room the storage declares it needs.
        public static let insufficientSpace = Code(.insufficientSpace)
        /// A download failed (HTTP error, connection loss, timeout).
        public static let network = Code(.network)
        /// The archive is corrupt, hostile or larger than declared.
        public static let archive = Code(.archive)
        /// A local file operation failed.
        public static let fileSystem = Code(.fileSystem)
        /// The state database could not be read or written.
        public static let stateStore = Code(.stateStore)
        /// The update was cancelled or suspended.
        public static let cancelled = Code(.cancelled)
        /// The connection policy forbade transfers.
        public static let connectionNotAllowed = Code(.connectionNotAllowed)
        /// Something downloaded does not match the hash or size the storage published for it.
        public static let integrity = Code(.integrity)
        /// The status's signature is missing, malformed, expired, wrong, or from a key the
        /// configuration does not trust (``SyncConfiguration/trustedSigningKeys``).
        public static let signature = Code(.signature)
        /// The configuration itself is wrong (bad base URL, content folder in a bad place).
        public static let configuration = Code(.configuration)
        /// Another update, verify or reset of the same content folder is running, in this process
        /// or another; wait for it to finish or stop it.
        public static let busy = Code(.busy)
        /// A synced file does not decode as the type asked for, or is not UTF-8 text
        /// (``CacheManager/decode(_:at:using:)``, ``CacheManager/string(at:)``).
        public static let decoding = Code(.decoding)
        /// ``SyncConfiguration/beforeSwitch`` threw: the switch to the new version was refused
        /// and the folder stays at its version. The next update asks again.
        public static let vetoed = Code(.vetoed)

        /// The code's name, e.g. `network`: what ``init(name:)`` reads back.
        public var description: String { base.rawValue }
    }

    /// What kind of failure this is: branch on it, never on ``message``.
    public var code: Code
    /// What went wrong, naming the input at fault and what to do about it.
    public var message: String
    /// The error that caused this one, if any: a `FileSystemError` with its syscall, errno and
    /// path, a `TransportError`, a decoding error, …
    public var underlying: (any Error)?
    /// The configuration setting at fault, when one is: a front end names its own option for
    /// it (the library's messages name none).
    public var setting: SyncConfiguration.Setting?
    /// What the caller can do about it, when the library knows: a front end names its own
    /// command for it, as with ``setting``.
    public var remedy: Remedy?

    /// A step that gets past an error, which a front end can offer under its own name.
    public enum Remedy: Sendable, Equatable {
        /// Forget the folder's state and delete its content (``CacheManager/reset()``), then sync
        /// again: the next update restores from the archive.
        case reset
    }

    /// An error with every field given. A URL's password or token in `message` is redacted
    /// (`Redaction`): messages reach logs, the state database and `status`.
    public init(code: Code, message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = Redaction.text(message)
        self.underlying = underlying
    }

    /// `code: message (cause)`; the cause is left out when the message already quotes it. URLs
    /// in it have their user info redacted, the cause's too (a document error quotes its URL).
    public var description: String {
        let message = Redaction.text(message)
        guard let underlying else { return "\(code): \(message)" }
        let cause = Redaction.text("\(underlying)")
        return message.contains(cause) ? "\(code): \(message)" : "\(code): \(message) (\(cause))"
    }
}

extension SyncError {
    /// A failed file operation, keeping the system's words (its `FileSystemError` is the
    /// ``underlying`` error). A full disk is ``Code/insufficientSpace``.
    public init(_ error: FileSystemError) {
        self.init(
            code: error.code == .noSpace ? .insufficientSpace : .fileSystem, message: error.description,
            underlying: error)
    }

    /// A storage document refused, with the same code family.
    public init(_ error: StorageFormatError) {
        let code: Code =
            switch error.code {
            case .invalidStatus: .invalidStatus
            case .invalidUpdateList: .invalidUpdateList
            case .invalidChangeList: .invalidChangeList
            case .unsafePath: .unsafePath
            case .integrity: .integrity
            case .signature: .signature
            default: .configuration
            }
        self.init(code: code, message: error.message, underlying: error)
    }

    static func fileSystem(_ operation: String, path: String, syscall: String, errno code: Int32) -> SyncError {
        SyncError(FileSystemError(operation, path: path, syscall: syscall, errno: code))
    }
}

/// Runs file work that fails with a ``FileSystemError`` inside an update step.
func fileWork<T: ~Copyable>(_ body: () throws(FileSystemError) -> T) throws(SyncError) -> T {
    do {
        return try body()
    } catch {
        throw SyncError(error)
    }
}

/// Runs document work that fails with a ``StorageFormatError`` inside an update step.
func formatWork<T>(_ body: () throws(StorageFormatError) -> T) throws(SyncError) -> T {
    do {
        return try body()
    } catch {
        throw SyncError(error)
    }
}

/// ``formatWork(_:)`` for a document of `bytes` bytes: on the blocking pool when it is large
/// (1 MiB and up). Hashing and parsing the content manifest of 100,000 files took seconds of a
/// debug build's CPU, and on a cooperative thread it held every other task of the process (two
/// storages repairing drift held both of `watch`'s, and `/healthz` called them stalled).
func documentWork<T: Sendable>(bytes: Int, _ body: @escaping @Sendable () throws(StorageFormatError) -> T)
    async throws(SyncError) -> T
{
    if bytes < 1 << 20 { return try formatWork(body) }
    return try await BlockingWork.run { () throws(SyncError) in try formatWork(body) }
}

/// Blocking work for an update, on the shared ``BlockingIOPool``: never on a cooperative thread.
enum BlockingWork {
    /// Runs `body` on the pool.
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws(SyncError) -> T) async throws(SyncError) -> T {
        try await BlockingIOPool.shared.run(body)
    }

    /// Runs file work on the pool, turning its ``FileSystemError`` into a ``SyncError``.
    static func files<T: Sendable>(_ body: @escaping @Sendable () throws(FileSystemError) -> T) async throws(SyncError)
        -> T
    {
        do {
            return try await BlockingIOPool.shared.run(body)
        } catch {
            throw SyncError(error)
        }
    }
}

extension SyncError {
    /// Any error as a ``SyncError``: transport failures keep their message and cause.
    static func wrap(_ error: any Error, context: String? = nil) -> SyncError {
        if let error = error as? SyncError { return error }
        if let error = error as? StorageFormatError { return SyncError(error) }
        if let error = error as? FileSystemError { return SyncError(error) }
        let prefix = context.map { "\($0): " } ?? ""
        if let error = error as? TransportError {
            switch error.code {
            case .cancelled:
                return SyncError(
                    code: .cancelled, message: "the update was cancelled; run it again to continue where it stopped",
                    underlying: error)
            case .fileSystem:
                return SyncError(
                    code: error.errno == ENOSPC ? .insufficientSpace : .fileSystem, message: prefix + error.message,
                    underlying: error)
            case .tooLarge:
                // A file over its declared size, or a document over the in-memory cap: the
                // storage's contents are at fault, not the network.
                return SyncError(code: .integrity, message: prefix + error.message, underlying: error)
            case .invalidResponse:
                // The hosting (or a proxy in front of it) answered something other than what was
                // asked; the storage's documents may be fine. The transport's message says what.
                return SyncError(code: .network, message: prefix + error.message, underlying: error)
            case .httpStatus where error.statusCode == 404:
                return SyncError(
                    code: .network,
                    message: prefix + error.message
                        + "; is the base URL right, and was the storage uploaded completely?",
                    underlying: error)
            default:
                return SyncError(code: .network, message: prefix + error.message, underlying: error)
            }
        }
        if let error = error as? ArchiveError {
            if error.code == .cancelled {
                return SyncError(
                    code: .cancelled, message: "the update was cancelled; run it again to continue where it stopped",
                    underlying: error)
            }
            let code: SyncError.Code =
                error.errno == ENOSPC ? .insufficientSpace : (error.code == .unsafeEntryName ? .unsafePath : .archive)
            return SyncError(code: code, message: prefix + error.message, underlying: error)
        }
        if error is CancellationError {
            return SyncError(
                code: .cancelled, message: "the update was cancelled; run it again to continue where it stopped",
                underlying: error)
        }
        return SyncError(code: .fileSystem, message: prefix + "\(error)", underlying: error)
    }
}

extension SyncError.Code: Codable {
    /// Reads a code from its name (``description``).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let name = try container.decode(String.self)
        guard let code = Self(name: name) else {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "'\(name)' is no SyncError code")
        }
        self = code
    }

    /// Writes the code as its name (``description``), e.g. `"network"`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
