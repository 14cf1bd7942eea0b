internal import CZip
import FileKit

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An archive's central directory cut into windows of at most `size` records, so that libzip,
/// which reads a whole central directory into memory when it opens an archive (about 320 bytes a
/// record: 309 MiB for 1,000,000 files), never holds more than one window's.
///
/// Each window is opened as an archive of its own (``ZipReader/init(window:checkConsistency:)``):
/// a `zip_source` whose bytes are the real archive's up to its central directory, then the
/// window's records copied as they are, then end records written for them. libzip decodes every
/// record, reads every local header and inflates every entry as it would in the whole archive;
/// this type only finds where the records start, from the length fields each record begins with.
///
/// Only a plainly laid-out archive is cut: one end record exactly at the end with its comment, a
/// ZIP64 end record exactly where its locator says, the central directory exactly before the end
/// records, every record signed and its count the declared one. Anything else (prepended data,
/// trailing bytes, two end records that both fit, a damaged record) returns nil, and the caller
/// opens the archive whole, where libzip judges it as it always did.
struct CentralDirectoryWindows {
    /// Records in the central directory.
    let entryCount: UInt64
    /// Where the central directory starts in the archive.
    let offset: UInt64
    /// For each window, the offset of its first record from ``offset``; then the directory's size.
    let starts: [UInt64]
    /// Records per window (the last one may hold fewer).
    let size: Int

    var count: Int { starts.count - 1 }

    /// The window holding entry `index`, and the entry's index within it.
    func locate(_ index: UInt64) -> (window: Int, local: UInt64) {
        (Int(index / UInt64(size)), index % UInt64(size))
    }

    /// The first entry index of `window`.
    func firstIndex(of window: Int) -> UInt64 { UInt64(window) * UInt64(size) }

    /// Entries in `window`.
    func entries(in window: Int) -> UInt64 {
        min(UInt64(size), entryCount - firstIndex(of: window))
    }

    static let endLength = 22
    static let locatorLength = 20
    static let end64Length = 56
    static let recordLength = 46

    /// Where an archive's central directory is, as its end records say.
    struct DirectoryLocation: Equatable {
        /// Records the directory declares.
        var entries: UInt64
        /// Where the directory starts in the archive.
        var offset: UInt64
        /// Its length in bytes.
        var size: UInt64
    }

    /// The bytes from the archive's end that ``locate(fileSize:read:)`` reads (the end record with
    /// the longest comment, the ZIP64 locator and the ZIP64 end record before it).
    static let tailLength = endLength + 0xFFFF + locatorLength + end64Length

    /// Finds the central directory of an archive of `fileSize` bytes whose bytes `read(offset,
    /// count)` gives (nil when they cannot all be read); nil unless plainly laid out: exactly one
    /// end record, exactly at the end with its comment, a ZIP64 end record exactly where its
    /// locator says, and the directory right before the end records.
    static func locate(fileSize: UInt64, read: (UInt64, Int) -> [UInt8]?) -> DirectoryLocation? {
        guard fileSize >= UInt64(endLength) else { return nil }
        // The end record and its comment (at most 65,535 bytes), with room for the locator.
        let tailLength = Int(min(fileSize, UInt64(endLength + 0xFFFF + locatorLength)))
        let tailStart = fileSize - UInt64(tailLength)
        guard let tail = read(tailStart, tailLength) else { return nil }
        // Exactly one end record whose comment reaches exactly to the end of the file.
        var found: Int?
        var position = tailLength - endLength
        while position >= 0 {
            if tail[position] == 0x50, tail[position + 1] == 0x4B, tail[position + 2] == 0x05,
                tail[position + 3] == 0x06, position + endLength + Int(le16(tail, position + 20)) == tailLength
            {
                guard found == nil else { return nil }
                found = position
            }
            position -= 1
        }
        guard let end = found else { return nil }
        guard le16(tail, end + 4) == 0, le16(tail, end + 6) == 0, le16(tail, end + 8) == le16(tail, end + 10) else {
            return nil
        }
        var entries = UInt64(le16(tail, end + 10))
        var directorySize = UInt64(le32(tail, end + 12))
        var directoryOffset = UInt64(le32(tail, end + 16))
        let endOffset = tailStart + UInt64(end)
        var directoryEnd = endOffset
        let locator = end - locatorLength
        if locator >= 0, tail[locator] == 0x50, tail[locator + 1] == 0x4B, tail[locator + 2] == 0x06,
            tail[locator + 3] == 0x07
        {
            guard le32(tail, locator + 4) == 0, le32(tail, locator + 16) <= 1 else { return nil }
            let end64Offset = le64(tail, locator + 8)
            let locatorOffset = tailStart + UInt64(locator)
            guard end64Offset <= locatorOffset, locatorOffset - end64Offset >= UInt64(end64Length),
                let record = read(end64Offset, end64Length),
                record[0] == 0x50, record[1] == 0x4B, record[2] == 0x06, record[3] == 0x06,
                le64(record, 4) &+ 12 &+ end64Offset == locatorOffset,
                le32(record, 16) == 0, le32(record, 20) == 0, le64(record, 24) == le64(record, 32)
            else { return nil }
            let entries64 = le64(record, 32)
            let size64 = le64(record, 40)
            let offset64 = le64(record, 48)
            // The short fields either mark "see the ZIP64 record" or agree with it.
            guard entries == 0xFFFF || entries == entries64, directorySize == 0xFFFF_FFFF || directorySize == size64,
                directoryOffset == 0xFFFF_FFFF || directoryOffset == offset64
            else { return nil }
            (entries, directorySize, directoryOffset) = (entries64, size64, offset64)
            directoryEnd = end64Offset
        }
        guard directoryOffset <= directoryEnd, directoryEnd - directoryOffset == directorySize,
            entries <= directorySize / UInt64(recordLength)
        else { return nil }
        return DirectoryLocation(entries: entries, offset: directoryOffset, size: directorySize)
    }

