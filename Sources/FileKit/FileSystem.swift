import Foundation

/// Path operations that take paths of any length (``LongPath``), never follow a symlink at the
/// last component, and fail with a ``FileSystemError`` that names the call.
public enum FileSystem {
    /// The `lstat` of `path` (a symlink's own, never its target's), or nil when it cannot be read.
    public static func status(of path: String) -> stat? {
        (try? LongPath.at(path) { folder, rest throws(FileSystemError) -> stat? in
            var info = stat()
            return fstatat(folder, rest, &info, AT_SYMLINK_NOFOLLOW) == 0 ? info : nil
        }) ?? nil
    }

    /// The status-change time (`st_ctim`) of `info` in nanoseconds since the Unix epoch: it moves
    /// whenever anything changes the inode (for a folder: an entry added, removed or renamed), and
    /// no call can set it back.
    public static func changeTime(_ info: stat) -> Int64 {
        info.st_ctim.nanoseconds
    }

    /// Device and inode of `path` (not following a symlink), or nil when it does not exist.
    public static func identity(of path: String) -> (device: Int64, inode: Int64)? {
        guard let info = status(of: path) else { return nil }
        return (Int64(bitPattern: UInt64(info.st_dev)), Int64(bitPattern: UInt64(info.st_ino)))
    }

    /// Removes what is at `path` unless it is a plain file: a symlink, a special file, a folder
    /// or a file with other hard links (the name only, never a link's target or the other names'
    /// file). For a file the program writes again by name (a partial download, its sidecar):
    /// opened as it is, a link planted there would have the write land outside. Nothing there,
    /// or a regular file with one link, is left alone.
    public static func removeUnlessPlainFile(_ path: String) throws(FileSystemError) {
        guard let info = status(of: path) else { return }
        guard info.st_mode & S_IFMT != S_IFREG || info.st_nlink > 1 else { return }
        try removeTree(path)
    }

    /// Whether anything (a symlink included) is at `path`.
    public static func exists(_ path: String) -> Bool {
        identity(of: path) != nil
    }

    /// Creates the folder `path`; an existing folder is fine, anything else in the way is an error.
    public static func makeFolder(_ path: String) throws(FileSystemError) {
        try LongPath.at(path) { folder, rest throws(FileSystemError) in
            if mkdirat(folder, rest, 0o755) != 0 {
                let code = errno
                var info = stat()
                if code == EEXIST, fstatat(folder, rest, &info, AT_SYMLINK_NOFOLLOW) == 0,
                    info.st_mode & S_IFMT == S_IFDIR
                {
                    return
                }
                throw FileSystemError("cannot create folder", path: path, syscall: "mkdirat", errno: code)
            }
        }
    }

    /// Deletes a file or a folder tree without following symlinks. Missing is fine.
    public static func removeTree(_ path: String) throws(FileSystemError) {
        try TreeRemoval.remove(path)
    }

    /// Renames `source` to `target` (both may be longer than the kernel takes in one piece).
    /// `operation` says what the rename is for, in messages.
    public static func rename(_ source: String, to target: String, operation: String) throws(FileSystemError) {
        try LongPath.at(source) { sourceFolder, sourceRest throws(FileSystemError) in
            try LongPath.at(target) { targetFolder, targetRest throws(FileSystemError) in
                if renameat(sourceFolder, sourceRest, targetFolder, targetRest) != 0 {
                    throw FileSystemError(operation, path: target, syscall: "renameat", errno: errno)
                }
            }
        }
    }

    /// Hard-links `source` to `target`, copying when the filesystem refuses links. An existing
    /// target is kept (a resumed run linked it already).
    public static func linkOrCopy(_ source: String, _ target: String) throws(FileSystemError) {
        try LongPath.at(source) { sourceFolder, sourceRest throws(FileSystemError) in
            try LongPath.at(target) { targetFolder, targetRest throws(FileSystemError) in
                try linkOrCopy(sourceFolder, sourceRest, targetFolder, targetRest, shownAs: (source, target))
            }
        }
    }

