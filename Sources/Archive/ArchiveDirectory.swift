import FileKit

/// The central directory of an archive that is not on this machine, read from its last bytes:
/// where each entry's bytes lie, so that a client can fetch only the entries it needs as byte
/// ranges and inflate them with ``ArchiveRangeReader``.
///
/// Only a plainly laid-out archive is read (as ``CentralDirectoryWindows`` requires): its end
/// records exactly at its end, its directory right before them, every record signed, and the
/// entries' local headers at distinct offsets before the directory. Anything else gives nil, and
/// the caller fetches the files another way.
public struct ArchiveDirectory: Sendable {
    /// One entry of the directory.
    public struct Entry: Sendable, Equatable {
        /// The entry's name as stored.
        public var name: [UInt8]
        /// Where its local header starts in the archive.
        public var start: UInt64
        /// Where the next entry's local header, or the directory, starts: the entry's local
        /// header, data and data descriptor are the bytes `start..<end`.
        public var end: UInt64
        /// Its record's bytes in ``records``.
        var record: Range<Int> = 0..<0
    }

    /// The fixed part of a local header: the name and extra field follow.
    public static let localHeaderLength = 30

    /// The size of `entry`'s data when its directory record says it is stored (no compression)
    /// and unencrypted, with equal sizes and no ZIP64 marker; nil otherwise. Its local header
    /// must say so too (``storedDataOffset(localHeader:)``).
    public func storedSize(of entry: Entry) -> UInt64? {
        typealias Layout = CentralDirectoryWindows
        let at = entry.record.lowerBound
        guard entry.record.count >= Layout.recordLength, Layout.le16(records, at + 8) & 1 == 0,
            Layout.le16(records, at + 10) == 0, case let size = Layout.le32(records, at + 24),
            Layout.le32(records, at + 20) == size, size != 0xFFFF_FFFF
        else { return nil }
        return UInt64(size)
    }

    /// Where a stored entry's data starts, counted from its local header, whose first
    /// ``localHeaderLength`` bytes are `localHeader`: nil unless the header has the local
    /// header's signature and says the entry is stored and unencrypted.
    public static func storedDataOffset(localHeader bytes: UnsafeRawBufferPointer) -> Int? {
        guard bytes.count >= localHeaderLength else { return nil }
        func le16(_ offset: Int) -> Int { Int(bytes[offset]) | Int(bytes[offset + 1]) << 8 }
        guard le16(0) | le16(2) << 16 == 0x0403_4B50, le16(6) & 1 == 0, le16(8) == 0 else { return nil }
        return localHeaderLength + le16(26) + le16(28)
    }

    /// Where an archive's central directory lies, as its end records say.
    public struct Location: Sendable, Equatable {
        /// Records the directory declares.
        public var entries: UInt64
        /// Its bytes in the archive.
        public var bytes: Range<UInt64>
    }

    /// Where the directory starts in the archive.
    public let offset: UInt64
    /// The entries, in the order of their bytes in the archive.
    public let entries: [Entry]
    /// The directory's records as the archive holds them.
    let records: [UInt8]

    /// How many of the archive's last bytes ``locate(tail:archiveSize:)`` needs: the end record
    /// with the longest comment, the ZIP64 locator and the ZIP64 end record.
    public static var tailLength: Int { CentralDirectoryWindows.tailLength }

    /// Where the directory of an archive of `archiveSize` bytes lies, from its last `tail.count`
    /// bytes (``tailLength``, or the whole archive when it is shorter); nil unless plainly laid out.
    public static func locate(tail: [UInt8], archiveSize: UInt64) -> Location? {
        guard UInt64(tail.count) <= archiveSize else { return nil }
        let tailStart = archiveSize - UInt64(tail.count)
        let location = CentralDirectoryWindows.locate(fileSize: archiveSize) { offset, count in
            guard offset >= tailStart, offset - tailStart + UInt64(count) <= UInt64(tail.count) else { return nil }
            let from = Int(offset - tailStart)
            return Array(tail[from..<from + count])
        }
        return location.map { Location(entries: $0.entries, bytes: $0.offset..<$0.offset + $0.size) }
    }