    /// Reads the layout of the archive open as `fd` (`fileSize` bytes); nil unless plainly laid out.
    static func read(fd: Int32, fileSize: UInt64, windowSize: Int) -> CentralDirectoryWindows? {
        guard windowSize > 0,
            let location = locate(fileSize: fileSize, read: { readExactly(fd, at: $0, count: $1) })
        else { return nil }
        let (entries, directoryOffset, directorySize) = (location.entries, location.offset, location.size)
        let directoryEnd = directoryOffset + directorySize
        // Walk the records: each starts with its signature and says how long it is.
        var starts: [UInt64] = []
        starts.reserveCapacity(Int(entries / UInt64(windowSize)) + 2)
        var reader = BufferedReader(fd: fd, start: directoryOffset, end: directoryEnd)
        var at: UInt64 = 0
        for index in 0..<entries {
            if index % UInt64(windowSize) == 0 { starts.append(at) }
            guard let header = reader.bytes(at: directoryOffset + at, count: recordLength),
                header[0] == 0x50, header[1] == 0x4B, header[2] == 0x01, header[3] == 0x02
            else { return nil }
            at +=
                UInt64(recordLength) + UInt64(le16(header, 28)) + UInt64(le16(header, 30))
                + UInt64(le16(header, 32))
            guard at <= directorySize else { return nil }
        }
        guard at == directorySize else { return nil }
        starts.append(directorySize)
        return CentralDirectoryWindows(entryCount: entries, offset: directoryOffset, starts: starts, size: windowSize)
    }

