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
            entries += try reader.entries()
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
    /// Seconds of blocking work (66,000 entries written, read and extracted), so it runs on the
    /// `BlockingIOPool` and only its findings come back: on the cooperative pool it held one of
    /// the 2 threads for 14 s, which silenced other tests' in-process servers.
    @Test func zip64EndRecordsAreReadAndEveryWindowHoldsItsShare() async throws {
        let found = try await BlockingIOPool.shared.run { try Self.readAZIP64ArchiveInWindows() }
        #expect(found.locator == [0x50, 0x4B, 0x06, 0x07], "a ZIP64 locator")
        #expect(found.entries >= 66_000)
        #expect(found.isWindowed && found.windowCount == (found.entries + 16_383) / 16_384)
        #expect(found.mismatchedWindows.isEmpty, "windows whose count or ends differ: \(found.mismatchedWindows)")
        #expect(found.seen == found.entries)
        #expect(found.extractedFiles == 66_000 && found.lastFileExtracted)
    }

    struct ZIP64Findings: Sendable {
        var locator: [UInt8] = []
        var entries = 0
        var isWindowed = false
        var windowCount = 0
        var mismatchedWindows: [Int] = []
        var seen = 0
        var extractedFiles = 0
        var lastFileExtracted = false
    }

    static func readAZIP64ArchiveInWindows() throws -> ZIP64Findings {
        try withTemporaryDirectory { dir in
            var found = ZIP64Findings()
            let archive = dir + "/big.zip"
            let writer = try ZipWriter(path: archive)
            for index in 0..<66_000 { try writer.addFile("f\(index / 1000)/\(index)", contents: []) }
            try writer.close()
            let bytes = try readFile(archive)
            let locator = bytes.count - 22 - 20
            found.locator = Array(bytes[locator..<locator + 4])

            let whole = try Self.entries(archive, window: 0)
            found.entries = whole.count
            let opener = try ArchiveOpener(path: archive, windowSize: 16_384)
            defer { opener.close() }
            (found.isWindowed, found.windowCount) = (opener.isWindowed, opener.windowCount)
            for window in 0..<opener.windowCount {
                let reader = try opener.reader(window)
                let count = reader.entryCount
                let first = count > 0 ? try reader.entry(at: 0) : nil
                let last = count > 0 ? try reader.entry(at: UInt64(count - 1)) : nil
                if count != min(16_384, whole.count - found.seen) || count == 0 || first != whole[found.seen]
                    || last != whole[found.seen + count - 1]
                {
                    found.mismatchedWindows.append(window)
                }
                found.seen += count
            }
            try makeFolder(dir + "/out")
            let report = try ZipExtractor.extract(
                archiveAt: archive, into: dir + "/out", options: Self.options(window: 16_384))
            found.extractedFiles = report.files
            found.lastFileExtracted = FileManager.default.fileExists(atPath: dir + "/out/f65/65999")
            return found
        }
    }
}

/// Damaged archives read in windows and whole: the same files, or a refusal with the same code.
@Suite(.timeLimit(.minutes(3)))
struct ZipWindowDamageTests {
    struct Generator {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
    }

    /// What a seed's damaged archive did: read in windows or whole, and extracted or refused.
    enum Outcome: Hashable {
        case windowedExtracted, windowedRefused, wholeExtracted, wholeRefused
    }

    @Test func damagedCentralDirectoriesReadTheSameInWindowsAsWhole() throws {
        var outcomes: [Outcome: Int] = [:]
        for seed in 0..<200 { outcomes[try Self.compare(seed: seed), default: 0] += 1 }
        // The damage reached both verdicts in windows, and the archives it made not plainly laid
        // out (opened whole, where libzip's strict checks refuse them all).
        #expect(outcomes[.windowedExtracted, default: 0] > 0, "\(outcomes)")
        #expect(outcomes[.windowedRefused, default: 0] > 0, "\(outcomes)")
        #expect(outcomes[.wholeRefused, default: 0] > 0, "\(outcomes)")
    }

    static func compare(seed: Int) throws -> Outcome {
        try withTemporaryDirectory { dir in
            var random = Generator(state: UInt64(seed) &+ 99)
            let writer = try ZipWriter(path: dir + "/a.zip")
            for index in 0..<(2 + random.next(14)) {
                let name = "d\(random.next(3))/" + String(repeating: "n", count: 1 + random.next(12)) + "\(index)"
                try writer.addFile(name, contents: noise(random.next(300), seed: UInt64(seed * 31 + index)))
            }
            try writer.close()
            var bytes = try readFile(dir + "/a.zip")
            // Damage the central directory or the end records: the part the windows are cut from.
            let directory = ZipWindowDamageTests.directoryStart(bytes)
            switch random.next(4) {
            case 0, 1:
                for _ in 0..<(1 + random.next(3)) {
                    bytes[directory + random.next(bytes.count - directory)] = UInt8(random.next(256))
                }
            case 2:
                bytes.removeLast(1 + random.next(40))
            default:
                let at = directory + random.next(bytes.count - directory)
                bytes.insert(contentsOf: noise(1 + random.next(8), seed: UInt64(seed)), at: at)
            }
            try write(bytes, to: dir + "/damaged.zip")
            try makeFolder(dir + "/whole")
            try makeFolder(dir + "/windowed")
            let whole = Result {
                try ZipExtractor.extract(
                    archiveAt: dir + "/damaged.zip", into: dir + "/whole", options: ZipWindowTests.options(window: 0))
            }
            let windowed = Result {
                try ZipExtractor.extract(
                    archiveAt: dir + "/damaged.zip", into: dir + "/windowed", options: ZipWindowTests.options(window: 3)
                )
            }
            let opener = try ArchiveOpener(path: dir + "/damaged.zip", windowSize: 3)
            let cut = opener.isWindowed
            opener.close()
            switch (whole, windowed) {
            case (.success(let one), .success(let two)):
                #expect(one.files == two.files, "seed \(seed)")
                #expect(try snapshot(dir + "/windowed") == snapshot(dir + "/whole"), "seed \(seed)")
                return cut ? .windowedExtracted : .wholeExtracted
            case (.failure(let one), .failure(let two)):
                #expect((one as? ArchiveError)?.code == (two as? ArchiveError)?.code, "seed \(seed): \(one) / \(two)")
                return cut ? .windowedRefused : .wholeRefused
            default:
                Issue.record("seed \(seed): whole \(whole), in windows \(windowed)")
                return cut ? .windowedRefused : .wholeRefused
            }
        }
    }

    /// Where the central directory starts, by the end record's field.
    static func directoryStart(_ bytes: [UInt8]) -> Int {
        let end = stride(from: bytes.count - 22, through: 0, by: -1).first {
            bytes[$0] == 0x50 && bytes[$0 + 1] == 0x4B && bytes[$0 + 2] == 5 && bytes[$0 + 3] == 6
        }!
        return Int(bytes[end + 16]) | Int(bytes[end + 17]) << 8 | Int(bytes[end + 18]) << 16 | Int(bytes[end + 19])
            << 24
    }
}
