import Foundation

/// Deletes files and folder trees without following symlinks, with a constant number of open
/// descriptors however deep the tree is, and by raw name, so an entry whose name is not UTF-8 is
/// deleted like any other (a `String` of it would name a file that does not exist).
public enum TreeRemoval {
    /// Deletes the file or folder tree at `path`. Missing is fine.
    public static func remove(_ path: String) throws(FileSystemError) {
        try LongPath.at(path) { folder, rest throws(FileSystemError) in
            try remove(Array(rest.utf8), in: folder, shownAs: path)
        }
    }

    /// Deletes the entry `name` (raw bytes, one component or a relative path) of the open folder
    /// `parent`. Missing is fine.
    public static func remove(_ name: [UInt8], in parent: Int32, shownAs path: String) throws(FileSystemError) {
        var info = stat()
        let found = name.withCString { fstatat(parent, $0, &info, AT_SYMLINK_NOFOLLOW) }
        guard found == 0 else {
            if errno == ENOENT { return }
            throw FileSystemError("cannot delete", path: path, syscall: "fstatat", errno: errno)
        }
        if info.st_mode & S_IFMT == S_IFDIR {
            let opened = name.withCString { openat(parent, $0, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
            guard opened >= 0 else {
                if errno == ENOENT { return }
                throw FileSystemError("cannot read folder", path: path, syscall: "openat", errno: errno)
            }
            var cursor = try FolderCursor(adopting: opened, shownAs: path)
            try empty(&cursor)
            if name.withCString({ unlinkat(parent, $0, AT_REMOVEDIR) }) != 0 && errno != ENOENT {
                throw FileSystemError("cannot delete folder", path: path, syscall: "unlinkat", errno: errno)
            }
        } else if name.withCString({ unlinkat(parent, $0, 0) }) != 0 && errno != ENOENT {
            throw FileSystemError("cannot delete", path: path, syscall: "unlinkat", errno: errno)
        }
    }

    /// Deletes everything inside the folder at `path`, keeping the folder. Missing is fine.
    public static func removeContents(of path: String) throws(FileSystemError) {
        guard var cursor = try FolderCursor(at: path) else { return }
        try empty(&cursor)
    }

    /// Empties the cursor's folder depth first: files as each folder is read, then each
    /// subfolder once it is empty. The cursor ends where it started.
    private static func empty(_ cursor: inout FolderCursor) throws(FileSystemError) {
        /// A folder being emptied: its name in its parent, and its subfolders still to empty.
        struct Frame {
            var name: [UInt8]
            var subfolders: [[UInt8]]
        }
        var frames = [Frame(name: [], subfolders: try unlinkFiles(in: cursor))]
        while let top = frames.indices.last {
            if let next = frames[top].subfolders.popLast() {
                if try cursor.descend(into: next) {
                    frames.append(Frame(name: next, subfolders: try unlinkFiles(in: cursor)))
                } else if next.withCString({ unlinkat(cursor.descriptor, $0, 0) }) != 0 && errno != ENOENT {
                    // It stopped being a folder after it was read (a symlink put in its place).
                    throw FileSystemError(
                        "cannot delete '\(EscapedName.text(next))' below", path: cursor.shownAs, syscall: "unlinkat",
                        errno: errno)
                }
                continue
            }
            let done = frames.removeLast()
            guard !frames.isEmpty else { return }
            try cursor.ascend()
            if done.name.withCString({ unlinkat(cursor.descriptor, $0, AT_REMOVEDIR) }) != 0 && errno != ENOENT {
                throw FileSystemError(
                    "cannot delete folder '\(EscapedName.text(done.name))' below", path: cursor.shownAs,
                    syscall: "unlinkat", errno: errno)
            }
        }
    }

    /// Unlinks every non-folder in the cursor's folder; returns its subfolders' names.
    private static func unlinkFiles(in cursor: borrowing FolderCursor) throws(FileSystemError) -> [[UInt8]] {
        var subfolders: [[UInt8]] = []
        for entry in try cursor.entries() {
            if entry.isFolder {
                subfolders.append(entry.name)
            } else if entry.name.withCString({ unlinkat(cursor.descriptor, $0, 0) }) != 0 && errno != ENOENT {
                throw FileSystemError(
                    "cannot delete '\(EscapedName.text(entry.name))' below", path: cursor.shownAs, syscall: "unlinkat",
                    errno: errno)
            }
        }
        return subfolders
    }
}