    /// The end records of a window of `entries` records, `length` bytes, right after the data.
    func endRecords(entries: UInt64, length: UInt64) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.end64Length + Self.locatorLength + Self.endLength)
        func put(_ value: UInt64, _ width: Int) {
            for shift in 0..<width { bytes.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(shift)))) }
        }
        // ZIP64 end record: size of the rest (44), made by and needed (4.5), disks 0, counts, size, offset.
        put(0x0606_4B50, 4)
        put(UInt64(Self.end64Length - 12), 8)
        put(45, 2)
        put(45, 2)
        put(0, 4)
        put(0, 4)
        put(entries, 8)
        put(entries, 8)
        put(length, 8)
        put(offset, 8)
        // Its locator: on disk 0, at the end of this window's records, one disk.
        put(0x0706_4B50, 4)
        put(0, 4)
        put(offset + length, 8)
        put(1, 4)
        // The end record, every field pointing to the ZIP64 one, no comment.
        put(0x0605_4B50, 4)
        put(0, 2)
        put(0, 2)
        put(0xFFFF, 2)
        put(0xFFFF, 2)
        put(0xFFFF_FFFF, 4)
        put(0xFFFF_FFFF, 4)
        put(0, 2)
        return bytes
    }

    static func le16(_ bytes: [UInt8], _ at: Int) -> UInt16 {
        UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8
    }

    static func le32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        UInt32(le16(bytes, at)) | UInt32(le16(bytes, at + 2)) << 16
    }

    static func le64(_ bytes: [UInt8], _ at: Int) -> UInt64 {
        UInt64(le32(bytes, at)) | UInt64(le32(bytes, at + 4)) << 32
    }

    /// `count` bytes at `offset`, or nil when they cannot all be read.
    static func readExactly(_ fd: Int32, at offset: UInt64, count: Int) -> [UInt8]? {
        guard offset <= UInt64(Int64.max),
            let data = try? DescriptorIO.read(fd, at: Int64(offset), count: count, path: ""), data.count == count
        else { return nil }
        return [UInt8](data)
    }

    /// Reads a range of a file forwards in 1 MiB blocks.
    private struct BufferedReader {
        let fd: Int32
        let end: UInt64
        var bufferStart: UInt64
        var buffer: [UInt8] = []

        init(fd: Int32, start: UInt64, end: UInt64) {
            self.fd = fd
            self.end = end
            self.bufferStart = start
        }

        /// `count` bytes at `offset` (not before the last block read), nil past `end` or on a failed read.
        mutating func bytes(at offset: UInt64, count: Int) -> [UInt8]? {
            guard offset >= bufferStart, offset + UInt64(count) <= end else { return nil }
            if offset + UInt64(count) > bufferStart + UInt64(buffer.count) {
                let length = Int(min(UInt64(1 << 20), end - offset))
                guard length >= count, let block = readExactly(fd, at: offset, count: length) else { return nil }
                (bufferStart, buffer) = (offset, block)
            }
            let from = Int(offset - bufferStart)
            return Array(buffer[from..<from + count])
        }
    }
}

/// The bytes libzip reads for one window: the archive up to its central directory, the window's
/// records, and the end records made for them. Reads go to the archive's descriptor with
/// `pread`, so the windows and workers of one extraction share it; small reads (libzip reads
/// each local header and small entry in pieces) are served from a 64 KiB read-ahead block, as
/// libzip's own file source serves them from stdio's buffer.
///
/// Made with ``init(rangeBytes:start:directoryOffset:tail:)``, it is an archive of which only one
/// byte range was fetched (``ArchiveRangeReader``): the data part reads from the range's bytes in
/// memory where the range lies and as zeros elsewhere, and the records and end records are in
/// memory too.
final class WindowSource {
    private static let blockSize = 64 * 1024
    private let fd: Int32
    /// Set for a fetched range: where its bytes (`memory`) lie in the archive.
    private let range: (start: UInt64, length: UInt64)?
    /// A fetched range's bytes (the caller keeps them alive while the source is used).
    private let memory: UnsafeRawBufferPointer?
    private let dataLength: UInt64
    private let recordsStart: UInt64
    private let recordsLength: UInt64
    private let end: [UInt8]
    private var position: UInt64 = 0
    fileprivate var error = zip_error_t()
    private let block = UnsafeMutableRawBufferPointer.allocate(byteCount: WindowSource.blockSize, alignment: 16)
    /// Where the read-ahead block starts, and how many of its bytes are valid.
    private var blockStart: UInt64 = 0
    private var blockLength = 0

    var length: UInt64 { dataLength + recordsLength + UInt64(end.count) }

    init(fd: Int32, windows: CentralDirectoryWindows, window: Int) {
        self.fd = fd
        dataLength = windows.offset
        recordsStart = windows.offset + windows.starts[window]
        recordsLength = windows.starts[window + 1] - windows.starts[window]
        end = windows.endRecords(entries: windows.entries(in: window), length: recordsLength)
        range = nil
        memory = nil
        zip_error_init(&error)
    }

    /// An archive whose bytes `start..<start + bytes.count` are `bytes` (valid while the source is
    /// read), whose other bytes before `directoryOffset` read as zeros, followed by `tail` (central
    /// directory records and their end records).
    init(rangeBytes bytes: UnsafeRawBufferPointer, start: UInt64, directoryOffset: UInt64, tail: [UInt8]) {
        fd = -1
        range = (start, UInt64(bytes.count))
        memory = bytes
        dataLength = directoryOffset
        recordsStart = 0
        recordsLength = 0
        end = tail
        zip_error_init(&error)
    }

    deinit {
        block.deallocate()
        zip_error_fini(&error)
    }

