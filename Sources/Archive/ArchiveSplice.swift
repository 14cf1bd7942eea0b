internal import CLinux
internal import CZip
import FileKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The next version's archive made from the previous one's bytes: the entries that did not change
/// are copied as they are (local header and deflated data, in runs, read with `pread`), the others
/// are built by libzip into a small archive of their own and copied from there, and the central
/// directory is the two archives' records with their offsets moved. An entry's local header and
/// data do not depend on where it sits, so the result is byte for byte the archive
/// ``ZipWriter/archive(folder:to:topLevelFolder:reusing:)`` would build, at the cost of the
/// changes plus one sequential write, instead of a lookup, a CRC read and libzip's copy per entry.
///
/// Only archives this library wrote (``PreviousArchive/marker``) with no ZIP64 field in an entry
/// are spliced, and only when the new archive keeps the old one's end record kind (ZIP64 or not);
/// otherwise ``splice(folder:to:topLevelFolder:previous:folders:files:unchanged:moved:)`` returns nil
/// and the caller builds the archive whole.
extension ZipWriter {
    /// Splices the archive of `folder` (whose content is `folders` and `files`, relative to it)
    /// into `zipPath` from the previous version's archive `previous`. `unchanged`: whether the file
    /// at a path holds the bytes the previous version's file at that path held (whose entry the
    /// previous archive holds); `moved`: new path → the previous version's path holding its bytes.
    /// Returns the number of entries copied, or nil when the previous archive cannot be spliced.
    public static func splice(
        folder: String, to zipPath: String, topLevelFolder: String, previous: String,
        folders: some Sequence<SafeRelativePath>, files: some Sequence<SafeRelativePath>,
        unchanged: (SafeRelativePath) -> Bool, moved: [SafeRelativePath: SafeRelativePath]
    ) throws(ArchiveError) -> Int? {
        let base: SafeRelativePath
        do {
            base = try SafeRelativePath(validating: topLevelFolder)
        } catch {
            throw ArchiveError(code: .unsafeEntryName, message: "top-level folder \(error)", underlying: error)
        }
        guard let old = SourceArchive(path: previous), old.comment == Array(PreviousArchive.marker.utf8) else {
            return nil
        }
        // The entries in the order archive(folder:...) adds them, with the names libzip gives them.
        var items: [(path: SafeRelativePath, isFolder: Bool)] = folders.map { ($0, true) } + files.map { ($0, false) }
        ZipWriter.sortByEntryName(&items)
        let ancestors = base.ancestors + (base.isRoot ? [] : [base])
        var plan: [(name: [UInt8], reuse: Bool, item: (path: SafeRelativePath, isFolder: Bool)?)] = []
        plan.reserveCapacity(ancestors.count + items.count)
        for ancestor in ancestors { plan.append((Array((ancestor.string + "/").utf8), true, nil)) }
        for item in items {
            let name = base.appending(item.path).string + (item.isFolder ? "/" : "")
            plan.append((Array(name.utf8), item.isFolder || unchanged(item.path), item))
        }
        let count = plan.count
        guard old.isZIP64 ? count > 0xFFFF : count < 0xFFFF else { return nil }

        // The entries to build: new, changed, moved, or missing from the previous archive.
        var fresh: [Int] = []
        for (position, entry) in plan.enumerated() where !entry.reuse || old.entries[BytesKey(entry.name)] == nil {
            fresh.append(position)
        }
        var built: SourceArchive?
        let freshPath = zipPath + ".fresh-\(getpid())"
        defer { unlink(freshPath) }
        if !fresh.isEmpty {
            let writer = try ZipWriter(path: freshPath)
            try writer.setComment(PreviousArchive.marker)
            let reusable = PreviousArchive(path: previous)
            for position in fresh {
                let entry = plan[position]
                guard let item = entry.item else {
                    // An ancestor of the top-level folder.
                    try writer.addDirectory(String(decoding: entry.name.dropLast(), as: UTF8.self))
                    continue
                }
                try writer.add(
                    item.path, isFolder: item.isFolder, of: folder, under: base, from: reusable, at: moved[item.path])
            }
            try writer.close()
            guard let opened = SourceArchive(path: freshPath), opened.entries.count == fresh.count else {
                throw ArchiveError(
                    code: .io, message: "\(freshPath): the archive of the changed entries reads back wrong")
            }
            built = opened
        }
        let freshSet = Set(fresh)

        let output = open(zipPath, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard output >= 0 else { throw ArchiveError.io("creating \(zipPath)", errno: clinux_errno()) }
        var finished = false
        defer {
            Glibc.close(output)
            if !finished { unlink(zipPath) }
        }
        var sink = SpliceSink(descriptor: output, path: zipPath)
        var directory: [UInt8] = []
        directory.reserveCapacity(old.directoryBytes + 64 * fresh.count)
        var copied = 0
        for (position, entry) in plan.enumerated() {
            let archive: SourceArchive
            if freshSet.contains(position) {
                guard let built else { preconditionFailure("fresh entries were built") }
                archive = built
            } else {
                archive = old
                copied += 1
            }
            guard let found = archive.entries[BytesKey(entry.name)] else {
                throw ArchiveError(code: .io, message: "\(zipPath): entry '\(entry.name)' went missing while splicing")
            }
            guard sink.offset < 0xFFFF_FFFF else { return nil } // would need ZIP64 offsets
            let record = archive.record(found)
            directory += record
            let at = directory.count - record.count + 42
            let offset = UInt32(sink.offset)
            for shift in 0..<4 { directory[at + shift] = UInt8(truncatingIfNeeded: offset >> (8 * shift)) }
            try sink.copy(archive, range: found.block)
        }
        try sink.flush()
        let directoryOffset = sink.offset
        try sink.write(directory)
        guard let tail = old.tail(count: count, directorySize: directory.count, directoryOffset: directoryOffset) else {
            return nil
        }
        try sink.write(tail)
        finished = true
        return copied
    }
}

/// Writes an archive being spliced, copying runs of neighbouring blocks of one archive at once.
private struct SpliceSink {
    let descriptor: Int32
    let path: String
    private(set) var offset = 0
    private var pending: (archive: SourceArchive, range: Range<Int>)?

