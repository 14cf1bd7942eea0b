import Foundation
import Testing

@testable import Archive
@testable import FileKit

/// An archive read from its last bytes and a few byte ranges, as a client that does not download
/// it whole reads it: ``ArchiveDirectory`` finds each entry's bytes, ``ArchiveRangeReader``
/// inflates the entries of one range with libzip.
@Suite(.timeLimit(.minutes(3)))
struct ArchiveRangeReaderTests {
    /// Name → contents of the archive's files: text (deflated) and noise (stored), 0 bytes to 200 KiB.
    static let files: [(String, [UInt8])] = (0..<12).map { index in
        let size = [0, 1, 100, 5_000, 70_000, 200_000][index % 6]
        let bytes =
            index.isMultiple(of: 2)
            ? (0..<size).map { UInt8(ascii: "a") + UInt8($0 % 23) } : noise(size, seed: UInt64(index))
        return ("RXCacheContent/f\(index % 3)/file-\(index).bin", bytes)
    }

    static func makeArchive(_ path: String, comment: String? = nil) throws -> [UInt8] {
        let writer = try ZipWriter(path: path)
        try writer.addDirectory("RXCacheContent/empty")
        for (index, (name, bytes)) in files.enumerated() {
            try writer.addFile(name, contents: bytes, compress: index.isMultiple(of: 2))
        }
        try writer.close()
        guard let comment else { return try readFile(path) }
        var archive = try ZipPatcher(path: path)
        archive.setComment(Array(comment.utf8))
        try archive.save(to: path)
        return archive.bytes
    }

    static func directory(of bytes: [UInt8]) -> ArchiveDirectory? {
        let tail = Array(bytes.suffix(ArchiveDirectory.tailLength))
        guard let location = ArchiveDirectory.locate(tail: tail, archiveSize: UInt64(bytes.count)) else { return nil }
        return ArchiveDirectory(
            records: Array(bytes[Int(location.bytes.lowerBound)..<Int(location.bytes.upperBound)]), location: location)
    }

