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

/// The entries of one byte range fetched from an archive (``ArchiveDirectory``), opened by
/// libzip as an archive of their own: the range's bytes where they lie in the archive, zeros
/// elsewhere, then the entries' own directory records (their offsets unchanged) and end records.
/// libzip reads each local header and inflates each entry, checking its CRC-32, as it would in
/// the whole archive. Not thread-safe (nor is `zip_t`): one reader per range.
public final class ArchiveRangeReader {
    private let reader: ZipReader
    private let count: Int
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 * 1024, alignment: 16)

    /// Opens the entries `entries` (indexes into `directory.entries`, each lying in the range) of
    /// the range whose bytes are `bytes`, the archive's from `start` on; `bytes` must stay valid
    /// as long as the reader is used. `shownAs` names the archive in messages.
    public init(
        directory: ArchiveDirectory, entries: [Int], rangeBytes bytes: UnsafeRawBufferPointer, start: UInt64,
        shownAs: String
    ) throws(ArchiveError) {
        var tail: [UInt8] = []
        for index in entries { tail += directory.records[directory.entries[index].record] }
        let layout = CentralDirectoryWindows(
            entryCount: UInt64(entries.count), offset: directory.offset, starts: [0, UInt64(tail.count)],
            size: max(1, entries.count))
        tail += layout.endRecords(entries: UInt64(entries.count), length: UInt64(tail.count))
        let source = WindowSource(rangeBytes: bytes, start: start, directoryOffset: directory.offset, tail: tail)
        let count = entries.count
        do {
            reader = try ZipReader(window: source, path: shownAs, firstIndex: 0)
        } catch {
            buffer.deallocate()
            throw error
        }
        self.count = count
        guard reader.entryCount == count else {
            buffer.deallocate()
            throw ArchiveError(
                code: .corrupt,
                message: "\(shownAs): the fetched range reads as \(reader.entryCount) entries, not \(count)")
        }
    }

    deinit {
        buffer.deallocate()
    }

    /// Inflates the `position`-th entry (in the order given to ``init``) and hands its bytes to
    /// `chunk` as they come. Returns the inflated size, or nil when `chunk` returned false or
    /// the entry inflated past `limit` bytes (then it stops there). Throws for an entry libzip
    /// cannot read: encrypted, damaged, or a CRC-32 that differs.
    public func inflate(_ position: Int, limit: Int64, chunk: (UnsafeRawBufferPointer) -> Bool) throws(ArchiveError)
        -> Int64?
    {
        precondition(position >= 0 && position < count)
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
}