    init(descriptor: Int32, path: String) {
        self.descriptor = descriptor
        self.path = path
    }

    mutating func copy(_ archive: SourceArchive, range: Range<Int>) throws(ArchiveError) {
        if let run = pending, run.archive === archive, run.range.upperBound == range.lowerBound {
            pending = (archive, run.range.lowerBound..<range.upperBound)
        } else {
            try flush()
            pending = (archive, range)
        }
        offset += range.count
    }

    mutating func flush() throws(ArchiveError) {
        guard let run = pending else { return }
        pending = nil
        try run.archive.copy(run.range, to: descriptor, outputPath: path, writing: .system)
    }

    mutating func write(_ bytes: [UInt8]) throws(ArchiveError) {
        try flush()
        if let code = bytes.withUnsafeBytes({ FileWriting.system.writeAll(descriptor, $0) }) {
            throw ArchiveError.io("writing \(path)", errno: code)
        }
        offset += bytes.count
    }
}

/// A zip archive opened for splicing, its central directory read: each entry's local block
/// (header and data) and central record. Nil for anything this splice does not handle: ZIP64
/// fields in an entry, data descriptors, gaps or overlaps between blocks, more than one disk.
///
/// Read with `pread`, never mapped: another program may truncate the file meanwhile (a `cp` over
/// the storage's archive during a publish), and a read of a mapping past the new end kills the
/// process with `SIGBUS`. A read that comes up short is a failure with a message instead: the
/// parse says the archive cannot be spliced, and a copy throws.
final class SourceArchive {
    struct Entry {
        /// The local header and data, in the file.
        var block: Range<Int>
        /// The central directory record, in the file.
        var record: Range<Int>
    }

    private let descriptor: Int32
    private let path: String
    /// The file's size when it was opened.
    let size: Int
    /// By name, as stored.
    private(set) var entries: [BytesKey: Entry] = [:]
    private(set) var comment: [UInt8] = []
    private(set) var isZIP64 = false
    /// Where the central directory ends and the end records start.
    private var tailStart = 0
    private var endRecord = 0
    private var directoryStart = 0
    /// The bytes from `directoryStart` to the end, read once the end records give it.
    private var suffix: [UInt8] = []
    /// A window of the file for the reads before the directory (the end record's search, the
    /// local headers, which come in file order): `windowBytes` at `windowStart`.
    private var window: [UInt8] = []
    private var windowStart = 0
    /// A read came up short or failed: nothing read is trusted.
    private var failed = false

