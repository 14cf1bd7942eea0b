import Foundation
import Synchronization
import Testing

@testable import Archive
@testable import FileKit

@Suite(.timeLimit(.minutes(3)))
struct ZipRoundTripTests {
    /// A tree with nested files, binary data, an empty file and empty folders.
    static let sampleTree: [String: Node] = [
        "readme.txt": .file(Array("hello\n".utf8)),
        "empty.dat": .file([]),
        "img": .folder,
        "img/noise.bin": .file(noise(300_000, seed: 1)),
        "img/deep": .folder,
        "img/deep/deeper": .folder,
        "img/deep/deeper/all-bytes.bin": .file((0...255).map { UInt8($0) }),
        "empty-folder": .folder,
        "img/empty-too": .folder,
    ]

    /// Writes `tree` under `root`.
    static func materialize(_ tree: [String: Node], under root: String) throws {
        for (path, node) in tree.sorted(by: { $0.key < $1.key }) {
            switch node {
            case .folder: try makeFolder(root + "/" + path)
            case .file(let contents): try write(contents, to: root + "/" + path)
            default: Issue.record("cannot materialize \(node)")
            }
        }
    }

    @Test func nestedFilesEmptyFoldersAndBinaryDataSurviveARoundTrip() throws {
        try withTemporaryDirectory { dir in
            try Self.materialize(Self.sampleTree, under: dir + "/src")
            try ZipWriter.archive(folder: dir + "/src", to: dir + "/a.zip", topLevelFolder: nil)
            try makeFolder(dir + "/out")

            let report = try ZipExtractor.extract(archiveAt: dir + "/a.zip", into: dir + "/out", options: .roomy)

            #expect(try snapshot(dir + "/out") == Self.sampleTree)
            #expect(report == ZipExtractionReport(files: 4, folders: 5, bytesWritten: 300_262, skippedEntries: 0))
        }
    }