    /// Reads the directory `records` found at `location`; nil when a record is damaged, two
    /// entries start at one offset, or one starts at or past the directory.
    public init?(records: [UInt8], location: Location) {
        guard UInt64(records.count) == location.bytes.count else { return nil }
        typealias Layout = CentralDirectoryWindows
        var entries: [Entry] = []
        entries.reserveCapacity(Int(min(location.entries, UInt64(records.count / Layout.recordLength))))
        var at = 0
        for _ in 0..<location.entries {
            guard records.count - at >= Layout.recordLength, Layout.le32(records, at) == 0x0201_4B50 else { return nil }
            let nameLength = Int(Layout.le16(records, at + 28))
            let extraLength = Int(Layout.le16(records, at + 30))
            let commentLength = Int(Layout.le16(records, at + 32))
            let next = at + Layout.recordLength + nameLength + extraLength + commentLength
            guard next <= records.count else { return nil }
            var start = UInt64(Layout.le32(records, at + 42))
            if start == 0xFFFF_FFFF {
                // The ZIP64 extra field holds, in order, each of the sizes and the offset whose
                // short field is all ones.
                var skipped = 0
                if Layout.le32(records, at + 24) == 0xFFFF_FFFF { skipped += 8 }
                if Layout.le32(records, at + 20) == 0xFFFF_FFFF { skipped += 8 }
                let extra = at + Layout.recordLength + nameLength
                guard let value = Self.zip64Field(records, extra..<extra + extraLength, skipping: skipped) else {
                    return nil
                }
                start = value
            }
            let name = at + Layout.recordLength
            entries.append(
                Entry(name: Array(records[name..<name + nameLength]), start: start, end: 0, record: at..<next))
            at = next
        }
        guard at == records.count else { return nil }
        entries.sort { $0.start < $1.start }
        for index in entries.indices {
            let end = index + 1 < entries.count ? entries[index + 1].start : location.bytes.lowerBound
            guard entries[index].start < end else { return nil }
            entries[index].end = end
        }
        self.offset = location.bytes.lowerBound
        self.entries = entries
        self.records = records
    }

    /// The 8-byte value `skipping` bytes into the ZIP64 extra field (id 1) in `bytes[range]`.
    private static func zip64Field(_ bytes: [UInt8], _ range: Range<Int>, skipping: Int) -> UInt64? {
        var at = range.lowerBound
        while range.upperBound - at >= 4 {
            let id = CentralDirectoryWindows.le16(bytes, at)
            let length = Int(CentralDirectoryWindows.le16(bytes, at + 2))
            guard range.upperBound - at - 4 >= length else { return nil }
            if id == 1 {
                guard length >= skipping + 8 else { return nil }
                return CentralDirectoryWindows.le64(bytes, at + 4 + skipping)
            }
            at += 4 + length
        }
        return nil
    }
}

/// The entries of one byte range fetched from an archive (``ArchiveDirectory``).
///
/// A stored entry (no compression, no encryption, sizes as its directory record says) is handed
/// over as it lies in the range's bytes, with no copy and no CRC-32 pass: the caller checks its
/// bytes (``ArchiveRangeFetcher`` by SHA-256, a stronger check). Any other entry is inflated by
/// libzip, which opens the range as an archive of its own, made at the first such entry: the
/// range's bytes where they lie in the archive, zeros elsewhere, then the entries' own directory
/// records (their offsets unchanged) and end records. libzip reads each local header and inflates
/// each entry, checking its CRC-32, as it would in the whole archive. Not thread-safe (nor is
/// `zip_t`): one reader per range.
public final class ArchiveRangeReader {
    private let directory: ArchiveDirectory
    private let entries: [Int]
    private let bytes: UnsafeRawBufferPointer
    private let start: UInt64
    private let shownAs: String
    /// libzip's view of the range, made at the first entry that is not stored (or its error).
    private var opened: Result<(reader: ZipReader, buffer: UnsafeMutableRawBufferPointer), ArchiveError>?