    static let windowBytes = 64 << 10

    var directoryBytes: Int { tailStart - directoryStart }

    init?(path: String) {
        let descriptor = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        var info = stat()
        guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_size >= 22 else {
            close(descriptor)
            return nil
        }
        self.descriptor = descriptor
        self.path = path
        self.size = Int(info.st_size)
        guard read(), !failed else { return nil }
    }

    deinit {
        close(descriptor)
    }

    func record(_ entry: Entry) -> [UInt8] {
        Array(suffix[(entry.record.lowerBound - directoryStart)..<(entry.record.upperBound - directoryStart)])
    }

    /// Writes the bytes `range` of the archive to `output` (through `writing`), read with `pread`
    /// in blocks of 1 MiB. Throws when the file ends sooner: it changed while the splice read it.
    func copy(_ range: Range<Int>, to output: Int32, outputPath: String, writing: FileWriting) throws(ArchiveError) {
        var at = range.lowerBound
        let block = min(range.count, 1 << 20)
        guard block > 0 else { return }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: block, alignment: 16)
        defer { buffer.deallocate() }
        while at < range.upperBound {
            let want = min(block, range.upperBound - at)
            let got = pread(descriptor, buffer.baseAddress, want, off_t(at))
            if got < 0 {
                if clinux_errno() == EINTR { continue }
                throw ArchiveError.io("reading \(path)", errno: clinux_errno())
            }
            guard got > 0 else { throw changed() }
            if let code = writing.writeAll(output, UnsafeRawBufferPointer(rebasing: buffer[..<got])) {
                throw ArchiveError.io("writing \(outputPath)", errno: code)
            }
            at += got
        }
    }

    private func changed() -> ArchiveError {
        ArchiveError(
            code: .io,
            message:
                "\(path) became shorter while it was copied (another program wrote it); nothing was published: run the command again"
        )
    }

    /// The byte at `at`: from the suffix once read, else from the window (read again around
    /// `at` when it is outside). 0, with `failed` set, where the file cannot be read.
    private func byte(_ at: Int) -> UInt8 {
        if !suffix.isEmpty, at >= directoryStart {
            let index = at - directoryStart
            if index < suffix.count { return suffix[index] }
            failed = true
            return 0
        }
        if at < windowStart || at >= windowStart + window.count {
            guard at >= 0, at < size else {
                failed = true
                return 0
            }
            // Half behind `at`: the end record's search reads backwards, the local headers
            // forwards; either way a read serves half a window.
            let start = max(0, min(at - Self.windowBytes / 2, size - Self.windowBytes))
            let count = min(Self.windowBytes, size - start)
            guard let bytes = readExactly(at: start, count: count) else {
                failed = true
                return 0
            }
            (window, windowStart) = (bytes, start)
        }
        return window[at - windowStart]
    }

    private func bytes(_ range: Range<Int>) -> [UInt8] {
        if !suffix.isEmpty, range.lowerBound >= directoryStart, range.upperBound - directoryStart <= suffix.count {
            return Array(suffix[(range.lowerBound - directoryStart)..<(range.upperBound - directoryStart)])
        }
        return range.map { byte($0) }
    }

    private func readExactly(at offset: Int, count: Int) -> [UInt8]? {
        guard offset >= 0, count >= 0, offset + count <= size else { return nil }
        return CentralDirectoryWindows.readExactly(descriptor, at: UInt64(offset), count: count)
    }

