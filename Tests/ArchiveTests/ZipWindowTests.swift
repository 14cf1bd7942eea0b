import Foundation
import Testing

@testable import Archive
@testable import FileKit

/// The central directory read in windows (`CentralDirectoryWindows`): libzip sees each window as
/// an archive of its own, and an extraction in windows of any size is the extraction of the whole.
@Suite(.timeLimit(.minutes(3)))
struct ZipWindowTests {
    /// An archive of 9 files and 3 folders, names of several lengths (records of several sizes).
    static func makeArchive(_ path: String) throws {
        let writer = try ZipWriter(path: path)
        for index in 0..<9 {
            let folder = ["a", "bb/c", "ddd/eeee/f"][index % 3]
            try writer.addFile(
                "\(folder)/file-\(String(repeating: "x", count: index)).bin", contents: noise(100 * index, seed: 7))
        }
        try writer.addDirectory("empty")
        try writer.addDirectory("bb/also-empty")
        try writer.addDirectory("ddd/eeee/g")
        try writer.close()
    }

    static func options(window: Int) -> ZipExtractionOptions {
        var options = ZipExtractionOptions.roomy
        options.centralDirectoryWindow = window
        return options
    }

    static func entries(_ path: String, window: Int) throws -> [RawZipEntry] {
        let opener = try ArchiveOpener(path: path, windowSize: window)
        defer { opener.close() }
        var entries: [RawZipEntry] = []
        for index in 0..<opener.windowCount {
            let reader = try opener.reader(index)
            #expect(reader.entryCount <= max(window, 1) || !opener.isWindowed)
            for local in 0..<UInt64(reader.entryCount) { entries.append(try reader.entry(at: local)) }
        }
        return entries
    }

    @Test(arguments: [1, 2, 5, 11, 12, 13, 100])
    func windowsOfAnySizeReadAndExtractWhatTheWholeArchiveDoes(window: Int) throws {
        try withTemporaryDirectory { dir in
            let archive = dir + "/a.zip"
            try Self.makeArchive(archive)
            let whole = try Self.entries(archive, window: 0)
            let total = whole.count
            #expect(total >= 12)

            let fd = open(archive, O_RDONLY)
            defer { close(fd) }
            let size = UInt64(try readFile(archive).count)
            let windows = try #require(CentralDirectoryWindows.read(fd: fd, fileSize: size, windowSize: window))
            #expect(windows.entryCount == UInt64(total) && windows.count == (total + window - 1) / window)
            #expect(zip(windows.starts, windows.starts.dropFirst()).allSatisfy { $0 < $1 })
            #expect(windows.offset + windows.starts.last! < size)

            #expect(try Self.entries(archive, window: window) == whole)
            try makeFolder(dir + "/whole")
            try makeFolder(dir + "/windowed")
            let first = try ZipExtractor.extract(
                archiveAt: archive, into: dir + "/whole", options: Self.options(window: 0))
            let second = try ZipExtractor.extract(
                archiveAt: archive, into: dir + "/windowed", options: Self.options(window: window))
            #expect(first.files == 9 && second.files == 9 && first.bytesWritten == second.bytesWritten)
            #expect(try snapshot(dir + "/windowed") == snapshot(dir + "/whole"))
        }
    }

    @Test func anArchiveThatIsNotPlainlyLaidOutIsOpenedWhole() throws {
        try withTemporaryDirectory { dir in
            let archive = dir + "/a.zip"
            try Self.makeArchive(archive)
            let bytes = try readFile(archive)
            var commented = try ZipPatcher(path: archive)
            commented.setComment(Array("published by the tests".utf8))
            // A comment that holds a second end record fitting the file's end: two readings.
            var ambiguous = try ZipPatcher(path: archive)
            var fake: [UInt8] = [0x50, 0x4B, 0x05, 0x06] + [UInt8](repeating: 0, count: 16)
            fake += [0, 0] // its own comment: empty, so it too ends exactly at the file's end
            ambiguous.setComment(fake)
            let cases: [(String, [UInt8], Bool)] = [
                ("plain", bytes, true),
                ("commented", commented.bytes, true),
                ("prefixed", Array("#!/bin/sh\nexit 0\n".utf8) + bytes, false),
                ("trailing", bytes + [0, 1, 2], false),
                ("ambiguous", ambiguous.bytes, false),
            ]
            for (name, contents, windowed) in cases {
                let path = dir + "/\(name).zip"
                try write(contents, to: path)
                let opener = try ArchiveOpener(path: path, windowSize: 4)
                #expect(opener.isWindowed == windowed, "\(name)")
                opener.close()
                // Whole or in windows, the outcome is libzip's on the whole archive.
                try makeFolder(dir + "/\(name)-0")
                try makeFolder(dir + "/\(name)-4")
                let whole = Result {
                    try ZipExtractor.extract(
                        archiveAt: path, into: dir + "/\(name)-0", options: Self.options(window: 0))
                }
                let inWindows = Result {
                    try ZipExtractor.extract(
                        archiveAt: path, into: dir + "/\(name)-4", options: Self.options(window: 4))
                }
                switch (whole, inWindows) {
                case (.success(let one), .success(let two)):
                    #expect(one.files == two.files, "\(name)")
                    #expect(try snapshot(dir + "/\(name)-4") == snapshot(dir + "/\(name)-0"), "\(name)")
                case (.failure(let one), .failure(let two)):
                    #expect((one as? ArchiveError)?.code == (two as? ArchiveError)?.code, "\(name)")
                default:
                    Issue.record("\(name): whole \(whole), in windows \(inWindows)")
                }
            }
        }
    }

