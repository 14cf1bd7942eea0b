import Foundation

/// Why an update failed. The message names the input at fault and what to do about it; the
/// local content is always left at its last good version.
public struct SyncError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare against the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidStatus, invalidUpdateList, invalidChangeList, unsafePath, insufficientSpace
            case network, archive, fileSystem, stateStore, cancelled, connectionNotAllowed, configuration, integrity
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

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
        /// The configuration itself is wrong (bad base URL, content folder in a bad place).
        public static let configuration = Code(.configuration)

        public var description: String { base.rawValue }
    }

    public var code: Code
    public var message: String
    public var underlying: (any Error)?

    public init(code: Code, message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    public var description: String { message }
}

extension SyncError {
    static func fileSystem(_ what: String, path: String, errno code: Int32) -> SyncError {
        let reason = String(cString: strerror(code))
        let remedy = code == ENOSPC ? "; free disk space and run the update again"
            : (code == EACCES || code == EPERM ? "; check the folder's permissions" : "")
        return SyncError(code: code == ENOSPC ? .insufficientSpace : .fileSystem,
                         message: "\(what) \(path): \(reason)\(remedy)")
    }
}