    /// Copies up to `count` bytes from the current position into `destination`; bytes copied,
    /// or -1.
    fileprivate func read(into destination: UnsafeMutableRawPointer, count: UInt64) -> Int64 {
        let wanted = min(count, length - min(position, length))
        if wanted >= UInt64(Self.blockSize) { return readThrough(into: destination, count: wanted) }
        if position < blockStart || position + wanted > blockStart + UInt64(blockLength) {
            let saved = position
            let got = readThrough(into: block.baseAddress!, count: min(UInt64(Self.blockSize), length - position))
            guard got >= 0 else { return -1 }
            (position, blockStart, blockLength) = (saved, saved, Int(got))
        }
        let from = Int(position - blockStart)
        destination.copyMemory(from: block.baseAddress! + from, byteCount: Int(wanted))
        position += wanted
        return Int64(wanted)
    }

    /// ``read(into:count:)`` without the read-ahead block.
    private func readThrough(into destination: UnsafeMutableRawPointer, count: UInt64) -> Int64 {
        var done: UInt64 = 0
        while done < count, position < length {
            let want = count - done
            let target = destination + Int(done)
            let got: Int
            if let range, position < dataLength {
                let rangeEnd = range.start + range.length
                if position >= range.start, position < rangeEnd, let memory {
                    got = Int(min(want, rangeEnd - position, 1 << 30))
                    target.copyMemory(from: memory.baseAddress! + Int(position - range.start), byteCount: got)
                } else {
                    // Not fetched: zeros, which no signature matches.
                    let limit = position < range.start ? range.start - position : dataLength - position
                    got = Int(min(want, limit, 1 << 30))
                    target.initializeMemory(as: UInt8.self, repeating: 0, count: got)
                }
            } else if position < dataLength + recordsLength {
                // The data, then the records: both read from the archive.
                let inData = position < dataLength
                let source = inData ? position : recordsStart + (position - dataLength)
                let limit = inData ? dataLength - position : dataLength + recordsLength - position
                got = pread(fd, target, Int(min(want, limit, 1 << 30)), off_t(source))
                if got < 0 {
                    if errno == EINTR { continue }
                    zip_error_set(&error, ZIP_ER_READ, errno)
                    return -1
                }
                if got == 0 {
                    zip_error_set(&error, ZIP_ER_READ, EIO) // the archive got shorter
                    return -1
                }
            } else {
                let from = Int(position - dataLength - recordsLength)
                got = Int(min(want, UInt64(end.count - from)))
                end.withUnsafeBytes { target.copyMemory(from: $0.baseAddress! + from, byteCount: got) }
            }
            done += UInt64(got)
            position += UInt64(got)
        }
        return Int64(done)
    }

    /// A libzip source reading this window; libzip frees it (and releases this object).
    func makeSource() -> OpaquePointer? {
        let userdata = Unmanaged.passRetained(self).toOpaque()
        var error = zip_error_t()
        zip_error_init(&error)
        defer { zip_error_fini(&error) }
        guard let source = zip_source_function_create(windowCallback, userdata, &error) else {
            Unmanaged<WindowSource>.fromOpaque(userdata).release()
            return nil
        }
        return source
    }

    fileprivate func seek(_ data: UnsafeMutableRawPointer?, _ length: UInt64) -> Int64 {
        let new = zip_source_seek_compute_offset(position, self.length, data, length, &error)
        guard new >= 0 else { return -1 }
        position = UInt64(new)
        return 0
    }

    fileprivate func stat(_ data: UnsafeMutableRawPointer?, _ length: UInt64) -> Int64 {
        guard let data, length >= UInt64(MemoryLayout<zip_stat_t>.size) else {
            zip_error_set(&error, ZIP_ER_INVAL, 0)
            return -1
        }
        let stat = data.bindMemory(to: zip_stat_t.self, capacity: 1)
        zip_stat_init(stat)
        stat.pointee.size = self.length
        stat.pointee.valid |= UInt64(ZIP_STAT_SIZE)
        return Int64(MemoryLayout<zip_stat_t>.size)
    }

    fileprivate func errorData(_ data: UnsafeMutableRawPointer?, _ length: UInt64) -> Int64 {
        zip_error_to_data(&error, data, length)
    }

    fileprivate func unsupported() -> Int64 {
        zip_error_set(&error, ZIP_ER_OPNOTSUPP, 0)
        return -1
    }

    fileprivate func rewind() { position = 0 }
    fileprivate var currentPosition: Int64 { Int64(position) }
}

private let windowCommands: Int64 = [
    ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE, ZIP_SOURCE_STAT, ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE,
    ZIP_SOURCE_SEEK, ZIP_SOURCE_TELL, ZIP_SOURCE_SUPPORTS,
].reduce(0) { $0 | (Int64(1) << Int64($1.rawValue)) }