    @Test func aLocalHeaderThatDisagreesInALaterWindowRefusesTheArchiveBeforeWriting() throws {
        try withTemporaryDirectory { dir in
            let archive = dir + "/a.zip"
            try Self.makeArchive(archive)
            var patcher = try ZipPatcher(path: archive)
            let last = try #require(patcher.names.last { !$0.hasSuffix("/") })
            var renamed = Array(last.utf8)
            renamed[renamed.count - 5] = UInt8(ascii: "y")
            patcher.renameLocally(last, to: renamed)
            try patcher.save(to: dir + "/bad.zip")
            #expect(try ArchiveOpener(path: dir + "/bad.zip", windowSize: 2).isWindowed)

            let error = try ZipHostileArchiveTests.expectRefusal(
                .corrupt, in: dir, archive: dir + "/bad.zip", options: Self.options(window: 2))
            #expect(error?.message.contains("inconsistent") == true)
        }
    }

    @Test func namesTwiceInDifferentWindowsAreRefused() throws {
        try withTemporaryDirectory { dir in
            let writer = try ZipWriter(path: dir + "/a.zip")
            try writer.addRawEntry(name: "docs/same.txt", contents: Array("first".utf8), unixMode: 0o100644)
            for index in 0..<5 { try writer.addFile("other-\(index).txt", contents: [UInt8(index)]) }
            try writer.addRawEntry(name: "docs/SAME.txt", contents: Array("second".utf8), unixMode: 0o100644)
            try writer.close()
            let collision = try ZipHostileArchiveTests.expectRefusal(
                .duplicateEntry, in: dir + "/case", archive: dir + "/a.zip", options: Self.options(window: 2))
            #expect(collision?.message.contains("differ only in case") == true)

            var patcher = try ZipPatcher(path: dir + "/a.zip")
            patcher.rename("docs/SAME.txt", to: Array("docs/same.txt".utf8))
            try patcher.save(to: dir + "/dup.zip")
            let duplicate = try ZipHostileArchiveTests.expectRefusal(
                .duplicateEntry, in: dir + "/dup", archive: dir + "/dup.zip", options: Self.options(window: 2))
            #expect(duplicate?.message.contains("both extract to 'docs/same.txt'") == true)
        }
    }

    /// More than 65,535 entries: libzip writes ZIP64 end records, which the windows are read from.
    @Test func zip64EndRecordsAreReadAndEveryWindowHoldsItsShare() throws {
        try withTemporaryDirectory { dir in
            let archive = dir + "/big.zip"
            let writer = try ZipWriter(path: archive)
            for index in 0..<66_000 { try writer.addFile("f\(index / 1000)/\(index)", contents: []) }
            try writer.close()
            let bytes = try readFile(archive)
            let locator = bytes.count - 22 - 20
            #expect(Array(bytes[locator..<locator + 4]) == [0x50, 0x4B, 0x06, 0x07], "a ZIP64 locator")

            let whole = try Self.entries(archive, window: 0)
            #expect(whole.count >= 66_000)
            let opener = try ArchiveOpener(path: archive, windowSize: 16_384)
            defer { opener.close() }
            #expect(opener.isWindowed && opener.windowCount == (whole.count + 16_383) / 16_384)
            var seen = 0
            for window in 0..<opener.windowCount {
                let reader = try opener.reader(window)
                #expect(reader.entryCount == min(16_384, whole.count - seen))
                #expect(try reader.entry(at: 0) == whole[seen])
                #expect(try reader.entry(at: UInt64(reader.entryCount - 1)) == whole[seen + reader.entryCount - 1])
                seen += reader.entryCount
            }
            #expect(seen == whole.count)
            try makeFolder(dir + "/out")
            let report = try ZipExtractor.extract(
                archiveAt: archive, into: dir + "/out", options: Self.options(window: 16_384))
            #expect(report.files == 66_000)
            #expect(FileManager.default.fileExists(atPath: dir + "/out/f65/65999"))
        }
    }
}
