import Archive
import FileKit
import StorageFormat

/// Why ``ChangeDiffer`` could not express a new version as a change list. The message names the
/// paths at fault and what the publisher can do about them.
public struct ChangeDifferError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure this is. Compare against the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case fileWithoutExtension, emptyFolderWithExtension, invalidTree, unreplayable
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A new file must be downloaded, but its name has no extension, so the client would
        /// create a folder instead.
        public static let fileWithoutExtension = Code(.fileWithoutExtension)
        /// A new empty folder must be created, but its name has an extension, so the client would
        /// download a file instead.
        public static let emptyFolderWithExtension = Code(.emptyFolderWithExtension)
        /// A tree names one path as both a file and a folder, or names the root as a file.
        public static let invalidTree = Code(.invalidTree)
        /// The computed list does not replay to the new tree. This is a bug in ``ChangeDiffer``;
        /// the list is withheld rather than published wrong.
        public static let unreplayable = Code(.unreplayable)

        /// The code's name, e.g. `fileWithoutExtension`.
        public var description: String { base.rawValue }
    }

    /// What kind of failure this is.
    public var code: Code
    /// What went wrong, naming the paths and the remedy.
    public var message: String
    /// The paths at fault, sorted.
    public var paths: [SafeRelativePath]
    /// The error that caused this one, if any.
    public var underlying: (any Error)?

    /// An error with a code, a message naming the paths at fault, and an optional cause.
    public init(code: Code, message: String, paths: [SafeRelativePath] = [], underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.paths = paths
        self.underlying = underlying
    }

    /// The message.
    public var description: String { message }
}