    @Test(arguments: [nil, "a comment", String(repeating: "c", count: 65_535)])
    func theDirectoryGivesEveryEntrysBytesInArchiveOrder(comment: String?) throws {
        try withTemporaryDirectory { dir in
            let bytes = try Self.makeArchive(dir + "/a.zip", comment: comment)
            let directory = try #require(Self.directory(of: bytes))
            #expect(
                Set(directory.entries.map { String(decoding: $0.name, as: UTF8.self) })
                    == Set(Self.files.map(\.0) + ["RXCacheContent/empty/"]))
            // Each entry starts with a local header and ends where the next starts, the last at the directory.
            for (entry, next) in zip(directory.entries, directory.entries.dropFirst()) {
                #expect(entry.end == next.start)
            }
            #expect(directory.entries.first?.start == 0 && directory.entries.last?.end == directory.offset)
            #expect(
                directory.entries.allSatisfy { Array(bytes[Int($0.start)..<Int($0.start) + 4]) == [0x50, 0x4B, 3, 4] })
        }
    }

    /// Every run of consecutive entries, fetched as one range, inflates to the files' bytes.
    @Test(arguments: [1, 2, 5, 13])
    func theEntriesOfARangeInflateToTheirFiles(run: Int) throws {
        try withTemporaryDirectory { dir in
            let bytes = try Self.makeArchive(dir + "/a.zip")
            let directory = try #require(Self.directory(of: bytes))
            let contents = Dictionary(uniqueKeysWithValues: Self.files.map { (Array($0.0.utf8), $0.1) })
            for first in stride(from: 0, to: directory.entries.count, by: run) {
                let indexes = Array(first..<min(first + run, directory.entries.count))
                let start = directory.entries[indexes.first!].start
                let end = directory.entries[indexes.last!].end
                let range = Array(bytes[Int(start)..<Int(end)])
                try range.withUnsafeBytes { range in
                    let reader = ArchiveRangeReader(
                        directory: directory, entries: indexes, rangeBytes: range, start: start, shownAs: "a.zip")
                    for (position, index) in indexes.enumerated() {
                        guard let expected = contents[directory.entries[index].name] else { continue }
                        var got: [UInt8] = []
                        let size = try reader.inflate(position, limit: Int64(expected.count)) { chunk in
                            got += chunk
                            return true
                        }
                        #expect(size == Int64(expected.count) && got == expected)
                        // A limit below the size stops the entry there.
                        if !expected.isEmpty {
                            #expect(try reader.inflate(position, limit: Int64(expected.count - 1)) { _ in true } == nil)
                        }
                    }
                }
            }
        }
    }

    /// A range short of its last entry's end reads zeros past what was fetched: libzip's CRC-32
    /// check refuses the entry, stored or deflated.
    @Test(arguments: [true, false])
    func aRangeCutShortNeverGivesItsFile(stored: Bool) throws {
        try withTemporaryDirectory { dir in
            let bytes = try Self.makeArchive(dir + "/a.zip")
            let directory = try #require(Self.directory(of: bytes))
            let contents = Dictionary(uniqueKeysWithValues: Self.files.map { (Array($0.0.utf8), $0.1) })
            // Noise does not deflate: its entries are stored, the text's are deflated.
            let index = try #require(
                directory.entries.firstIndex { entry in
                    guard let file = contents[entry.name], file.count == (stored ? 200_000 : 70_000) else {
                        return false
                    }
                    return (entry.end - entry.start > UInt64(file.count)) == stored
                })
            let entry = directory.entries[index]
            let cut = Int(min(1000, (entry.end - entry.start) / 4))
            let range = Array(bytes[Int(entry.start)..<Int(entry.end) - cut])
            range.withUnsafeBytes { range in
                let reader = ArchiveRangeReader(
                    directory: directory, entries: [index], rangeBytes: range, start: entry.start, shownAs: "a.zip")
                #expect(throws: ArchiveError.self) { _ = try reader.inflate(0, limit: 1 << 30) { _ in true } }
            }
        }
    }

    /// A stored entry is taken from the range as it lies (the caller checks its bytes: no CRC-32
    /// pass), and only when its record and local header agree on a plain layout inside the
    /// entry's span; anything else goes to libzip, which refuses what it cannot read.
    @Test(arguments: [
        "none", "record says deflated", "record sizes differ", "record says encrypted", "local says deflated",
        "local signature", "local name past the span", "local extra past the span", "range short",
    ])
    func aStoredEntryIsTakenAsItLiesOnlyWhenPlainlyLaidOut(_ damage: String) throws {
        try withTemporaryDirectory { dir in
            var bytes = try Self.makeArchive(dir + "/a.zip")
            let contents = Dictionary(uniqueKeysWithValues: Self.files.map { (Array($0.0.utf8), $0.1) })
            let original = try #require(Self.directory(of: bytes))
            // A stored (noise) entry of 70,000 bytes.
            let index = try #require(
                original.entries.firstIndex { contents[$0.name]?.count == 5_000 && $0.end - $0.start > 5_000 })
            let entry = original.entries[index]
            let record = Int(original.offset) + entry.record.lowerBound
            let local = Int(entry.start)
            switch damage {
            case "record says deflated": bytes[record + 10] = 8
            case "record sizes differ": bytes[record + 20] ^= 1
            case "record says encrypted": bytes[record + 8] |= 1
            case "local says deflated": bytes[local + 8] = 8
            case "local signature": bytes[local + 3] = 9
            case "local name past the span": (bytes[local + 26], bytes[local + 27]) = (0xFF, 0xFF)
            case "local extra past the span": (bytes[local + 28], bytes[local + 29]) = (0xF0, 0xFF)
            default: break
            }
            let directory = try #require(Self.directory(of: bytes))
            let cut = damage == "range short" ? 1 : 0
            let range = Array(bytes[local..<Int(entry.end) - cut])
            try range.withUnsafeBytes { (range: UnsafeRawBufferPointer) throws in
                let reader = ArchiveRangeReader(
                    directory: directory, entries: [index], rangeBytes: range, start: entry.start, shownAs: "a.zip")
                let stored = reader.storedBytes(of: directory.entries[index])
                #expect((stored != nil) == (damage == "none"))
                if let stored {
                    // Straight from the range: the bytes after the local header, not a copy.
                    #expect(stored.baseAddress == range.baseAddress! + 30 + entry.name.count)
                    #expect(Array(stored) == contents[entry.name])
                    var got: [UInt8] = []
                    #expect(
                        try reader.inflate(0, limit: 5_000) {
                            got += $0
                            return true
                        } == 5_000)
                    #expect(got == contents[entry.name])
                    #expect(try reader.inflate(0, limit: 4_999) { _ in true } == nil)
                } else {
                    // libzip reads the rest; whatever it gives is never other bytes than the file's.
                    var got: [UInt8] = []
                    if let size = try? reader.inflate(
                        0, limit: 1 << 20,
                        chunk: {
                            got += $0
                            return true
                        })
                    {
                        #expect(size == 5_000 && got == contents[entry.name])
                    }
                }
            }
        }
    }

    @Test(arguments: [
        "trailing bytes", "damaged record", "two entries at one offset", "entry past the directory", "short tail",
    ])
    func anArchiveNotPlainlyLaidOutHasNoDirectory(_ damage: String) throws {
        try withTemporaryDirectory { dir in
            var bytes = try Self.makeArchive(dir + "/a.zip")
            let location = try #require(
                ArchiveDirectory.locate(
                    tail: Array(bytes.suffix(ArchiveDirectory.tailLength)), archiveSize: UInt64(bytes.count)))
            let records = Int(location.bytes.lowerBound)
            // The second record's local-header offset field (records are 46 bytes plus name, extra, comment).
            let first =
                46 + Int(bytes[records + 28]) + Int(bytes[records + 29]) << 8 + Int(bytes[records + 30])
                + Int(bytes[records + 31]) << 8 + Int(bytes[records + 32]) + Int(bytes[records + 33]) << 8
            switch damage {
            case "trailing bytes": bytes += [0, 0, 0]
            case "damaged record": bytes[records + first] ^= 0xFF
            case "two entries at one offset":
                for byte in 0..<4 { bytes[records + first + 42 + byte] = bytes[records + 42 + byte] }
            case "entry past the directory":
                let offset = UInt32(location.bytes.lowerBound)
                for byte in 0..<4 {
                    bytes[records + first + 42 + byte] = UInt8(truncatingIfNeeded: offset >> (8 * UInt32(byte)))
                }
            default:
                // The tail given is shorter than the end record.
                #expect(ArchiveDirectory.locate(tail: Array(bytes.suffix(21)), archiveSize: UInt64(bytes.count)) == nil)
                return
            }
            #expect(Self.directory(of: bytes) == nil)
        }
    }
}

extension ArchiveDirectory: Equatable {
    public static func == (lhs: ArchiveDirectory, rhs: ArchiveDirectory) -> Bool {
        lhs.offset == rhs.offset && lhs.entries == rhs.entries
    }
}