    private func u16(_ at: Int) -> Int { Int(byte(at)) | Int(byte(at + 1)) << 8 }
    private func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }
    private func u64(_ at: Int) -> Int? {
        let high = u32(at + 4)
        return high < 0x7FFF_FFFF ? u32(at) | high << 32 : nil
    }

    private func read() -> Bool {
        // The end record: the last signature whose comment reaches the end of the file.
        var end = size - 22
        let lowest = max(0, size - 22 - 0xFFFF)
        while end >= lowest, !failed {
            if u32(end) == 0x0605_4B50, end + 22 + u16(end + 20) == size { break }
            end -= 1
        }
        guard !failed, end >= lowest, u16(end + 4) == 0, u16(end + 6) == 0 else { return false }
        endRecord = end
        comment = bytes((end + 22)..<size)
        var count = u16(end + 10)
        var directorySize = u32(end + 12)
        var start = u32(end + 16)
        tailStart = end
        if count == 0xFFFF || directorySize == 0xFFFF_FFFF || start == 0xFFFF_FFFF {
            let locator = end - 20
            guard locator >= 0, u32(locator) == 0x0706_4B50, let record = u64(locator + 8), record >= 0,
                record + 56 <= locator, u32(record) == 0x0606_4B50, let total = u64(record + 32),
                let size64 = u64(record + 40), let start64 = u64(record + 48)
            else { return false }
            isZIP64 = true
            tailStart = record
            (count, directorySize, start) = (total, size64, start64)
        }
        guard !failed, start >= 0, directorySize >= 0, start + directorySize == tailStart, count >= 0,
            count <= directorySize / 46
        else { return false }
        directoryStart = start
        // The directory and the end records, read at once: the records are copied from here.
        guard let suffix = readExactly(at: start, count: size - start) else { return false }
        self.suffix = suffix
        var at = start
        var blocks: [(offset: Int, name: [UInt8])] = []
        blocks.reserveCapacity(count)
        entries.reserveCapacity(count)
        for _ in 0..<count {
            guard at + 46 <= tailStart, u32(at) == 0x0201_4B50 else { return false }
            let compressed = u32(at + 20)
            let plain = u32(at + 24)
            let nameLength = u16(at + 28)
            let length = 46 + nameLength + u16(at + 30) + u16(at + 32)
            let local = u32(at + 42)
            guard compressed != 0xFFFF_FFFF, plain != 0xFFFF_FFFF, local != 0xFFFF_FFFF, u16(at + 34) == 0,
                at + length <= tailStart
            else { return false }
            let name = bytes((at + 46)..<(at + 46 + nameLength))
            guard entries[BytesKey(name)] == nil else { return false }
            // The local block: its header, name, extra field and data; no data descriptor.
            guard local + 30 <= start, u32(local) == 0x0403_4B50, u16(local + 6) & 0x0008 == 0 else {
                return false
            }
            let blockEnd = local + 30 + u16(local + 26) + u16(local + 28) + compressed
            entries[BytesKey(name)] = Entry(block: local..<blockEnd, record: at..<(at + length))
            blocks.append((local, name))
            at += length
            if failed { return false }
        }
        guard at == tailStart else { return false }
        // Blocks follow one another from the start of the file to the central directory.
        blocks.sort { $0.offset < $1.offset }
        var expected = 0
        for block in blocks {
            guard let entry = entries[BytesKey(block.name)], entry.block.lowerBound == expected else { return false }
            expected = entry.block.upperBound
        }
        return expected == start
    }

    /// The end records for an archive like this one with `count` entries and the given central
    /// directory: this one's, with the counts, size and offset changed. Nil when a value does not
    /// fit where this archive keeps it.
    func tail(count: Int, directorySize: Int, directoryOffset: Int) -> [UInt8]? {
        var tail = Array(suffix[(tailStart - directoryStart)...])
        func put(_ value: Int, at: Int, width: Int) {
            for shift in 0..<width { tail[at + shift] = UInt8(truncatingIfNeeded: value >> (8 * shift)) }
        }
        let end = endRecord - tailStart
        if isZIP64 {
            put(count, at: 24, width: 8)
            put(count, at: 32, width: 8)
            put(directorySize, at: 40, width: 8)
            put(directoryOffset, at: 48, width: 8)
            put(directoryOffset + directorySize, at: end - 20 + 8, width: 8)
        }
        // The end record's fields: kept where this archive marks them as in the ZIP64 record.
        for (at, width, value) in [(8, 2, count), (10, 2, count), (12, 4, directorySize), (16, 4, directoryOffset)] {
            let marker = width == 2 ? 0xFFFF : 0xFFFF_FFFF
            let current = width == 2 ? u16(endRecord + at) : u32(endRecord + at)
            if isZIP64 && current == marker { continue }
            guard value < marker else { return nil }
            put(value, at: end + at, width: width)
        }
        return tail
    }
}
