import Archive
import CLinux
import FileKit
import Foundation
import StorageFormat

/// Copies a content folder into the publish's work folder, so that the hashes, the change list,
/// the archive and the published content all come from one reading of it, however `--content`
/// changes meanwhile.
///
/// Both trees are walked together with ``FolderCursor``s: names are copied as raw bytes (the
/// scan of the copy judges them), each open relative to its folder, so any legal depth works
/// with a constant number of descriptors and no path longer than one name. Folders are created
/// 0755 and files 0644 (what static hosting needs; modes are not part of a version). Symlinks and
/// special files are refused before anything is opened, so a fifo cannot block the copy.
///
/// A file the previous version already holds unchanged is hard-linked from it instead of copied
/// (`previous`, the storage's `RXCacheContent/`), so a publish writes only what changed and the
/// storage keeps the same inode for an unchanged file across versions. "Unchanged" is decided by
/// the source file's identity, recorded on each copy as the extended attribute
/// `user.content-sync.source`: device, inode, size, modification and status-change times. Any
/// write to the source, even one that keeps its size and restores its modification time (as
/// reproducible builds and `touch -d` do), moves its status-change time, which no tool can set
/// back; so a match means the same bytes. A copy of a file changed in the last 2 seconds
/// records nothing (a change within the clock's granularity could keep its times), and where
/// the filesystem keeps no user attributes everything is copied, as before.
enum ContentSnapshot {
    /// The extended attribute that names the source a storage file was copied from.
    static let sourceAttribute = "user.content-sync.source"

    /// What a snapshot did.
    struct Result {
        /// Bytes copied.
        var copiedBytes: Int64 = 0
        /// Files hard-linked from the previous version.
        var linkedFiles = 0
    }

    /// Copies `source` to `destination` (which must not exist), linking from `previous` what it
    /// holds unchanged.
    @discardableResult
    /// `settle`: how many seconds old a source's last change must be for its copy to be recorded
    /// (tests pass a negative value to record every copy).
    static func copy(_ source: String, to destination: String, previous: String? = nil, settle: Int = 2)
        throws(PublishError) -> Result
    {
        guard mkdir(destination, 0o755) == 0 else {
            throw PublishError.fileSystem(
                "cannot create the content snapshot folder", path: destination, syscall: "mkdir", errno: errno)
        }
        guard var from = try fileWork({ () throws(FileSystemError) in try FolderCursor(at: source) }) else {
            throw PublishError.fileSystem("cannot read folder", path: source, syscall: "openat", errno: ENOENT)
        }
        guard var to = try fileWork({ () throws(FileSystemError) in try FolderCursor(at: destination) }) else {
            throw PublishError.fileSystem("cannot read folder", path: destination, syscall: "openat", errno: ENOENT)
        }
        var result = Result()
        var started = timespec()
        clock_gettime(CLOCK_REALTIME, &started)
        let context = Context(
            shownFrom: source, previous: PreviousTree.open(previous),
            trustedBefore: (Int64(started.tv_sec) - Int64(settle)) * 1_000_000_000 + Int64(started.tv_nsec))
        /// A folder being copied: its path (raw, for messages) and its subfolders still to copy.
        struct Frame {
            var path: [UInt8]
            var subfolders: [[UInt8]]
        }
        var frames = [
            Frame(path: [], subfolders: try copyEntries(from, to, at: [], context: context, result: &result))
        ]
        while let top = frames.indices.last {
            guard let name = frames[top].subfolders.popLast() else {
                frames.removeLast()
                if !frames.isEmpty {
                    try fileWork { () throws(FileSystemError) in
                        try from.ascend()
                        try to.ascend()
                    }
                    context.previous?.ascend()
                }
                continue
            }
            let path = frames[top].path.isEmpty ? name : frames[top].path + [0x2F] + name
            guard try fileWork({ () throws(FileSystemError) in try from.descend(into: name) }) else {
                throw special(source, path)
            }
            guard try fileWork({ () throws(FileSystemError) in try to.descend(into: name) }) else {
                throw PublishError.fileSystem(
                    "cannot enter the copied folder \(EscapedName.text(path)) in", path: destination, syscall: "openat",
                    errno: ENOENT)
            }
            context.previous?.descend(into: name)
            frames.append(
                Frame(path: path, subfolders: try copyEntries(from, to, at: path, context: context, result: &result)))
        }
        return result
    }

    /// What every folder's copy needs: the source's name for messages, the previous version's
    /// tree, and the time before which a source's status change is old enough to record.
    private struct Context {
        var shownFrom: String
        var previous: PreviousTree?
        /// Nanoseconds since the epoch.
        var trustedBefore: Int64
    }

