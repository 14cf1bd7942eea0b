import FileKit
import Foundation
import Synchronization

/// The files of values too big to sit inline in the index: `blobs/<2 hex>/<key hash>-<generation>`
/// (``BlobName``).
///
/// A file is written whole without a name (`O_TMPFILE`), then linked under a name no other file
/// ever had (the generation is random), so a name always holds one complete, immutable value. A
/// replaced or evicted value's file is unlinked after its index row is gone; a reader that opened
/// it before keeps reading the old bytes, whole.
///
/// Everything goes through descriptors: the `blobs` folder is opened once, a shard folder for
/// each call (both without following a symlink; a shard folder is removed when its last file
/// goes, so one kept open could name a deleted folder), and files are opened, linked and
/// unlinked relative to their shard with `O_NOFOLLOW`. A file is read only if it is a regular file of the size and
/// checksum the index recorded; anything else (a symlink, a folder, a FIFO, other bytes) is
/// ``ReadOutcome/damaged(_:)``.
final class BlobFolder: Sendable {
    /// The `blobs` folder's path, for messages (and the loader's scratch files).
    let root: String
    /// The `blobs` folder.
    let descriptor: Int32
    let durability: CacheDurability
    private let folderMode: mode_t
    private let fileMode: mode_t

    /// The blob folder of `folder`, made when missing.
    init(in folder: CacheFolder, durability: CacheDurability) throws(FileSystemError) {
        root = folder.path + "/blobs"
        descriptor = try folder.openSubfolder("blobs")
        self.durability = durability
        folderMode = folder.folderMode
        fileMode = folder.fileMode
    }

    deinit {
        close(descriptor)
    }

    func path(_ name: BlobName) -> String { root + "/" + name.description }

    /// Runs `body` on shard folder `shard`, opened for this call (made when missing if
    /// `create`); nil when it is missing. Not kept open: a shard folder that empties is removed
    /// (``remove(_:)``), and a descriptor kept would name a deleted folder.
    private func withShard<T>(
        _ shard: Int, create: Bool, _ body: (Int32) throws(FileSystemError) -> T
    ) throws(FileSystemError) -> T? {
        let name = BlobName.shardName(shard)
        let folder: Int32
        if create {
            folder = try CacheFolder.openSubfolder(name, in: descriptor, mode: folderMode, shownAs: root + "/" + name)
        } else {
            folder = openat(descriptor, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard folder >= 0 else {
                if errno == ENOENT || errno == ENOTDIR || errno == ELOOP { return nil }
                throw FileSystemError(
                    "cannot open the folder", path: root + "/" + name, syscall: "openat", errno: errno)
            }
        }
        defer { close(folder) }
        return try body(folder)
    }

    /// Removes shard folder `shard` when it is empty (a folder that holds files stays: the
    /// call fails). A writer that opened it just before makes it again (``write(_:as:)``).
    private func removeIfEmpty(shard: Int) {
        unlinkat(descriptor, BlobName.shardName(shard), AT_REMOVEDIR)
    }

    /// How many shard folders there are: the `blobs` folder's link count less its own two (a
    /// subfolder's `..` links to it), which counts every process's.
    func shardFolderCount() -> Int {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return 0 }
        return max(0, Int(status.st_nlink) - 2)
    }

    /// Writes `data` as the file `name`, complete (and flushed, with ``CacheDurability/full``)
    /// before it has the name.
    func write(_ data: Data, as name: BlobName) throws(FileSystemError) {
        for attempt in 0..<3 {
            do {
                _ = try withShard(name.shard, create: true) { folder throws(FileSystemError) in
                    try write(.bytes(data), as: name, in: folder)
                }
                return
            } catch  where error.errno == ENOENT && attempt < 2 {
                // The shard folder emptied and was removed between its opening and the file's
                // naming (another writer's eviction): make it again and write again.
                continue
            }
        }
    }

    /// Names the staged file `file` (a fetch's body, written in this folder) `name`, flushed first
    /// with ``CacheDurability/full``: the bytes are never copied. Where it cannot be linked there
    /// (another file system under the shard), it is copied, checked, as ``write(_:as:)`` writes.
    /// Throws the value's own ``ItemCacheError`` when its file changed while it was copied (a
    /// `file://` source, whose change is the fetch's failure, not the folder's).
    func link(_ file: ValueFile, as name: BlobName) throws {
        let source = SourceFailure()
        do throws(FileSystemError) {
            for attempt in 0..<3 {
                do throws(FileSystemError) {
                    _ = try withShard(name.shard, create: true) { folder throws(FileSystemError) in
                        do throws(FileSystemError) {
                            try file.link(
                                in: folder, as: name.leaf, mode: fileMode, flush: durability == .full,
                                shownAs: path(name))
                        } catch  where error.errno == EXDEV || error.errno == EINVAL {
                            try write(.file(file, source), as: name, in: folder)
                        }
                        if durability == .full { fsync(folder) }
                    }
                    return
                } catch  where error.errno == ENOENT && attempt < 2 {
                    continue
                }
            }
        } catch {
            if let failure = source.error { throw failure }
            throw error
        }
    }

