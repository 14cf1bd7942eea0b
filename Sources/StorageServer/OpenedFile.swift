import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A regular file below the served root, open for reading, with the identity it was opened with.
///
/// The handler opens the file once and answers from the descriptor, so the `ETag`,
/// `Last-Modified`, the length and the bytes all describe the same file even if the root is
/// switched mid-response.
final class OpenedFile: Sendable {
    let descriptor: Int32
    let size: Int
    let entityTag: EntityTag
    /// The modification time in whole seconds since 1970, rounded down, as `Last-Modified` sends it.
    let modificationSeconds: Int64

    private init(descriptor: Int32, size: Int, entityTag: EntityTag, modificationSeconds: Int64) {
        self.descriptor = descriptor
        self.size = size
        self.entityTag = entityTag
        self.modificationSeconds = modificationSeconds
    }

    deinit {
        close(descriptor)
    }

    /// Opens `path` below `root`, or returns `nil` when it names no regular file inside the root:
    /// missing, a folder, a device, or a symlink that resolves outside the root.
    static func open(_ path: RequestPath, under root: URL) -> OpenedFile? {
        guard !path.components.isEmpty,
            let rootReal = realPath(root.path)
        else { return nil }
        let prefix = rootReal.hasSuffix("/") ? rootReal : rootReal + "/"
        guard let real = realPath(prefix + path.components.joined(separator: "/")),
            // Compare bytes: String.hasPrefix would equate canonically-equivalent names.
            real.utf8.starts(with: prefix.utf8)
        else { return nil }

        // O_NONBLOCK keeps a FIFO from hanging the open; it is refused below anyway.
        let descriptor = openForReading(real)
        guard descriptor >= 0 else { return nil }
        #if os(Linux)
            // The path was checked, then opened again: a folder on it swapped for a link to
            // `/etc` in between opened `/etc/passwd` (an outside audit). Where the descriptor
            // really leads is checked instead, after the open.
            guard let opened = realPath("/proc/self/fd/\(descriptor)"), opened.utf8.starts(with: prefix.utf8) else {
                close(descriptor)
                return nil
            }
        #endif
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            close(descriptor)
            return nil
        }
        #if canImport(Darwin)
            let modified = info.st_mtimespec
        #else
            let modified = info.st_mtim
        #endif
        let tag = EntityTag(
            inode: UInt64(info.st_ino),
            size: Int(info.st_size),
            modificationNanoseconds: Int64(modified.tv_sec) &* 1_000_000_000 &+ Int64(modified.tv_nsec)
        )
        return OpenedFile(
            descriptor: descriptor, size: Int(info.st_size), entityTag: tag,
            modificationSeconds: Int64(modified.tv_sec))
    }

    /// Reads up to `count` bytes at `offset`; an empty result means the file ended early.
    func read(at offset: Int, count: Int) throws(FileReadError) -> Data {
        var data = Data(count: count)
        let result = data.withUnsafeMutableBytes { buffer in
            var read: Int
            repeat {
                read = pread(descriptor, buffer.baseAddress, count, off_t(offset))
            } while read < 0 && errno == EINTR
            return read
        }
        guard result >= 0 else { throw FileReadError(errno: errno) }
        data.count = result
        return data
    }

    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}

/// `open(2)` outside the type, whose own `open(_:under:)` would shadow it.
private func openForReading(_ path: String) -> Int32 {
    path.withCString { open($0, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW) }
}

/// A `pread` failure while streaming a body; the connection is closed when it happens.
struct FileReadError: Error {
    var errno: Int32
}