    /// The previous version's tree, walked beside the source: the folder of the same path while
    /// it has one. Anything wrong with it (a folder missing, unreadable or replaced) only means
    /// nothing below is reused.
    final class PreviousTree {
        private var cursor: FolderCursor
        /// Levels below the last folder the previous tree has.
        private var lost = 0

        private init(_ cursor: consuming FolderCursor) {
            self.cursor = cursor
        }

        /// The tree at `path`; nil without one, or when it cannot be opened.
        static func open(_ path: String?) -> PreviousTree? {
            guard let path else { return nil }
            do {
                guard let cursor = try FolderCursor(at: path) else { return nil }
                return PreviousTree(cursor)
            } catch {
                return nil
            }
        }

        /// The descriptor of the previous version's folder at the copy's current path, if it has one.
        var descriptor: Int32? { lost == 0 ? cursor.descriptor : nil }

        func descend(into name: [UInt8]) {
            if lost > 0 || (try? cursor.descend(into: name)) != true { lost += 1 }
        }

        func ascend() {
            if lost > 0 {
                lost -= 1
            } else if (try? cursor.ascend()) == nil {
                lost = Int.max / 2 // moved underneath: stop reusing from it
            }
        }
    }

    /// The source identity recorded on the file at `path`, if any.
    static func recordedSource(at path: String) -> [UInt8]? {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        return recordedSource(of: descriptor)
    }