    /// The entries `entries` (indexes into `directory.entries`, each lying in the range) of the
    /// range whose bytes are `bytes`, the archive's from `start` on; `bytes` must stay valid as
    /// long as the reader is used. `shownAs` names the archive in messages.
    public init(
        directory: ArchiveDirectory, entries: [Int], rangeBytes bytes: UnsafeRawBufferPointer, start: UInt64,
        shownAs: String
    ) {
        self.directory = directory
        self.entries = entries
        self.bytes = bytes
        self.start = start
        self.shownAs = shownAs
    }

    deinit {
        if case .success(let opened) = opened { opened.buffer.deallocate() }
    }

    /// Hands the `position`-th entry's bytes (in the order given to ``init``) to `chunk` as they
    /// come: a stored entry's in one piece from the range, another's as libzip inflates it.
    /// Returns the size, or nil when `chunk` returned false or the entry is longer than `limit`
    /// bytes (then it stops there). Throws for an entry libzip cannot read: encrypted, damaged,
    /// or a CRC-32 that differs (a stored entry's CRC-32 is not checked).
    public func inflate(_ position: Int, limit: Int64, chunk: (UnsafeRawBufferPointer) -> Bool) throws(ArchiveError)
        -> Int64?
    {
        precondition(position >= 0 && position < entries.count)
        if let stored = storedBytes(of: directory.entries[entries[position]]) {
            guard Int64(stored.count) <= limit, stored.isEmpty || chunk(stored) else { return nil }
            return Int64(stored.count)
        }
        let (reader, buffer) = try libzip().get()
        let entry = try reader.entry(at: UInt64(position))
        guard !entry.isEncrypted else {
            throw ArchiveError(code: .encryptedEntry, message: "\(reader.path): entry '\(entry.name)' is encrypted")
        }
        let stream = try reader.open(index: UInt64(position), name: entry.name)
        var total: Int64 = 0
        while true {
            let got = try stream.read(into: buffer)
            if got == 0 { return total }
            total += Int64(got)
            guard total <= limit, chunk(UnsafeRawBufferPointer(rebasing: buffer[0..<got])) else { return nil }
        }
    }

    /// The data of `entry` when its directory record and its local header (in the range) both say
    /// it is stored and unencrypted, with equal sizes, and the data lies within the entry's span;
    /// nil otherwise (libzip reads it).
    func storedBytes(of entry: ArchiveDirectory.Entry) -> UnsafeRawBufferPointer? {
        guard let size = directory.storedSize(of: entry), entry.start >= start,
            entry.end - start <= UInt64(bytes.count)
        else { return nil }
        let local = Int(entry.start - start)
        let span = Int(entry.end - entry.start)
        guard span >= ArchiveDirectory.localHeaderLength, let base = bytes.baseAddress,
            let dataStart = ArchiveDirectory.storedDataOffset(
                localHeader: UnsafeRawBufferPointer(start: base + local, count: ArchiveDirectory.localHeaderLength)),
            dataStart <= span, Int(size) <= span - dataStart
        else { return nil }
        return UnsafeRawBufferPointer(start: base + local + dataStart, count: Int(size))
    }

    private func libzip() -> Result<(reader: ZipReader, buffer: UnsafeMutableRawBufferPointer), ArchiveError> {
        if let opened { return opened }
        let result = Result { () throws(ArchiveError) in try openLibzip() }
        opened = result
        return result
    }

    private func openLibzip() throws(ArchiveError) -> (reader: ZipReader, buffer: UnsafeMutableRawBufferPointer) {
        var tail: [UInt8] = []
        for index in entries { tail += directory.records[directory.entries[index].record] }
        let layout = CentralDirectoryWindows(
            entryCount: UInt64(entries.count), offset: directory.offset, starts: [0, UInt64(tail.count)],
            size: max(1, entries.count))
        tail += layout.endRecords(entries: UInt64(entries.count), length: UInt64(tail.count))
        let source = WindowSource(rangeBytes: bytes, start: start, directoryOffset: directory.offset, tail: tail)
        let reader = try ZipReader(window: source, path: shownAs, firstIndex: 0)
        guard reader.entryCount == entries.count else {
            throw ArchiveError(
                code: .corrupt,
                message: "\(shownAs): the fetched range reads as \(reader.entryCount) entries, not \(entries.count)")
        }
        return (reader, UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16))
    }
}