    /// ``linkOrCopy(_:_:)`` of `sourceName` in the open folder `sourceFolder` (or `AT_FDCWD`) to
    /// `targetName` in `targetFolder`; `names` are the whole paths, for messages.
    static func linkOrCopy(
        _ sourceFolder: Int32, _ sourceName: String, _ targetFolder: Int32, _ targetName: String,
        shownAs names: (source: String, target: String)
    ) throws(FileSystemError) {
        if linkat(sourceFolder, sourceName, targetFolder, targetName, 0) == 0 { return }
        let code = errno
        if code == EEXIST { return }
        guard code == EXDEV || code == EPERM || code == EMLINK || code == ENOTSUP else {
            throw FileSystemError("cannot link \(names.source) to", path: names.target, syscall: "linkat", errno: code)
        }
        try copy(sourceFolder, sourceName, to: targetFolder, targetName, shownAs: names)
    }

    /// Copies a regular file's bytes (mode 0644), for filesystems without hard links.
    private static func copy(
        _ sourceFolder: Int32, _ source: String, to targetFolder: Int32, _ target: String,
        shownAs names: (source: String, target: String)
    ) throws(FileSystemError) {
        let input = openat(sourceFolder, source, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard input >= 0 else {
            throw FileSystemError("cannot copy", path: names.source, syscall: "openat", errno: errno)
        }
        defer { close(input) }
        let output = openat(targetFolder, target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard output >= 0 else {
            if errno == EEXIST { return }
            throw FileSystemError("cannot copy \(names.source) to", path: names.target, syscall: "openat", errno: errno)
        }
        defer { close(output) }
        do {
            try FileCopy.copy(from: input, to: output, shownFrom: names.source, shownTo: names.target)
        } catch {
            unlinkat(targetFolder, target, 0)
            throw error
        }
    }

    /// `path` made absolute against the working folder, with `~` expanded, `.` and `..`
    /// resolved by name (symlinks are not followed) and no trailing slash.
    public static func absolutePath(_ path: String) -> String {
        let expanded = (path as NSString).expandingTildeInPath
        let absolute = expanded.hasPrefix("/") ? expanded : FileManager.default.currentDirectoryPath + "/" + expanded
        var standardized = (absolute as NSString).standardizingPath
        while standardized.count > 1 && standardized.hasSuffix("/") { standardized.removeLast() }
        return standardized
    }

    /// The absolute `path` with every symlink of its existing part resolved, and `.` and `..`
    /// applied to the part that does not exist yet: where a file made there would be.
    public static func canonicalPath(_ path: String) -> String {
        var existing = path
        var rest: [String] = []
        while true {
            if let resolved = realpath(existing, nil) {
                defer { free(resolved) }
                var parts = String(cString: resolved).split(separator: "/").map(String.init)
                for component in rest.reversed() {
                    switch component {
                    case "", ".": continue
                    case "..": if !parts.isEmpty { parts.removeLast() }
                    default: parts.append(component)
                    }
                }
                return "/" + parts.joined(separator: "/")
            }
            let parent = (existing as NSString).deletingLastPathComponent
            if parent == existing || parent.isEmpty { return path }
            rest.append((existing as NSString).lastPathComponent)
            existing = parent
        }
    }

    /// Whether `path` is `folder` or lies below it (both canonical: ``canonicalPath(_:)``).
    public static func path(_ path: String, isWithin folder: String) -> Bool {
        path == folder || path.hasPrefix(folder == "/" ? "/" : folder + "/")
    }
}

extension timespec {
    /// The time in nanoseconds since the Unix epoch, wrapping past 2262: ext4 keeps times to 2446
    /// and tmpfs to 2⁶³ seconds, and anyone who can write a file can set its time there
    /// (`touch -d 2400-01-01`). Identities only compare these for equality, so a wrapped value
    /// serves as well, and never traps.
    package var nanoseconds: Int64 {
        Int64(tv_sec) &* 1_000_000_000 &+ Int64(tv_nsec)
    }
}