    /// The source identity recorded on the open file `descriptor`, if any (at most 256 bytes).
    private static func recordedSource(of descriptor: Int32) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: 256)
        let length = clinux_fgetxattr(descriptor, sourceAttribute, &buffer, buffer.count)
        return length < 0 ? nil : Array(buffer[..<Int(length)])
    }

    /// Whether the filesystem holding the folder `folder` keeps user extended attributes (a
    /// probe file is made and removed).
    static func keepsUserAttributes(in folder: String) -> Bool {
        let probe = folder + "/.content-sync-xattr-probe-\(getpid())"
        let descriptor = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return false }
        defer {
            close(descriptor)
            unlink(probe)
        }
        return clinux_fsetxattr(descriptor, "user.content-sync.probe", "1", 1) == 0
    }

    /// The identity recorded for a source file: device, inode, size, and the modification and
    /// status-change times to the nanosecond.
    static func sourceKey(_ info: stat) -> [UInt8] {
        Array(
            ("v1 \(info.st_dev) \(info.st_ino) \(info.st_size) \(info.st_mtim.tv_sec).\(info.st_mtim.tv_nsec) "
                + "\(info.st_ctim.tv_sec).\(info.st_ctim.tv_nsec)").utf8)
    }

    /// Links `name` from the previous version's folder into `target` when the file there holds
    /// the source's bytes. Known without reading when it was copied from this very source,
    /// unchanged since (the recorded identity equals `info`, from the listing); otherwise, for a
    /// file of the same size, found by comparing the bytes: a source whose identity moved but
    /// whose bytes did not (`cp -al` or `chmod -R` moves every status-change time; a fresh
    /// checkout or an rsync makes new inodes). Reading both costs less than a copy, its attribute
    /// and, later, freeing the old copy. False when it cannot be reused, for whatever reason: the
    /// caller copies.
    private static func linkFromPrevious(
        _ name: [UInt8], info: stat, source: Int32, previous: Int32, to target: Int32
    ) -> Bool {
        var old = stat()
        guard name.withCString({ fstatat(previous, $0, &old, AT_SYMLINK_NOFOLLOW) }) == 0,
            old.st_mode & S_IFMT == S_IFREG, old.st_size == info.st_size
        else { return false }
        let flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC
        let stored = name.withCString { openat(previous, $0, flags) }
        guard stored >= 0 else { return false }
        defer { close(stored) }
        // The same inode as the one just checked, still a regular file: link exactly it.
        var opened = stat()
        guard fstat(stored, &opened) == 0, opened.st_ino == old.st_ino, opened.st_dev == old.st_dev else {
            return false
        }
        if recordedSource(of: stored) != sourceKey(info) {
            let input = name.withCString { openat(source, $0, flags) }
            guard input >= 0 else { return false }
            defer { close(input) }
            // A source that is still a regular file of the listed size, with the same bytes.
            var read = stat()
            guard fstat(input, &read) == 0, read.st_mode & S_IFMT == S_IFREG, read.st_size == info.st_size,
                sameBytes(input, stored, size: Int64(info.st_size))
            else { return false }
        }
        return name.withCString { linkat(previous, $0, target, $0, 0) } == 0
    }

    /// Whether the files open at `first` and `second` hold the same `size` bytes (and no more).
    private static func sameBytes(_ first: Int32, _ second: Int32, size: Int64) -> Bool {
        // Buffers no larger than the file needs (one byte more shows where it ends).
        let chunk = Int(min(max(size, 0) + 1, 1 << 16))
        let one = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        let two = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer {
            one.deallocate()
            two.deallocate()
        }
        var offset: Int64 = 0
        while true {
            let got = pread(first, one.baseAddress, chunk, off_t(offset))
            guard got >= 0, pread(second, two.baseAddress, got, off_t(offset)) == got else { return false }
            if got == 0 { return offset == size && pread(second, two.baseAddress, 1, off_t(offset)) == 0 }
            guard memcmp(one.baseAddress!, two.baseAddress!, got) == 0 else { return false }
            offset += Int64(got)
            guard offset <= size else { return false }
        }
    }

    /// Copies the files of the folder at `from` into the one at `to`, creates its subfolders
    /// there, and returns their names.
    private static func copyEntries(
        _ from: borrowing FolderCursor, _ to: borrowing FolderCursor, at folder: [UInt8], context: Context,
        result: inout Result
    ) throws(PublishError) -> [[UInt8]] {
        let source = context.shownFrom
        var subfolders: [[UInt8]] = []
        for entry in try fileWork({ () throws(FileSystemError) in try from.entries() }) {
            let path = folder.isEmpty ? entry.name : folder + [0x2F] + entry.name
            switch entry.info.st_mode & S_IFMT {
            case S_IFDIR:
                guard entry.name.withCString({ mkdirat(to.descriptor, $0, 0o755) }) == 0 else {
                    throw PublishError.fileSystem(
                        "cannot create folder \(EscapedName.text(path)) in", path: to.shownAs, syscall: "mkdirat",
                        errno: errno)
                }
                subfolders.append(entry.name)
            case S_IFREG:
                if let previous = context.previous?.descriptor,
                    linkFromPrevious(
                        entry.name, info: entry.info, source: from.descriptor, previous: previous, to: to.descriptor)
                {
                    result.linkedFiles += 1
                    continue
                }
                result.copiedBytes += try copyFile(
                    entry.name, from: from.descriptor, to: to.descriptor, shown: source + "/" + EscapedName.text(path),
                    trustedBefore: context.trustedBefore)
            default:
                throw special(source, path)
            }
        }
        return subfolders.reversed()
    }

    private static func special(_ source: String, _ path: [UInt8]) -> PublishError {
        PublishError(
            code: .invalidContent,
            message:
                "\(source)/\(EscapedName.text(path)) is a symlink or special file; a storage carries regular files and folders only: replace it with a copy or remove it"
        )
    }

    private static func copyFile(
        _ name: [UInt8], from sourceFolder: Int32, to targetFolder: Int32, shown: String, trustedBefore: Int64
    ) throws(PublishError) -> Int64 {
        // O_NOFOLLOW | O_NONBLOCK: a file swapped for a symlink or fifo since the listing is
        // refused or opened without blocking, then refused by the fstat below.
        let input = name.withCString { openat(sourceFolder, $0, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
        guard input >= 0 else {
            throw PublishError.fileSystem("cannot open", path: shown, syscall: "openat", errno: errno)
        }
        defer { close(input) }
        var info = stat()
        guard fstat(input, &info) == 0 else {
            throw PublishError.fileSystem("cannot read", path: shown, syscall: "fstat", errno: errno)
        }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw PublishError(
                code: .invalidContent,
                message:
                    "\(shown) is a symlink or special file; a storage carries regular files and folders only: replace it with a copy or remove it"
            )
        }
        let output = name.withCString { openat(targetFolder, $0, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644) }
        guard output >= 0 else {
            throw PublishError.fileSystem("cannot create the copy of", path: shown, syscall: "openat", errno: errno)
        }
        defer { close(output) }
        let bytes = try fileWork { () throws(FileSystemError) in
            try FileCopy.copy(from: input, to: output, shownFrom: shown, shownTo: "its snapshot copy")
        }
        // The source as it was before the copy read it (`info`); a change during or after the
        // read moves its status-change time past `trustedBefore`, so the record no longer matches.
        if Int64(info.st_ctim.tv_sec) * 1_000_000_000 + Int64(info.st_ctim.tv_nsec) < trustedBefore {
            let key = sourceKey(info)
            _ = clinux_fsetxattr(output, sourceAttribute, key, key.count) // none kept: nothing is reused
        }
        return bytes
    }
}
