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
///
/// With the previous publish's ``PublishIndex``, a file whose recorded source identity is the
/// source's and whose published copy still has its recorded stamp is known unchanged without
/// opening either. That stamp is read here (from the reused destination's entry when it is the
/// published file itself, else with one `fstatat`), so the snapshot needs nothing of the check of
/// the published tree, and the publisher runs that check beside it.
///
/// `reusing`: the destination already holds a tree (``PublishBase``'s retired version, whose
/// unchanged files are links to the published ones), caught up instead of filled: an entry that
/// is already the file to link stays, anything else there is replaced (unlinked, never written
/// in place: its inode may be the published file's) or deleted. Its entries are read with
/// `lstat` and never followed, so a symlink or hard link planted there is only ever unlinked.
enum ContentSnapshot {
    /// The extended attribute that names the source a storage file was copied from.
    static let sourceAttribute = "user.content-sync.source"

    /// The tree a snapshot holds, noted while it is made (names judged as the scan judges them,
    /// fingerprints from the index, the check of the previous version or the copy's own bytes),
    /// so the publish need not walk and read the snapshot again. Anything the notes cannot vouch
    /// for (a name the path rules refuse, two names one path, a file of unknown bytes) leaves them
    /// incomplete: the caller then scans the snapshot, which names the problem.
    final class TreeNotes {
        var tree = ContentTree(folders: [], files: [:])
        /// The stamps of files a reused destination already held (nothing changed their status).
        var stamps: [String: FileStamp] = [:]
        var complete = true
        /// The previous version's fingerprints by identity (its check filled it).
        let fingerprints: FingerprintCache

        /// `expectedFiles`: about how many files the snapshot will hold (the previous version's
        /// count), room made for at once instead of by repeated growth.
        init(fingerprints: FingerprintCache, expectedFiles: Int = 0) {
            self.fingerprints = fingerprints
            tree.files.reserveCapacity(expectedFiles)
            stamps.reserveCapacity(expectedFiles)
        }

        /// The path of `name` in `folder`, checked as the scan checks it; nil (and the notes
        /// incomplete) when it is not a path the tree can hold, or is one already noted.
        /// `length`: the whole path's length in bytes.
        func path(of name: [UInt8], in folder: SafeRelativePath?, length: Int) -> SafeRelativePath? {
            guard complete, let folder, length <= SafeRelativePath.maxPathBytes,
                let text = String(validating: name, as: UTF8.self), let path = try? folder.appending(component: text),
                tree.files[path] == nil, !tree.folders.contains(path)
            else {
                complete = false
                return nil
            }
            return path
        }

        func file(_ path: SafeRelativePath?, _ fingerprint: FileFingerprint?, stamp: stat? = nil) {
            guard complete, let path else { return }
            guard let fingerprint else {
                complete = false
                return
            }
            tree.files[path] = fingerprint
            if let stamp { stamps[path.string] = FileStamp(stamp) }
        }

        /// Notes a file linked or kept from the previous version: `file`, the entry of `path`'s
        /// name in the snapshot's folder open as `folder`. Its fingerprint is `known` (the index's), else the
        /// check of the previous version's, else read through the link: that check runs beside the
        /// snapshot and may not have reached the file yet.
        func linked(
            _ path: SafeRelativePath?, _ known: FileFingerprint?, file: FileIdentity, in folder: Int32,
            stamp: stat? = nil
        ) {
            guard complete, let path else { return }
            var fingerprint = known ?? fingerprints.lookup(file)
            if fingerprint == nil, let component = path.lastComponent,
                let digest = try? FileDigest.sha256(
                    ofEntry: component, in: folder, expecting: file, shownAs: component),
                digest.identity == file
            {
                fingerprint = FileFingerprint(size: digest.size, sha256: digest.sha256)
            }
            self.file(path, fingerprint, stamp: stamp)
        }
    }

    /// What a snapshot did.
    struct Result {
        /// Bytes copied.
        var copiedBytes: Int64 = 0
        /// Files hard-linked from the previous version (or, when reusing, found already linked).
        var linkedFiles = 0
        /// Of those, the ones a reused destination already held.
        var keptFiles = 0
        /// Entries of a reused destination deleted or replaced.
        var replacedEntries = 0
        /// The source identity each file holds the bytes of (``sourceKey(_:)``), by path, for the
        /// files whose source had settled; what ``PublishIndex`` records.
        var sources: [String: [UInt8]] = [:]
    }

