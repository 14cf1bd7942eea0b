import CLinux
import Foundation

/// The last folder a run of path operations used, kept open (`O_PATH`) so that paths sorted by
/// folder reach the kernel as one name relative to it: linking or `stat`ing thousands of files of
/// a tree then walks each folder's path once instead of once per file (the path walks were 40 %
/// of the kernel time of linking a mirror's kept files). A folder's path resolves as it would for
/// the whole path (below a held folder, `/proc/self/fd/N/…`, without following any link); the
/// name is never followed where the call itself does not follow it. Not thread-safe: one per
/// thread.
public struct FolderHandles: ~Copyable {
    private var folder: String?
    private var descriptor: Int32 = -1

    /// Handles holding no folder yet: the first path opens one.
    public init() {}

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }

    /// Why the last folder below a held folder could not be opened (`ELOOP` for a link on the
    /// way), or 0.
    public private(set) var failure: Int32 = 0

    /// A descriptor of `path`'s folder and its last name, valid until the next call: the folder
    /// held open when it is the previous call's, else opened now. `AT_FDCWD` and the whole path
    /// when the folder cannot be opened (the call then fails, or not, as it would with the path);
    /// below a held folder, -1 instead (every call fails; ``failure`` says why), since the path
    /// would follow the link the open refused.
    public mutating func resolve(_ path: String) -> (folder: Int32, name: String) {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")), slash != path.utf8.startIndex else {
            return (AT_FDCWD, path)
        }
        let parent = String(Substring(path.utf8[..<slash]))
        let name = String(Substring(path.utf8[path.utf8.index(after: slash)...]))
        let below = LongPath.belowHeldFolder(parent)
        if parent != folder {
            if descriptor >= 0 { close(descriptor) }
            failure = 0
            if let (held, rest) = below {
                // Below a held folder, no link is followed on the way (``LongPath/at(_:_:)``).
                descriptor = clinux_open_beneath(held, rest, clinux_o_path() | O_DIRECTORY | O_CLOEXEC)
                if descriptor < 0 { failure = errno }
            } else {
                descriptor =
                    (try? LongPath.at(parent) { at, rest throws(FileSystemError) -> Int32 in
                        openat(at, rest, clinux_o_path() | O_DIRECTORY | O_CLOEXEC)
                    }) ?? -1
            }
            folder = descriptor >= 0 ? parent : nil
        }
        if descriptor < 0, below != nil { return (-1, name) }
        guard descriptor >= 0, !name.isEmpty else { return (AT_FDCWD, path) }
        return (descriptor, name)
    }

    /// The `lstat` of `path`, or nil when it cannot be read.
    public mutating func status(of path: String) -> stat? {
        let (folder, name) = resolve(path)
        var info = stat()
        return fstatat(folder, name, &info, AT_SYMLINK_NOFOLLOW) == 0 ? info : nil
    }

    /// The identity of the regular file at `path` (``FileIdentity/init(path:)``), or nil.
    public mutating func identity(of path: String) -> FileIdentity? {
        guard let info = status(of: path), info.st_mode & S_IFMT == S_IFREG else { return nil }
        return FileIdentity(info)
    }
}

extension FileSystem {
    /// ``linkOrCopy(_:_:)`` for many pairs, with the source and target folders held open from one
    /// pair to the next (``FolderHandles``): pairs sorted by folder walk each folder's path once.
    public static func linkOrCopy(_ pairs: some Sequence<(source: String, target: String)>) throws(FileSystemError) {
        var sources = FolderHandles()
        var targets = FolderHandles()
        for (source, target) in pairs {
            let (sourceFolder, sourceName) = sources.resolve(source)
            let (targetFolder, targetName) = targets.resolve(target)
            if sourceFolder == -1 {
                throw FileSystemError(
                    "cannot open the folder of", path: source, syscall: "openat2", errno: sources.failure)
            }
            if targetFolder == -1 {
                throw FileSystemError(
                    "cannot open the folder of", path: target, syscall: "openat2", errno: targets.failure)
            }
            try linkOrCopy(sourceFolder, sourceName, targetFolder, targetName, shownAs: (source, target))
        }
    }
}