    /// What a blob is written from: bytes in memory, or a value's file, read in chunks (the
    /// value's own failure kept in the box).
    private enum Source {
        case bytes(Data)
        case file(ValueFile, SourceFailure)
    }

    /// The failure of a value's file read during one copy.
    private final class SourceFailure {
        var error: ItemCacheError?
    }

    /// Writes all of `source` to `descriptor`; `path` names the blob in the error.
    private func fill(_ descriptor: Int32, from source: Source, path: String) throws(FileSystemError) {
        switch source {
        case .bytes(let data):
            try DescriptorIO.write(data, to: descriptor, path: path)
        case .file(let file, let source):
            var failure: Int32?
            do {
                try file.forEachChunk { chunk in
                    if let code = DescriptorIO.writeAll(descriptor, chunk) {
                        failure = code
                        throw FileSystemError("cannot write", path: path, syscall: "write", errno: code)
                    }
                }
            } catch {
                if failure == nil, let error = error as? ItemCacheError { source.error = error }
                throw FileSystemError("cannot copy the value to", path: path, syscall: "write", errno: failure ?? EIO)
            }
        }
    }

    /// Writes `source` as `name` in the open shard folder `folder`: into an unnamed file named
    /// once whole, or where there is no `O_TMPFILE`, a named one beside it renamed into place.
    private func write(_ source: Source, as name: BlobName, in folder: Int32) throws(FileSystemError) {
        let path = path(name)
        if let file = UnnamedFile(inFolder: folder, mode: fileMode) {
            try fill(file.descriptor, from: source, path: path)
            if durability == .full, fsync(file.descriptor) != 0 {
                throw FileSystemError("cannot flush", path: path, syscall: "fsync", errno: errno)
            }
            try file.link(in: folder, as: name.leaf, shownAs: path)
            if durability == .full { fsync(folder) }
            return
        }
        // No O_TMPFILE here: a named file beside it (`.tmp-<leaf>`, which reconciliation
        // removes when a crash leaves one), renamed into place.
        let temporary = ".tmp-" + name.leaf
        let file = openat(folder, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, fileMode)
        guard file >= 0 else {
            throw FileSystemError("cannot create a file beside", path: path, syscall: "openat", errno: errno)
        }
        var failure: (syscall: String, errno: Int32)?
        do {
            try fill(file, from: source, path: path)
        } catch {
            failure = ("write", error.errno ?? EIO)
        }
        if failure == nil && durability == .full && fsync(file) != 0 { failure = ("fsync", errno) }
        close(file)
        if failure == nil && renameat(folder, temporary, folder, name.leaf) != 0 { failure = ("renameat", errno) }
        if let failure {
            unlinkat(folder, temporary, 0)
            throw FileSystemError("cannot write", path: path, syscall: failure.syscall, errno: failure.errno)
        }
        if durability == .full { fsync(folder) }
    }

    /// What reading a blob found.
    enum ReadOutcome {
        /// The value, as recorded.
        case value(Data)
        /// No such file (replaced or evicted meanwhile, or lost).
        case missing
        /// Something else under the name: why.
        case damaged(String)
    }

    /// The file `name` when it is a regular file of `size` bytes whose CRC-32C is `checksum`
    /// (nil: a row written before checksums, checked by size only).
    func read(_ name: BlobName, size: Int64, checksum: UInt32?) throws(FileSystemError) -> ReadOutcome {
        switch try openVerified(name, size: size) {
        case .unusable(let outcome):
            return outcome
        case .file(let file):
            defer { close(file) }
            let data = try DescriptorIO.read(file, count: Int(size), path: path(name))
            guard data.count == Int(size) else { return .damaged("it was cut short while being read") }
            if let checksum, CRC32C.checksum(data) != checksum {
                return .damaged("its bytes do not match their checksum")
            }
            return .value(data)
        }
    }

    /// A blob file opened for reading, or why it cannot be.
    enum Opened {
        /// The open descriptor; the caller closes it.
        case file(Int32)
        /// ``ReadOutcome/missing`` or ``ReadOutcome/damaged(_:)``.
        case unusable(ReadOutcome)
    }

