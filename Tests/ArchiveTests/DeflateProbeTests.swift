import Foundation
import Testing

@testable import Archive
@testable import FileKit

/// Files that deflate does not shrink go into the archive stored; the rest deflated.
@Suite struct DeflateProbeTests {
    @Test(
        arguments: [
            (0, [Int64]()), (1, [0]), (16_384, [0]), (16_385, [0, 16_384]), (65_536, [0, 16_384, 32_768, 49_152]),
            (65_537, [0, 16_384, 32_768, 49_153]), (1 << 20, [0, 344_064, 688_128, 1_032_192]),
        ] as [(Int64, [Int64])])
    func samplesCoverSmallFilesWholeAndSpreadOverLargeOnes(size: Int64, offsets: [Int64]) {
        #expect(DeflateProbe.sampleOffsets(size: size) == offsets)
        // Every sample lies within the file.
        #expect(offsets.allSatisfy { $0 >= 0 && $0 < size })
    }

    @Test(
        arguments: [
            (0, 0, false), (3_200, 3_100, true), (3_200, 3_101, false), (100, 97, true), (100, 98, false),
            (65_536, 65_600, false), (65_536, 1_000, true),
        ] as [(Int64, Int64, Bool)])
    func deflateIsWorthItWhenItSavesAThirtySecond(sample: Int64, deflated: Int64, worth: Bool) {
        #expect(DeflateProbe.worthDeflating(sampleBytes: sample, deflatedBytes: deflated) == worth)
    }

    @Test func realFilesAreJudgedByTheirBytes() throws {
        try withTemporaryDirectory { dir in
            let text = (0..<300_000).map { UInt8(ascii: "a") + UInt8($0 % 23) }
            let random = noise(300_000, seed: 7)
            // Compressible only at its very start: the later samples decide.
            let mostlyNoise = Array(text.prefix(1_000)) + noise(299_000, seed: 8)
            let cases: [(String, [UInt8], Bool)] = [
                ("text", text, true), ("noise", random, false), ("small noise", noise(200, seed: 9), false),
                ("small text", Array(repeating: UInt8(ascii: "x"), count: 200), true), ("empty", [], true),
                ("mostly noise", mostlyNoise, false),
            ]
            let probe = DeflateProbe()
            for (name, bytes, worth) in cases {
                try write(bytes, to: dir + "/" + name)
                #expect(probe.worthDeflating(path: dir + "/" + name, size: Int64(bytes.count)) == worth, "\(name)")
            }
            // A file that cannot be read is deflated: libzip reports the error when it adds it.
            #expect(probe.worthDeflating(path: dir + "/missing", size: 10))
            // A fifo or a symlink in a file's place (swapped in after the listing) is neither
            // waited on nor followed: the probe answers at once.
            #expect(mkfifo(dir + "/fifo", 0o644) == 0)
            #expect(probe.worthDeflating(path: dir + "/fifo", size: 10))
            #expect(symlink(dir + "/noise", dir + "/link") == 0)
            #expect(probe.worthDeflating(path: dir + "/link", size: 300_000))
        }
    }

    @Test func aFolderArchiveStoresWhatDeflateCannotShrinkAndReadsBackWhole() throws {
        try withTemporaryDirectory { dir in
            let files: [String: [UInt8]] = [
                "a/text.txt": (0..<50_000).map { UInt8(ascii: "a") + UInt8($0 % 17) },
                "a/noise.bin": noise(50_000, seed: 3), "b/tiny.bin": noise(10, seed: 4),
            ]
            for (path, bytes) in files { try write(bytes, to: dir + "/content/" + path) }
            try ZipWriter.archive(folder: dir + "/content", to: dir + "/a.zip", topLevelFolder: "RXCacheContent")
            // The method field of each entry's local header: 8 deflate, 0 stored.
            let archive = try readFile(dir + "/a.zip")
            let directory = try #require(ArchiveRangeReaderTests.directory(of: archive))
            for path in files.keys {
                let entry = try #require(directory.entries.first { $0.name == Array(("RXCacheContent/" + path).utf8) })
                #expect(archive[Int(entry.start) + 8] == (path.hasSuffix(".txt") ? 8 : 0), "\(path)")
            }
            // Extracted whole, every file is back.
            try FileManager.default.createDirectory(atPath: dir + "/out", withIntermediateDirectories: true)
            _ = try ZipExtractor.extract(archiveAt: dir + "/a.zip", into: dir + "/out", options: .roomy)
            for (path, bytes) in files {
                #expect(try readFile(dir + "/out/" + path) == bytes)
            }
        }
    }
}
