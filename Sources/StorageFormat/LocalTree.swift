import FileKit
import Foundation

/// The files and folders of a content folder: what the planner starts from.
public struct LocalTree: Sendable, Equatable {
    /// Every folder, by content path (the root not included).
    public var folders: Set<SafeRelativePath>
    /// Every regular file, by content path.
    public var files: Set<SafeRelativePath>
    /// Entries that cannot be content (symlinks, special files, names that are not UTF-8 or
    /// break the path rules): local drift, left out of every plan, so the next version drops them.
    package var intruders: [Intruder] = []

    /// A tree of these folders and files (default none), with no intruders.
    public init(folders: Set<SafeRelativePath> = [], files: Set<SafeRelativePath> = []) {
        self.folders = folders
        self.files = files
    }
}