    /// The open file `name` when it is a regular file of `size` bytes (not a symlink, folder or
    /// FIFO: opened with `O_NOFOLLOW | O_NONBLOCK`, then checked with `fstat`).
    func openVerified(_ name: BlobName, size: Int64) throws(FileSystemError) -> Opened {
        let opened = try withShard(name.shard, create: false) { folder in
            (openat(folder, name.leaf, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC), errno)
        }
        guard let (file, openError) = opened else { return .unusable(.missing) }
        guard file >= 0 else {
            errno = openError
            switch errno {
            case ENOENT: return .unusable(.missing)
            case ELOOP: return .unusable(.damaged("it is a symbolic link"))
            case ENXIO: return .unusable(.damaged("it is a socket or device"))
            default:
                throw FileSystemError("cannot open the cached value", path: path(name), syscall: "openat", errno: errno)
            }
        }
        var status = stat()
        guard fstat(file, &status) == 0 else {
            let code = errno
            close(file)
            throw FileSystemError("cannot inspect the cached value", path: path(name), syscall: "fstat", errno: code)
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            close(file)
            return .unusable(.damaged("it is not a regular file"))
        }
        guard Int64(status.st_size) == size else {
            close(file)
            return .unusable(.damaged("it holds \(status.st_size) bytes, not \(size)"))
        }
        return .file(file)
    }

    /// Unlinks the file `name` (a link, never its target; a folder in its place, when empty).
    /// A missing one is fine.
    func remove(_ name: BlobName) {
        _ = try? withShard(name.shard, create: false) { folder in
            if unlinkat(folder, name.leaf, 0) != 0 && errno == EISDIR {
                unlinkat(folder, name.leaf, AT_REMOVEDIR)
            }
        }
        // An emptied shard folder goes, so the folders cost only while they hold values (a
        // small cache would otherwise end with 256 of them, 1 MiB of its limit).
        removeIfEmpty(shard: name.shard)
    }

    /// What the folder holds that is the cache's own: the blob files by name, and the names of
    /// temporary files a crash left behind (`.tmp-<leaf>`). Shard folders are entered without
    /// following a symlink; a symlink in a shard's place is removed (the link only). Names of
    /// any other shape are left alone.
    func listing() throws(FileSystemError) -> (files: [BlobName], temporaries: [(shard: Int, name: String)]) {
        var files: [BlobName] = []
        var temporaries: [(shard: Int, name: String)] = []
        for entry in try Self.entries(of: descriptor, shownAs: root) {
            guard let shard = BlobName.shard(named: entry.name) else { continue }
            if entry.type == S_IFLNK {
                unlinkat(descriptor, entry.name, 0)
                continue
            }
            guard entry.type == S_IFDIR else { continue }
            let entries = try withShard(shard, create: false) { folder throws(FileSystemError) in
                try Self.entries(of: folder, shownAs: root + "/" + entry.name)
            }
            guard let entries else { continue }
            if entries.isEmpty { removeIfEmpty(shard: shard) }
            for file in entries {
                if let name = BlobName(leaf: file.name, shard: shard) {
                    files.append(name)
                } else if file.name.hasPrefix(".tmp-"), BlobName.isLeaf(String(file.name.dropFirst(5)), inShard: shard)
                {
                    temporaries.append((shard, file.name))
                }
            }
        }
        return (files, temporaries)
    }

    /// Removes a temporary file ``listing()`` found.
    func removeTemporary(_ name: String, shard: Int) {
        guard BlobName.isLeaf(String(name.dropFirst(5)), inShard: shard), name.hasPrefix(".tmp-") else { return }
        _ = try? withShard(shard, create: false) { folder in unlinkat(folder, name, 0) }
        removeIfEmpty(shard: shard)
    }

    /// The size of the regular file `name`, or nil when there is none (or it is not one).
    func size(of name: BlobName) -> Int64? {
        let found = try? withShard(name.shard, create: false) { folder -> Int64? in
            var status = stat()
            guard fstatat(folder, name.leaf, &status, AT_SYMLINK_NOFOLLOW) == 0, status.st_mode & S_IFMT == S_IFREG
            else { return nil }
            return Int64(status.st_size)
        }
        return found ?? nil
    }

    /// The blocks the `blobs` folder, its shard folders and their files take on disk.
    func allocatedBytes() -> Int64 {
        var total: Int64 = 0
        var status = stat()
        if fstat(descriptor, &status) == 0 { total = FileSystem.adding(FileSystem.allocatedBytes(status), to: total) }
        for shard in 0..<256 {
            _ = try? withShard(shard, create: false) { folder in
                if fstat(folder, &status) == 0 {
                    total = FileSystem.adding(FileSystem.allocatedBytes(status), to: total)
                }
                for entry in (try? Self.entries(of: folder, shownAs: root)) ?? [] {
                    if fstatat(folder, entry.name, &status, AT_SYMLINK_NOFOLLOW) == 0 {
                        total = FileSystem.adding(FileSystem.allocatedBytes(status), to: total)
                    }
                }
            }
        }
        return total
    }

    /// The names in the open folder `folder` with their types (from `lstat`, never following).
    private static func entries(of folder: Int32, shownAs: String) throws(FileSystemError) -> [(
        name: String, type: mode_t
    )] {
        try FolderCursor.entries(of: folder, shownAs: shownAs).map {
            (String(decoding: $0.name, as: UTF8.self), $0.info.st_mode & S_IFMT)
        }
    }
}
