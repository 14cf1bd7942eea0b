import GRDBSQLite

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Database paths that lead through a folder's open descriptor, so SQLite opens its files in
/// the folder that was checked, not in whatever a neighbour renamed to the folder's name since.
///
/// The path is `/proc/self/fd/<descriptor>/<name>`: the kernel resolves it through the
/// descriptor, and SQLite makes `-wal`, `-shm` and `-journal` beside it the same way. SQLite
/// (3.35 and later) resolves the links on a database's path by itself, and would turn
/// `/proc/self/fd/N` back into the folder's path text, with the old race. So the unix VFS's
/// `lstat` is replaced once, for the whole process, by one that reports `/proc/self` and
/// `/proc/self/fd/<digits>` as what they lead to (`stat`); every other path is `lstat`'s as before.
/// An item cache whose folder's parent another user may write had that user's index read, and a
/// linked `index.sqlite` in the swapped-in folder written to.
///
/// Whoever uses such a path keeps the descriptor open for as long as any connection on it is:
/// a connection that outlived it would find another file under the same number.
public enum HeldFolderPath {
    /// The path of `name` in the folder open as `descriptor`, for SQLite to open; nil where this
    /// process's SQLite would not keep it (no `/proc`, or a VFS without system-call overrides),
    /// and the caller falls back to the folder's path.
    public static func path(_ name: String, inFolder descriptor: Int32) -> String? {
        guard descriptor >= 0, isKept else { return nil }
        return "/proc/self/fd/\(descriptor)/\(name)"
    }

    /// Whether SQLite keeps descriptor paths as they are: the override is in place, and the
    /// default VFS's full path of one through `/` comes back unchanged.
    static let isKept: Bool = {
        guard let vfs = sqlite3_vfs_find(nil), let set = vfs.pointee.xSetSystemCall,
            let fullPathname = vfs.pointee.xFullPathname
        else { return false }
        let replacement: @convention(c) (UnsafePointer<CChar>?, UnsafeMutablePointer<stat>?) -> Int32 = {
            path, buffer in
            guard let path, let buffer else {
                errno = EFAULT
                return -1
            }
            return HeldFolderPath.isDescriptorLink(path) ? stat(path, buffer) : lstat(path, buffer)
        }
        guard set(vfs, "lstat", unsafeBitCast(replacement, to: sqlite3_syscall_ptr.self)) == SQLITE_OK else {
            return false
        }
        let root = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else { return false }
        defer { close(root) }
        let probe = "/proc/self/fd/\(root)/probe.sqlite"
        var resolved = [CChar](repeating: 0, count: Int(max(vfs.pointee.mxPathname, 512)) + 1)
        guard fullPathname(vfs, probe, Int32(resolved.count), &resolved) == SQLITE_OK else { return false }
        return String(cString: resolved) == probe
    }()

    /// Whether `path` is `/proc/self` or `/proc/self/fd/<digits>`: a link the kernel resolves
    /// through this process or one of its descriptors, never through a name.
    static func isDescriptorLink(_ path: UnsafePointer<CChar>) -> Bool {
        let prefix = "/proc/self"
        var index = 0
        for byte in prefix.utf8 {
            guard UInt8(bitPattern: path[index]) == byte else { return false }
            index += 1
        }
        if path[index] == 0 { return true }
        for byte in "/fd/".utf8 {
            guard UInt8(bitPattern: path[index]) == byte else { return false }
            index += 1
        }
        var digits = 0
        while path[index] != 0 {
            let byte = UInt8(bitPattern: path[index])
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), digits < 10 else { return false }
            digits += 1
            index += 1
        }
        return digits > 0
    }
}