private func windowCallback(
    _ userdata: UnsafeMutableRawPointer?, _ data: UnsafeMutableRawPointer?, _ length: UInt64,
    _ command: zip_source_cmd_t
) -> Int64 {
    guard let userdata else { return -1 }
    let window = Unmanaged<WindowSource>.fromOpaque(userdata).takeUnretainedValue()
    switch command {
    case ZIP_SOURCE_OPEN:
        window.rewind()
        return 0
    case ZIP_SOURCE_READ:
        guard let data else { return window.unsupported() }
        return window.read(into: data, count: length)
    case ZIP_SOURCE_CLOSE:
        return 0
    case ZIP_SOURCE_STAT:
        return window.stat(data, length)
    case ZIP_SOURCE_ERROR:
        return window.errorData(data, length)
    case ZIP_SOURCE_FREE:
        Unmanaged<WindowSource>.fromOpaque(userdata).release()
        return 0
    case ZIP_SOURCE_SEEK:
        return window.seek(data, length)
    case ZIP_SOURCE_TELL:
        return window.currentPosition
    case ZIP_SOURCE_SUPPORTS:
        return windowCommands
    default:
        return window.unsupported()
    }
}

/// How an extraction opens its archive: in windows of its central directory when it is plainly
/// laid out (``CentralDirectoryWindows``), else whole. Holds the archive open for the windows'
/// reads; ``close()`` after the last reader is gone.
struct ArchiveOpener: Sendable {
    let path: String
    private let fd: Int32
    private let windows: CentralDirectoryWindows?

    /// Opens `path`; `windowSize` records per window (0 or less: whole).
    init(path: String, windowSize: Int) throws(ArchiveError) {
        self.path = path
        fd = open(path, O_RDONLY | O_CLOEXEC)
        var info = stat()
        guard fd >= 0, fstat(fd, &info) == 0 else {
            let code = errno
            if fd >= 0 { Glibc.close(fd) }
            throw ArchiveError(
                code: .cannotOpen, message: "cannot open archive \(path); check that it exists and is readable",
                errno: code)
        }
        windows =
            windowSize > 0 && info.st_mode & S_IFMT == S_IFREG
            ? CentralDirectoryWindows.read(fd: fd, fileSize: UInt64(info.st_size), windowSize: windowSize) : nil
    }

    func close() {
        Glibc.close(fd)
    }

    /// How many handles cover the archive: its windows, or 1.
    var windowCount: Int { windows?.count ?? 1 }
    /// Whether the archive is read in windows.
    var isWindowed: Bool { windows != nil }
    /// The entries its central directory declares, when read in windows (known before any opening).
    var entryCount: UInt64? { windows?.entryCount }

    /// The window holding the archive's entry `index`.
    func window(of index: UInt64) -> Int { windows?.locate(index).window ?? 0 }

    /// A reader of window `window` (of the whole archive when it is not windowed); with
    /// `checkConsistency`, opened under libzip's stricter checks (see ``checkConsistency()``).
    func reader(_ window: Int, checkConsistency: Bool = false) throws(ArchiveError) -> ZipReader {
        guard let windows else {
            if checkConsistency { try ZipReader.checkConsistency(path: path) }
            return try ZipReader(path: path)
        }
        let reader = try ZipReader(
            window: WindowSource(fd: fd, windows: windows, window: window), path: path,
            firstIndex: windows.firstIndex(of: window), checkConsistency: checkConsistency)
        guard UInt64(reader.entryCount) == windows.entries(in: window) else {
            throw ArchiveError(
                code: .corrupt,
                message: "\(path): its central directory reads differently in parts; download the archive again")
        }
        return reader
    }

    /// A reader of window `window` opened under libzip's stricter checks
    /// (``ZipReader/checkConsistency(path:)``), and the error they raised when they failed, with a
    /// reader opened without them (nil when that fails too, which is thrown). The checks compare
    /// each entry with its local header and its data's end with the central directory's start,
    /// one entry at a time, so windows check what the whole archive would; their failure is kept
    /// for after the names are judged, whose messages are more precise.
    func checkedReader(_ window: Int) throws(ArchiveError) -> (reader: ZipReader, inconsistency: ArchiveError?) {
        do {
            return (try reader(window, checkConsistency: true), nil)
        } catch {
            return (try reader(window), error)
        }
    }
}
