import FileKit
import Foundation

/// The files and folders of a content folder: what the planner starts from.
public struct LocalTree: Sendable, Equatable {
    public var folders: Set<SafeRelativePath>
    public var files: Set<SafeRelativePath>
    /// Entries that cannot be content (symlinks, special files, names that are not UTF-8 or
    /// break the path rules): local drift, left out of every plan, so the next version drops them.
    package var intruders: [Intruder] = []

    public init(folders: Set<SafeRelativePath> = [], files: Set<SafeRelativePath> = []) {
        self.folders = folders
        self.files = files
    }
}