    @Test func topLevelContentFolderIsStrippedAndMacOSMetadataSkipped() throws {
        try withTemporaryDirectory { dir in
            let writer = try ZipWriter(path: dir + "/a.zip")
            try writer.addDirectory("RXCacheContent")
            try writer.addFile("RXCacheContent/a.txt", contents: Array("A".utf8))
            try writer.addDirectory("RXCacheContent/sub/")
            try writer.addFile("RXCacheContent/sub/b.txt", contents: Array("B".utf8), compress: false)
            try writer.addDirectory("__MACOSX")
            try writer.addFile("__MACOSX/RXCacheContent/._a.txt", contents: [0, 5, 22, 7])
            try writer.close()
            try makeFolder(dir + "/out")

            let report = try ZipExtractor.extract(archiveAt: dir + "/a.zip", into: dir + "/out", options: .roomy)

            #expect(
                try snapshot(dir + "/out") == [
                    "a.txt": .file(Array("A".utf8)),
                    "sub": .folder,
                    "sub/b.txt": .file(Array("B".utf8)),
                ])
            #expect(report.skippedEntries == 2)
            #expect(report.files == 2)
            #expect(report.folders == 1)
        }
    }

    @Test func nothingIsStrippedWhenEntriesLieUnderSeveralTopLevelFolders() throws {
        try withTemporaryDirectory { dir in
            let writer = try ZipWriter(path: dir + "/a.zip")
            try writer.addFile("RXCacheContent/a.txt", contents: Array("A".utf8))
            try writer.addFile("other/b.txt", contents: Array("B".utf8))
            try writer.close()
            try makeFolder(dir + "/out")

            _ = try ZipExtractor.extract(archiveAt: dir + "/a.zip", into: dir + "/out", options: .roomy)

            #expect(
                try snapshot(dir + "/out") == [
                    "RXCacheContent": .folder,
                    "RXCacheContent/a.txt": .file(Array("A".utf8)),
                    "other": .folder,
                    "other/b.txt": .file(Array("B".utf8)),
                ])
        }
    }

    @Test func archivingUnderATopLevelFolderRoundTripsThroughStripping() throws {
        try withTemporaryDirectory { dir in
            try Self.materialize(Self.sampleTree, under: dir + "/src")
            try ZipWriter.archive(folder: dir + "/src", to: dir + "/a.zip", topLevelFolder: "RXCacheContent")
            try makeFolder(dir + "/kept")
            try makeFolder(dir + "/stripped")
            var keep = ZipExtractionOptions.roomy
            keep.stripTopLevelFolder = nil

            _ = try ZipExtractor.extract(archiveAt: dir + "/a.zip", into: dir + "/kept", options: keep)
            _ = try ZipExtractor.extract(archiveAt: dir + "/a.zip", into: dir + "/stripped", options: .roomy)

            #expect(try snapshot(dir + "/stripped") == Self.sampleTree)
            let kept = try snapshot(dir + "/kept")
            #expect(kept["RXCacheContent"] == .folder)
            #expect(
                kept["RXCacheContent/img/deep/deeper/all-bytes.bin"] == Self.sampleTree["img/deep/deeper/all-bytes.bin"]
            )
            #expect(kept.count == Self.sampleTree.count + 1)
        }
    }

    @Test(.enabled(if: zipToolIsInstalled, "needs /usr/bin/zip"))
    func archivesMadeByTheZipCommandLineToolExtract() throws {
        try withTemporaryDirectory { dir in
            try Self.materialize(Self.sampleTree, under: dir + "/src/RXCacheContent")
            #expect(
                try run("/usr/bin/zip", ["-q", "-r", "-X", dir + "/tool.zip", "RXCacheContent"], in: dir + "/src") == 0)
            try makeFolder(dir + "/out")

            let report = try ZipExtractor.extract(archiveAt: dir + "/tool.zip", into: dir + "/out", options: .roomy)

            #expect(try snapshot(dir + "/out") == Self.sampleTree)
            #expect(report.bytesWritten == 300_262)
        }
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/unzip"), "needs /usr/bin/unzip"))
    func archivesMadeByZipWriterExtractWithTheUnzipTool() throws {
        try withTemporaryDirectory { dir in
            try Self.materialize(Self.sampleTree, under: dir + "/src")
            try ZipWriter.archive(folder: dir + "/src", to: dir + "/a.zip", topLevelFolder: nil)
            try makeFolder(dir + "/out")

            #expect(try run("/usr/bin/unzip", ["-q", dir + "/a.zip", "-d", dir + "/out"], in: dir) == 0)

            #expect(try snapshot(dir + "/out") == Self.sampleTree)
        }
    }

    @Test func archivingTheSameFolderTwiceGivesIdenticalBytes() throws {
        try withTemporaryDirectory { dir in
            try Self.materialize(Self.sampleTree, under: dir + "/src")
            try ZipWriter.archive(folder: dir + "/src", to: dir + "/first.zip", topLevelFolder: "RXCacheContent")
            // Dates and modes of the sources must not leak into the archive.
            #expect(chmod(dir + "/src/readme.txt", 0o600) == 0)
            #expect(chmod(dir + "/src/img", 0o700) == 0)
            var times = [timespec(tv_sec: 1_700_000_000, tv_nsec: 0), timespec(tv_sec: 1_700_000_000, tv_nsec: 0)]
            #expect(utimensat(AT_FDCWD, dir + "/src/img/noise.bin", &times, 0) == 0)
            try ZipWriter.archive(folder: dir + "/src", to: dir + "/second.zip", topLevelFolder: "RXCacheContent")

            let first = try readFile(dir + "/first.zip")
            #expect(first.count > 300_000)
            #expect(first == (try readFile(dir + "/second.zip")))
        }
    }

    @Test func writerKeepsEntriesInCallOrder() throws {
        try withTemporaryDirectory { dir in
            let writer = try ZipWriter(path: dir + "/a.zip")
            try writer.addFile("z.txt", contents: [1])
            try writer.addDirectory("m")
            try writer.addFile("a.txt", contents: [2])
            try writer.close()

            let names = try ZipPatcher(path: dir + "/a.zip").names
            #expect(names == ["z.txt", "m/", "a.txt"])
        }
    }

    @Test func anEmptyFolderArchivesToAnEmptyArchive() throws {
        try withTemporaryDirectory { dir in
            try makeFolder(dir + "/src")
            try makeFolder(dir + "/out")
            try ZipWriter.archive(folder: dir + "/src", to: dir + "/a.zip", topLevelFolder: nil)

            let report = try ZipExtractor.extract(archiveAt: dir + "/a.zip", into: dir + "/out", options: .roomy)

            #expect(try readFile(dir + "/a.zip").count == 22)
            #expect(report == ZipExtractionReport(files: 0, folders: 0, bytesWritten: 0, skippedEntries: 0))
            #expect(try snapshot(dir + "/out").isEmpty)
        }
    }

    @Test func oneWorkerAndTwoWorkersWriteIdenticalTrees() throws {
        try withTemporaryDirectory { dir in
            var tree: [String: Node] = [:]
            for index in 0..<200 {
                let folder = "f\(index % 7)"
                tree[folder] = .folder
                tree["\(folder)/file\(index).bin"] = .file(noise(index * 97 % 20_000, seed: UInt64(index)))
            }
            try Self.materialize(tree, under: dir + "/src")
            try ZipWriter.archive(folder: dir + "/src", to: dir + "/a.zip", topLevelFolder: "RXCacheContent")
            var reports: [ZipExtractionReport] = []
            for workers in [1, 2, 5] {
                var options = ZipExtractionOptions.roomy
                options.workers = workers
                try makeFolder(dir + "/out\(workers)")
                reports.append(
                    try ZipExtractor.extract(archiveAt: dir + "/a.zip", into: dir + "/out\(workers)", options: options))
            }

            #expect(try snapshot(dir + "/out1") == tree)
            #expect(try snapshot(dir + "/out2") == tree)
            #expect(try snapshot(dir + "/out5") == tree)
            #expect(reports[0] == reports[1] && reports[1] == reports[2])
        }
    }

    @Test func progressReportsEveryByteWritten() throws {
        try withTemporaryDirectory { dir in
            let writer = try ZipWriter(path: dir + "/a.zip")
            for index in 0..<4 {
                try writer.addFile("part\(index).bin", contents: noise(700_000, seed: UInt64(index)))
            }
            try writer.close()
            try makeFolder(dir + "/out")
            let highest = Mutex<Int64>(0)
            let calls = Atomic<Int>(0)

            let report = try ZipExtractor.extract(
                archiveAt: dir + "/a.zip", into: dir + "/out", options: .roomy,
                progress: { total in
                    calls.add(1, ordering: .relaxed)
                    highest.withLock { $0 = max($0, total) }
                })

            #expect(report.bytesWritten == 2_800_000)
            #expect(highest.withLock { $0 } == 2_800_000)
            #expect(calls.load(ordering: .relaxed) >= 4 * (700_000 / ExtractionRun.chunkSize))
            #expect(try bytesOnDisk(dir + "/out") == 2_800_000)
        }
    }

    @Test func asyncExtractionWritesTheSameTree() async throws {
        try await withTemporaryDirectory { dir in
            try Self.materialize(Self.sampleTree, under: dir + "/src")
            try ZipWriter.archive(folder: dir + "/src", to: dir + "/a.zip", topLevelFolder: "RXCacheContent")
            try makeFolder(dir + "/out")

            let report = try await ZipExtractor.extract(archiveAt: dir + "/a.zip", into: dir + "/out", options: .roomy)

            #expect(report.files == 4)
            #expect(try snapshot(dir + "/out") == Self.sampleTree)
        }
    }
}
