import Archive
import Foundation

/// Folder trees handled by the raw bytes of their names, for the publisher's own folders (the
/// snapshot of `--content`, the work folder): a name that is not UTF-8 is copied and deleted as
/// it is, never "repaired" into another name that then cannot be found.
///
/// Paths are byte arrays relative to a root, without a trailing NUL (`[]` is the root). Walks
/// keep one folder open at a time, so deep trees cost no descriptors.
enum RawTree {
    /// The entries of `root/folder` with their file type (`lstat`), read completely before the
    /// folder is closed.
    static func entries(_ root: String, _ folder: [UInt8]) throws(SyncError) -> [(name: [UInt8], type: mode_t)] {
        let path = join(root, folder)
        guard let handle = withCPath(path, { opendir($0) }) else {
            throw SyncError.fileSystem("cannot read folder", path: shown(path), errno: errno)
        }
        defer { closedir(handle) }
        let fd = dirfd(handle)
        var result: [(name: [UInt8], type: mode_t)] = []
        while true {
            errno = 0
            guard let entry = readdir(handle) else {
                if errno != 0 { throw SyncError.fileSystem("cannot read folder", path: shown(path), errno: errno) }
                break
            }
            if DirectoryEntryName.isDotOrDotDot(entry) { continue }
            var info = stat()
            guard fstatat(fd, DirectoryEntryName.pointer(entry), &info, AT_SYMLINK_NOFOLLOW) == 0 else {
                if errno == ENOENT { continue }
                throw SyncError.fileSystem("cannot read", path: shown(path) + "/" + shown(Array(DirectoryEntryName.bytes(entry))), errno: errno)
            }
            result.append((Array(DirectoryEntryName.bytes(entry)), info.st_mode & S_IFMT))
        }
        return result
    }

    /// Deletes a file or a folder tree at `path` without following symlinks. Missing is fine.
    static func remove(_ path: String) throws(SyncError) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            if unlink(path) != 0 && errno != ENOENT { throw SyncError.fileSystem("cannot delete", path: path, errno: errno) }
            return
        }
        // Files go as they are found; folders once emptied, deepest first.
        var folders: [[UInt8]] = [[]]
        var pending: [[UInt8]] = [[]]
        while let folder = pending.popLast() {
            for (name, type) in try entries(path, folder) {
                let child = appending(folder, name)
                if type == S_IFDIR {
                    folders.append(child)
                    pending.append(child)
                } else if withCPath(join(path, child), { unlink($0) }) != 0 && errno != ENOENT {
                    throw SyncError.fileSystem("cannot delete", path: shown(join(path, child)), errno: errno)
                }
            }
        }
        for folder in folders.reversed() where withCPath(join(path, folder), { rmdir($0) }) != 0 && errno != ENOENT {
            throw SyncError.fileSystem("cannot delete folder", path: shown(join(path, folder)), errno: errno)
        }
    }

    // MARK: - Byte paths

    static func appending(_ folder: [UInt8], _ name: [UInt8]) -> [UInt8] {
        folder.isEmpty ? name : folder + [0x2F] + name
    }

    /// `root` + "/" + `relative`, NUL-terminated.
    static func join(_ root: String, _ relative: [UInt8]) -> [UInt8] {
        var path = Array(root.utf8)
        if !relative.isEmpty {
            path.append(0x2F)
            path += relative
        }
        path.append(0)
        return path
    }

    /// Calls `body` with a NUL-terminated byte path as a C string.
    static func withCPath<T>(_ path: [UInt8], _ body: (UnsafePointer<CChar>) -> T) -> T {
        path.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { body($0.baseAddress!) }
        }
    }

    /// A path for a message (bytes that are not UTF-8 shown as U+FFFD).
    static func shown(_ path: [UInt8]) -> String {
        String(decoding: path.last == 0 ? path.dropLast() : path[...], as: UTF8.self)
    }
}
