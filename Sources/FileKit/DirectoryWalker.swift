import Foundation

/// The one folder walk: every entry below a folder, without following symlinks. The local tree
/// scan, the staged-tree check, `verify` and the publisher's hashing scan all read folders
/// through it.
///
/// It walks with a ``FolderCursor``: two descriptors (the cursor's and a moment's copy to read
/// it) whatever the depth, and names relative to the open folder, never long paths.
public enum DirectoryWalker {
    /// What one entry is.
    public enum Entry {
        /// A folder (not a symlink to one); the walk enters it after its siblings are visited.
        case folder(SafeRelativePath)
        /// A regular file, with the identity its `lstat` gave (no second lookup needed).
        case file(SafeRelativePath, FileIdentity)
        /// A symlink, device, fifo or socket (`mode` is its `st_mode`).
        case special(SafeRelativePath, mode: mode_t)
        /// A name the path rules refuse (a backslash, a control character, a path over 4,095
        /// bytes). Folders with such names are not entered.
        case unsafeName(String, in: SafeRelativePath, SafePathError)
        /// A name that is not UTF-8, as raw bytes: no content path can name it. Not entered.
        case undecodableName([UInt8], in: SafeRelativePath)
    }

    /// Calls `visit` for every entry below `directory`, parents before children. A missing
    /// `directory` is an empty walk.
    public static func walk(_ directory: String, _ visit: (Entry) throws(FileSystemError) -> Void)
        throws(FileSystemError)
    {
        try walkStamped(directory) { entry, _, _ throws(FileSystemError) in try visit(entry) }
    }

    /// ``walk(_:_:)``, giving each regular file's and folder's ``FileStamp`` too, as its parent's
    /// listing read it (nil for other entries), and the open descriptor of the entry's folder,
    /// valid during the call only: read a file through it
    /// (``FileDigest/sha256(ofEntry:in:expecting:shownAs:)``), never through a path that a folder
    /// swapped for a symlink could lead out of the tree.
    ///
    /// `leaving` is called for each folder entered (the top one as ``SafeRelativePath/root``)
    /// once everything below it has been visited: children before parents, as a bottom-up
    /// digest needs. A folder that vanished or became something else before it was entered is
    /// visited but never left.
    ///
    /// `sorted`: each folder's entries are visited, and its subfolders entered, in the byte order
    /// of their names rather than as the folder lists them, so what the walk hands on arrives
    /// nearly in path order (a B-tree written from it is written nearly in key order).
    public static func walkStamped(
        _ directory: String, sorted: Bool = false,
        leaving: (SafeRelativePath) throws(FileSystemError) -> Void = { _ in },
        _ visit: (Entry, FileStamp?, Int32) throws(FileSystemError) -> Void
    ) throws(FileSystemError) {
        guard var cursor = try FolderCursor(at: directory) else { return }
        /// A folder being walked: its path, that path's length in bytes, and the subfolders still to enter.
        struct Frame {
            var path: SafeRelativePath
            var length: Int
            var subfolders: [String]
        }
        var frames = [
            Frame(
                path: .root, length: 0,
                subfolders: try visitEntries(of: cursor, at: .root, length: 0, sorted: sorted, visit))
        ]
        while let top = frames.indices.last {
            guard let name = frames[top].subfolders.popLast() else {
                let left = frames.removeLast().path
                try leaving(left)
                if !frames.isEmpty { try cursor.ascend() }
                continue
            }
            guard try cursor.descend(into: Array(name.utf8)) else { continue }
            let path = frames[top].path.appending(try! SafeRelativePath(validating: name))
            let length = frames[top].length == 0 ? name.utf8.count : frames[top].length + 1 + name.utf8.count
            frames.append(
                Frame(
                    path: path, length: length,
                    subfolders: try visitEntries(of: cursor, at: path, length: length, sorted: sorted, visit)))
        }
    }

    /// The names in one folder that are UTF-8 (others cannot be named by a `String`; use a
    /// ``FolderCursor`` for those). A missing folder has none.
    public static func names(in path: String) throws(FileSystemError) -> [String] {
        guard let cursor = try FolderCursor(at: path) else { return [] }
        return try cursor.entries().compactMap { String(validating: $0.name, as: UTF8.self) }
    }

    /// Visits the entries of the folder at `cursor` (whose path is `folder`, `length` bytes long)
    /// and returns the names of the subfolders to enter.
    private static func visitEntries(
        of cursor: borrowing FolderCursor, at folder: SafeRelativePath, length: Int, sorted: Bool,
        _ visitInFolder: (Entry, FileStamp?, Int32) throws(FileSystemError) -> Void
    ) throws(FileSystemError) -> [String] {
        let folderDescriptor = cursor.descriptor
        func visit(_ entry: Entry, _ stamp: FileStamp?) throws(FileSystemError) {
            try visitInFolder(entry, stamp, folderDescriptor)
        }
        var subfolders: [String] = []
        var entries = try cursor.entries()
        if sorted { entries.sort { $0.name.lexicographicallyPrecedes($1.name) } }
        for entry in entries {
            guard let name = String(validating: entry.name, as: UTF8.self) else {
                try visit(.undecodableName(entry.name, in: folder), nil)
                continue
            }
            let child: SafeRelativePath
            do throws(SafePathError) {
                let childLength = length == 0 ? entry.name.count : length + 1 + entry.name.count
                if childLength > SafeRelativePath.maxPathBytes {
                    throw SafePathError(path: folder.isRoot ? name : folder.string + "/" + name, reason: .tooLong)
                }
                child = folder.appending(try SafeRelativePath(validating: name))
            } catch {
                try visit(.unsafeName(name, in: folder, error), nil)
                continue
            }
            switch entry.info.st_mode & S_IFMT {
            case S_IFDIR:
                try visit(.folder(child), FileStamp(entry.info))
                subfolders.append(name)
            case S_IFREG:
                let stamp = FileStamp(entry.info)
                try visit(.file(child, stamp.identity), stamp)
            default:
                try visit(.special(child, mode: entry.info.st_mode), nil)
            }
        }
        // Entered last first: reversed, so folders are entered in the order they were read.
        return subfolders.reversed()
    }
}