    /// Copies `source` to `destination` (which must not exist), linking from `previous` what it
    /// holds unchanged.
    @discardableResult
    /// `settle`: how many seconds old a source's last change must be for its copy to be recorded
    /// (tests pass a negative value to record every copy).
    /// `reusing`: the destination exists and is caught up (see above); `index`: the previous
    /// publish's index of `previous`.
    static func copy(
        _ source: String, to destination: String, previous: String? = nil, reusing: Bool = false,
        index: PublishIndex? = nil, notes: TreeNotes? = nil, settle: Int = 2
    ) throws(PublishError) -> Result {
        guard reusing || mkdir(destination, 0o755) == 0 else {
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
        result.sources.reserveCapacity(index?.entries.count ?? 0)
        var started = timespec()
        clock_gettime(CLOCK_REALTIME, &started)
        let context = Context(
            shownFrom: source, previous: PreviousTree.open(previous),
            trustedBefore: (Int64(started.tv_sec) - Int64(settle)) * 1_000_000_000 + Int64(started.tv_nsec),
            reusing: reusing, index: index ?? PublishIndex(), notes: notes)
        /// A folder being copied: its path (raw, for messages) and its subfolders still to copy.
        struct Frame {
            var path: [UInt8]
            var subfolders: [Subfolder]
        }
        var frames = [
            Frame(
                path: [],
                subfolders: try copyEntries(from, to, at: [], checked: .root, context: context, result: &result))
        ]
        while let top = frames.indices.last {
            guard let (name, checked) = frames[top].subfolders.popLast() else {
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
                Frame(
                    path: path,
                    subfolders: try copyEntries(
                        from, to, at: path, checked: checked, context: context, result: &result)))
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
        var reusing: Bool
        var index: PublishIndex
        var notes: TreeNotes?

        /// Whether a source's identity is old enough to record.
        func settled(_ info: stat) -> Bool {
            FileSystem.changeTime(info) < trustedBefore
        }

        /// Whether the identity of a source read as `read` can be recorded: it did not change
        /// since the listing (`info`), and had settled by then.
        func recordable(_ read: stat, listed info: stat) -> Bool {
            FileStamp(read) == FileStamp(info) && settled(info)
        }
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

    /// The previous version's file `name` when it holds the source's bytes, and whether that is
    /// known from the source's identity (recordable) rather than from a comparison of a source
    /// still settling. Known without reading when it was copied from this very source, unchanged
    /// since (the recorded identity equals `info`, from the listing); otherwise, for a file of the
    /// same size, found by comparing the bytes: a source whose identity moved but whose bytes did
    /// not (`cp -al` or `chmod -R` moves every status-change time; a fresh checkout or an rsync
    /// makes new inodes). Reading both costs less than a copy, its attribute and, later, freeing
    /// the old copy. Nil when it cannot be reused, for whatever reason: the caller copies.
    private static func reusable(
        _ name: [UInt8], info: stat, source: Int32, previous: Int32, context: Context
    ) -> (file: FileIdentity, recordable: Bool)? {
        var old = stat()
        guard name.withCString({ fstatat(previous, $0, &old, AT_SYMLINK_NOFOLLOW) }) == 0,
            old.st_mode & S_IFMT == S_IFREG, old.st_size == info.st_size
        else { return nil }
        let flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC
        let stored = name.withCString { openat(previous, $0, flags) }
        guard stored >= 0 else { return nil }
        defer { close(stored) }
        // The same inode as the one just checked, still a regular file: link exactly it.
        var opened = stat()
        guard fstat(stored, &opened) == 0, opened.st_ino == old.st_ino, opened.st_dev == old.st_dev else {
            return nil
        }
        if recordedSource(of: stored) == sourceKey(info) { return (FileIdentity(old), true) }
        let input = name.withCString { openat(source, $0, flags) }
        guard input >= 0 else { return nil }
        defer { close(input) }
        // A source that is still a regular file of the listed size, with the same bytes.
        var read = stat()
        guard fstat(input, &read) == 0, read.st_mode & S_IFMT == S_IFREG, read.st_size == info.st_size,
            sameBytes(input, stored, size: Int64(info.st_size))
        else { return nil }
        return (FileIdentity(old), context.recordable(read, listed: info))
    }

    /// Whether the source file `name` (listed as `info`) holds the bytes `fingerprint` describes;
    /// nil when it does not or cannot be read, else whether its identity can be recorded (it did
    /// not change since the listing, and had settled by then).
    private static func sourceHolds(
        _ fingerprint: FileFingerprint, _ name: [UInt8], info: stat, in folder: Int32, context: Context
    ) -> Bool? {
        let input = name.withCString { openat(folder, $0, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC) }
        guard input >= 0 else { return nil }
        defer { close(input) }
        var read = stat()
        guard fstat(input, &read) == 0, read.st_mode & S_IFMT == S_IFREG, read.st_size == info.st_size,
            let digest = try? FileDigest.sha256(ofDescriptor: input, shownAs: ""),
            digest.size == fingerprint.size, digest.sha256 == fingerprint.sha256
        else { return nil }
        return context.recordable(read, listed: info)
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

    /// A subfolder to copy: its raw name, and its path as the notes checked it (nil without notes,
    /// or when they gave up).
    private typealias Subfolder = (name: [UInt8], checked: SafeRelativePath?)

    /// Copies the files of the folder at `from` into the one at `to` (whose path the notes checked
    /// as `checked`), creates its subfolders there, and returns them. When reusing, `to` already
    /// holds entries: the ones that are what the copy would make stay, the others are replaced or
    /// deleted.
    private static func copyEntries(
        _ from: borrowing FolderCursor, _ to: borrowing FolderCursor, at folder: [UInt8], checked: SafeRelativePath?,
        context: Context, result: inout Result
    ) throws(PublishError) -> [Subfolder] {
        let notes = context.notes
        let source = context.shownFrom
        var subfolders: [Subfolder] = []
        var present: [BytesKey: stat] = [:]
        if context.reusing {
            for entry in try fileWork({ () throws(FileSystemError) in try to.entries() }) {
                present[BytesKey(entry.name)] = entry.info
            }
        }
        for entry in try fileWork({ () throws(FileSystemError) in try from.entries() }) {
            let path = folder.isEmpty ? entry.name : folder + [0x2F] + entry.name
            let there = present.removeValue(forKey: BytesKey(entry.name))
            var occupied = there != nil
            let noted = notes?.path(of: entry.name, in: checked, length: path.count)
            switch entry.info.st_mode & S_IFMT {
            case S_IFDIR:
                if let noted { notes?.tree.folders.insert(noted) }
                if let there, there.st_mode & S_IFMT == S_IFDIR {
                    subfolders.append((entry.name, noted))
                    continue
                }
                if there != nil { try clear(entry.name, in: to, at: path, result: &result) }
                guard entry.name.withCString({ mkdirat(to.descriptor, $0, 0o755) }) == 0 else {
                    throw PublishError.fileSystem(
                        "cannot create folder \(EscapedName.text(path)) in", path: to.shownAs, syscall: "mkdirat",
                        errno: errno)
                }
                subfolders.append((entry.name, noted))
            case S_IFREG:
                let key = sourceKey(entry.info)
                let text = String(validating: path, as: UTF8.self)
                var reuse: (file: FileIdentity, recordable: Bool)?
                var known: FileFingerprint?
                // The published file's stamp as checked, to find again before linking it by name.
                var expected: FileStamp?
                if let previous = context.previous?.descriptor {
                    if let text, let record = context.index.entries[text],
                        published(entry.name, in: previous, there: there, hasStamp: record.stamp)
                    {
                        // The published file is as recorded: its bytes are known. It holds this
                        // very source's when the recorded source is this one; otherwise the source
                        // is hashed and compared with the record (the published file is not read).
                        let file = record.stamp.identity
                        expected = record.stamp
                        known = record.fingerprint
                        if record.source == key {
                            reuse = (file, true)
                        } else if record.stamp.identity.size == Int64(entry.info.st_size),
                            let recordable = sourceHolds(
                                record.fingerprint, entry.name, info: entry.info, in: from.descriptor, context: context)
                        {
                            reuse = (file, recordable)
                        }
                    } else {
                        reuse = reusable(
                            entry.name, info: entry.info, source: from.descriptor, previous: previous, context: context)
                    }
                    if let (file, recordable) = reuse {
                        if let there, there.st_mode & S_IFMT == S_IFREG, UInt64(there.st_dev) == file.device,
                            UInt64(there.st_ino) == file.inode
                        {
                            result.keptFiles += 1
                            // Untouched: its stamp is the one just listed.
                            notes?.linked(noted, known, file: file, in: to.descriptor, stamp: there)
                        } else {
                            if occupied { try clear(entry.name, in: to, at: path, result: &result) }
                            occupied = false
                            var now = stat()
                            if let expected,
                                entry.name.withCString({ fstatat(previous, $0, &now, AT_SYMLINK_NOFOLLOW) }) != 0
                                    || FileStamp(now) != expected
                            {
                                reuse = nil // changed since the check: copy from the source
                            } else if entry.name.withCString({ linkat(previous, $0, to.descriptor, $0, 0) }) != 0 {
                                reuse = nil
                            } else if !isLinked(entry.name, in: to.descriptor, as: file) {
                                // The published name was swapped (for a symlink, another file) since
                                // it was checked: copy from the source instead.
                                try clear(entry.name, in: to, at: path, result: &result)
                                reuse = nil
                            } else {
                                // Linked now: its status just changed.
                                notes?.linked(noted, known, file: file, in: to.descriptor)
                            }
                        }
                        if reuse != nil {
                            result.linkedFiles += 1
                            if recordable, let text { result.sources[text] = key }
                            continue
                        }
                    }
                }
                if occupied { try clear(entry.name, in: to, at: path, result: &result) }
                let (bytes, recorded, fingerprint) = try copyFile(
                    entry.name, from: from.descriptor, to: to.descriptor, shown: source + "/" + EscapedName.text(path),
                    context: context)
                notes?.file(noted, fingerprint)
                result.copiedBytes += bytes
                if let recorded, let text { result.sources[text] = recorded }
            default:
                throw special(source, path)
            }
        }
        // What the reused tree has and the source does not.
        for name in present.keys.map(\.bytes) {
            try clear(name, in: to, at: folder.isEmpty ? name : folder + [0x2F] + name, result: &result)
        }
        return subfolders.reversed()
    }

    /// Whether the previous version's file `name` (in the folder open as `previous`) has the stamp
    /// `stamp`, so holds the bytes recorded with it. `there`: the reused destination's entry of that
    /// name, which is the published file itself when it has the stamp's device and inode (a link
    /// has one stamp), so no second `stat` is needed.
    private static func published(_ name: [UInt8], in previous: Int32, there: stat?, hasStamp stamp: FileStamp) -> Bool
    {
        if let there, there.st_mode & S_IFMT == S_IFREG, UInt64(there.st_dev) == stamp.identity.device,
            UInt64(there.st_ino) == stamp.identity.inode
        {
            return FileStamp(there) == stamp
        }
        var now = stat()
        return name.withCString { fstatat(previous, $0, &now, AT_SYMLINK_NOFOLLOW) } == 0
            && now.st_mode & S_IFMT == S_IFREG && FileStamp(now) == stamp
    }

    /// Whether the entry `name` of the folder `folder` is a regular file with the identity `file`
    /// (its status-change time moved with the link just made).
    private static func isLinked(_ name: [UInt8], in folder: Int32, as file: FileIdentity) -> Bool {
        var linked = stat()
        return name.withCString { fstatat(folder, $0, &linked, AT_SYMLINK_NOFOLLOW) } == 0
            && linked.st_mode & S_IFMT == S_IFREG && FileIdentity(linked) == file
    }

    /// Deletes the entry `name` of the reused destination folder `to` (a folder with all it holds).
    private static func clear(
        _ name: [UInt8], in to: borrowing FolderCursor, at path: [UInt8], result: inout Result
    ) throws(PublishError) {
        let shown = to.shownAs + "/" + EscapedName.text(path)
        try fileWork { () throws(FileSystemError) in try TreeRemoval.remove(name, in: to.descriptor, shownAs: shown) }
        result.replacedEntries += 1
    }

    private static func special(_ source: String, _ path: [UInt8]) -> PublishError {
        PublishError(
            code: .configuration,
            message:
                "\(source)/\(EscapedName.text(path)) is a symlink or special file; a storage carries regular files and folders only: replace it with a copy or remove it"
        )
    }

    /// Copies one file; returns the bytes copied and the source identity recorded on the copy (nil
    /// when none was: the source had not settled, or no attribute could be kept).
    private static func copyFile(
        _ name: [UInt8], from sourceFolder: Int32, to targetFolder: Int32, shown: String, context: Context
    ) throws(PublishError) -> (Int64, [UInt8]?, FileFingerprint?) {
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
                code: .configuration,
                message:
                    "\(shown) is a symlink or special file; a storage carries regular files and folders only: replace it with a copy or remove it"
            )
        }
        let output = name.withCString { openat(targetFolder, $0, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o644) }
        guard output >= 0 else {
            throw PublishError.fileSystem("cannot create the copy of", path: shown, syscall: "openat", errno: errno)
        }
        defer { close(output) }
        let bytes = try fileWork { () throws(FileSystemError) in
            try FileCopy.copy(from: input, to: output, shownFrom: shown, shownTo: "its snapshot copy")
        }
        // The source as it was before the copy read it (`info`); a change during or after the
        // read moves its status-change time past `trustedBefore`, so the record no longer matches.
        // What was written, for the notes: read back from the copy itself.
        let written = context.notes.flatMap { _ in try? ContentTree.fingerprint(ofDescriptor: output, shownAs: shown) }
        guard context.settled(info) else { return (bytes, nil, written) }
        let key = sourceKey(info)
        // None kept: nothing is reused from the attribute (the index still records the source).
        _ = clinux_fsetxattr(output, sourceAttribute, key, key.count)
        return (bytes, key, written)
    }
}
