import Foundation
import StorageServer
import Synchronization
import Testing
import Transport

@testable import Archive
@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// A replay that adds many files takes them from byte ranges of the storage's archive of the
/// version it reaches, each checked against the change list's hash; anything the archive cannot
/// give (a server without ranges, an archive republished meanwhile, an entry with other bytes)
/// is downloaded file by file, and the result is the same tree.
@Suite("Many new files come as ranges of the published archive", .timeLimit(.minutes(3)))
struct ArchiveRangeTests {
    /// Version 1.0: three files. Version 1.1: those plus `count` new files in nested folders,
    /// half text (deflated in the archive), half random bytes (stored), of 0 bytes to 96 KiB,
    /// one whose name needs percent-encoding. Returns both folders and the new files' paths.
    /// `stored`: every new file random bytes, which the archive stores as they are, so that each
    /// range is placed as it streams in (``RangeStream``).
    static func makeVersions(scratch: String, count: Int, big: Bool = false, stored: Bool = false) throws -> (
        v1: String, v2: String, added: [String]
    ) {
        let v1 = scratch + "/v1"
        let v2 = scratch + "/v2"
        for root in [v1, v2] {
            try FileManager.default.createDirectory(atPath: root + "/kept", withIntermediateDirectories: true)
            for name in ["a.txt", "b.txt", "c.bin"] {
                try Data("kept \(name)\n".utf8).write(to: URL(fileURLWithPath: root + "/kept/" + name))
            }
        }
        var generator = SystemRandomNumberGenerator()
        var added: [String] = []
        for index in 0..<count {
            let folder = "new/\(index % 7)/\(index % 3)"
            let name = index == 5 ? "a b%\(index).txt" : (index.isMultiple(of: 2) ? "t\(index).txt" : "r\(index).bin")
            let size = index == 0 ? 0 : (index * 7919) % (96 << 10)
            let bytes: [UInt8]
            if index.isMultiple(of: 2) && !stored {
                let line = Array("line \(index): the quick brown fox jumps over the lazy dog\n".utf8)
                bytes = (0..<size).map { line[$0 % line.count] }
            } else {
                bytes = (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }
            }
            try FileManager.default.createDirectory(atPath: v2 + "/" + folder, withIntermediateDirectories: true)
            try Data(bytes).write(to: URL(fileURLWithPath: v2 + "/" + folder + "/" + name))
            added.append(folder + "/" + name)
        }
        if big {
            let bytes = (0..<(Int(ArchiveRangeFetcher.maxEntryBytes) + 4096)).map { _ in
                UInt8.random(in: 0...255, using: &generator)
            }
            try Data(bytes).write(to: URL(fileURLWithPath: v2 + "/new/big.bin"))
            added.append("new/big.bin")
        }
        return (v1, v2, added)
    }

    /// `count` empty files named `0`, `1`, … in `folder` (made if missing): a tree that takes a
    /// while to delete.
    static func plantEmptyFiles(_ count: Int, in folder: String) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for index in 0..<count {
            let file = open(folder + "/\(index)", O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
            guard file >= 0 else { throw POSIXError(.EIO) }
            close(file)
        }
    }

    static func publish(_ content: String, version: String, storage: String, initialize: Bool = false) throws {
        var options = PublishOptions(
            storage: storage, content: content, version: v(version), baseURL: PublishFixture.base)
        options.initialize = initialize
        _ = try Publisher.publish(options)
    }

    struct Replay {
        /// The report, or nil when the update failed as `failing` expected.
        var report: SyncReport!
        var requests: [RequestRecord]
        var added: [String]
        /// The most requests the server had at once during the replay.
        var peak = 0

        /// The new files fetched one by one (repairs would show here too).
        var singleDownloads: Set<String> {
            Set(requests.filter { $0.path.hasPrefix("/RXCacheContent/") }.map { String($0.path.dropFirst(16)) })
                .intersection(added)
        }
        var archiveRequests: [RequestRecord] { requests.filter { $0.path == "/RXCacheContent.zip" } }
    }

    /// Restores 1.0, publishes 1.1 (then lets `edit` change the storage and the server), replays
    /// to 1.1 and checks that the tree is 1.1's and that nothing was repaired.
    static func replay(
        adding count: Int = 100, big: Bool = false, stored: Bool = false, failing: SyncError.Code? = nil,
        concurrency: Int = 4,
        transport: (any Transport)? = nil,
        edit: (_ storage: String, _ server: StorageServer, _ added: [String]) throws -> Void = { _, _, _ in },
        versions: ((_ scratch: String) throws -> (v1: String, v2: String, added: [String]))? = nil
    ) async throws -> Replay {
        try await withTemporaryDirectory { scratch in
            let (v1, v2, added) =
                try versions?(scratch) ?? makeVersions(scratch: scratch, count: count, big: big, stored: stored)
            let storage = scratch + "/storage"
            try publish(v1, version: "1.0", storage: storage, initialize: true)
            return try await withStorageServer(root: URL(fileURLWithPath: storage)) { server in
                var configuration = SyncConfiguration(
                    baseURL: server.baseURL!, contentDirectory: scratch + "/content",
                    stateDatabasePath: scratch + "/state.sqlite")
                configuration.maxConcurrentDownloads = 4
                #expect(try await CacheManager(configuration: configuration).checkForUpdates().outcome == .restored)
                configuration.maxConcurrentDownloads = concurrency
                configuration.transport = transport
                try publish(v2, version: "1.1", storage: storage)
                try edit(storage, server, added)
                server.resetLog()
                if let failing {
                    // Version 1.0 stays, whole.
                    await #expect { try await CacheManager(configuration: configuration).checkForUpdates() } throws: {
                        ($0 as? SyncError)?.code == failing
                    }
                    #expect(try ContentTree.scanLocal(scratch + "/content").tree == ContentTree.scan(v1))
                    return Replay(report: nil, requests: server.requests(), added: added)
                }
                let report = try await CacheManager(configuration: configuration).checkForUpdates()
                #expect(report.outcome == .replayed)
                #expect(try ContentTree.scanLocal(scratch + "/content").tree == ContentTree.scan(v2))
                #expect(report.repairedFiles == 0, "\(report.warnings)")
                #expect(report.filesDownloaded == added.count)
                return Replay(
                    report: report, requests: server.requests(), added: added, peak: server.peakConcurrentRequests)
            }
        }
    }

    @Test(arguments: [false, true])
    func manyNewFilesComeAsAFewRangesOfTheArchiveEachPinnedToItsEntityTag(stored: Bool) async throws {
        let replay = try await Self.replay(stored: stored)
        #expect(replay.singleDownloads.isEmpty, "\(replay.singleDownloads.sorted())")
        let archive = replay.archiveRequests
        // The end of the archive, then ranges: never the whole archive, all of one entity.
        #expect(archive.count >= 2 && archive.count < 40, "\(archive.count) requests for the archive")
        #expect(archive.allSatisfy { $0.headers["range"]?.hasPrefix("bytes=") == true && $0.status == 206 })
        #expect(archive.dropFirst().allSatisfy { $0.headers["if-match"] != nil })
        if !stored {
            // Less than the files' bytes: the text files travel deflated.
            #expect(replay.report.bytesDownloaded < Int64(replay.added.count) * (48 << 10))
        }
    }

    /// A fresh build asks for the ranges before `next/` is ready: they come while the plan is
    /// widened and an abandoned plan's `next/` is replaced, and none writes before. That stale
    /// `next/` holds a wrong file where a new one goes, 5,000 stray files (so that deleting it
    /// takes longer than the ranges take to come), and a symlink where a new folder goes,
    /// pointing outside: the tree comes out exact, every new file from the ranges, and nothing is
    /// written through the symlink.
    /// `stored`: the ranges stream, holding their bytes until `next/` is ready.
    @Test(arguments: [false, true])
    func rangesFetchedEarlyWriteOnlyIntoTheFreshNext(stored: Bool) async throws {
        try await withTemporaryDirectory { outside in
            let replay = try await Self.replay(stored: stored) { storage, _, added in
                let scratch = (storage as NSString).deletingLastPathComponent
                let next = StagingArea(contentDirectory: scratch + "/content").next
                let wrong = added.first { $0.hasPrefix("new/0/") }!
                try FileManager.default.createDirectory(
                    atPath: next + "/" + (wrong as NSString).deletingLastPathComponent,
                    withIntermediateDirectories: true)
                try Data("not the published bytes".utf8).write(to: URL(fileURLWithPath: next + "/" + wrong))
                for group in 0..<5 { try Self.plantEmptyFiles(1_000, in: next + "/new/stray\(group)") }
                try FileManager.default.createSymbolicLink(atPath: next + "/new/1", withDestinationPath: outside)
            }
            #expect(replay.singleDownloads.isEmpty, "\(replay.singleDownloads.sorted())")
            #expect(replay.archiveRequests.count >= 2)
            #expect(try FileManager.default.contentsOfDirectory(atPath: outside) == [])
        }
    }

    /// A twin's catch-up asks for its new files' ranges at once too, and they are written once the
    /// twin is in next/ and its dirty paths are gone: 1.0 (3 files) is restored, 1.1 adds one file
    /// (the client keeps 1.0 as its twin), 1.2 adds 100 more, which the catch-up of that twin
    /// takes from the archive. 5,000 stray files planted in one of the twin's folders make it
    /// dirty, so the catch-up removes them first (longer than the ranges take to come). The tree
    /// comes out exact, every new file from the ranges, and the twin is what became the folder.
    @Test func aTwinsCatchUpTakesItsNewFilesFromTheRanges() async throws {
        try await withTemporaryDirectory { scratch in
            let (v1, v3, added) = try Self.makeVersions(scratch: scratch + "/made", count: 100)
            let v2 = scratch + "/v2"
            try FileManager.default.copyItem(atPath: v1, toPath: v2)
            for folder in [v2, v3] {
                try Data("extra\n".utf8).write(to: URL(fileURLWithPath: folder + "/kept/extra.txt"))
            }
            let storage = scratch + "/storage"
            try Self.publish(v1, version: "1.0", storage: storage, initialize: true)
            try await withStorageServer(root: URL(fileURLWithPath: storage)) { server in
                var configuration = SyncConfiguration(
                    baseURL: server.baseURL!, contentDirectory: scratch + "/content",
                    stateDatabasePath: scratch + "/state.sqlite")
                configuration.maxConcurrentDownloads = 4
                #expect(try await CacheManager(configuration: configuration).checkForUpdates().outcome == .restored)
                try Self.publish(v2, version: "1.1", storage: storage)
                #expect(try await CacheManager(configuration: configuration).checkForUpdates().outcome == .replayed)
                let staging = StagingArea(contentDirectory: scratch + "/content")
                let twin = try #require(FileSystem.identity(of: staging.retired), "1.0 is kept as the twin")
                try Self.plantEmptyFiles(5_000, in: staging.retired + "/kept/stray")
                try Self.publish(v3, version: "1.2", storage: storage)
                server.resetLog()
                let report = try await CacheManager(configuration: configuration).checkForUpdates()
                #expect(report.outcome == .replayed)
                #expect(report.repairedFiles == 0, "\(report.warnings)")
                #expect(report.filesDownloaded == added.count)
                #expect(try ContentTree.scanLocal(scratch + "/content").tree == ContentTree.scan(v3))
                let current = try #require(FileSystem.identity(of: scratch + "/content"))
                #expect(current == twin, "the twin was caught up and became the content folder")
                let replay = Replay(report: report, requests: server.requests(), added: added)
                #expect(replay.singleDownloads.isEmpty, "\(replay.singleDownloads.sorted())")
                #expect(replay.archiveRequests.count >= 2)
            }
        }
    }

    /// Slow range answers (0.3 s) overlap as much as the client lets them: never more requests
    /// at once than `maxConcurrentDownloads`, with the manager's own transport (which holds the queued
    /// ranges behind its cap) and with one the app gives (whose own cap is wider).
    @Test(arguments: [false, true])
    func rangesNeverKeepMoreConnectionsBusyThanMaxConcurrentDownloads(givenTransport: Bool) async throws {
        let transport = givenTransport ? try CurlTransport() : nil
        let replay = try await Self.replay(concurrency: 2, transport: transport) { _, server, _ in
            server.injectFault(.delay(seconds: 0.3), forPath: "/RXCacheContent.zip")
        }
        await transport?.shutdown()
        #expect(replay.singleDownloads.isEmpty)
        #expect(replay.archiveRequests.count > 4, "the test needs ranges to overlap")
        // At most the cap (a loaded machine may send them too far apart to overlap at all).
        #expect(replay.peak >= 1 && replay.peak <= 2, "\(replay.peak) requests at once")
    }

    /// A transport the app gives that never passes bodies to `onBodyChunk` (it may: the option
    /// is a courtesy) gives the ranges no bytes: every file is downloaded singly, the tree exact.
    @Test func aTransportThatPassesNoChunksGetsEveryFileSingly() async throws {
        struct NoChunks: Transport {
            let inner: CurlTransport
            func data(for request: HTTPRequest) async throws -> HTTPResponse { try await inner.data(for: request) }
            func download(_ request: HTTPRequest, to path: String, options: DownloadOptions) async throws
                -> HTTPResponse
            {
                var options = options
                options.onBodyChunk = nil
                return try await inner.download(request, to: path, options: options)
            }
        }
        let inner = try CurlTransport()
        let replay = try await Self.replay(transport: NoChunks(inner: inner))
        await inner.shutdown()
        #expect(replay.singleDownloads == Set(replay.added), "\(replay.singleDownloads.count) of \(replay.added.count)")
        #expect(replay.archiveRequests.count >= 2, "the ranges were asked for (and gave nothing)")
    }

    /// A range's bytes: a retried attempt starts again from its first byte, more than the range
    /// is never kept, and only exactly the range counts as complete.
    @Test func rangeBytesRestartRefuseOverflowAndCountExactly() {
        let pool = RangeBufferPool(size: 10)
        let bytes = RangeBytes(count: 6, from: pool)
        [UInt8]([1, 2, 3, 4]).withUnsafeBytes { bytes.append($0) }
        #expect(!bytes.isComplete)
        bytes.start(status: 206, contentRange: nil) // the attempt failed after 4 bytes; the retry's body comes whole
        [UInt8]([9, 8, 7]).withUnsafeBytes { bytes.append($0) }
        [UInt8]([6, 5, 4]).withUnsafeBytes { bytes.append($0) }
        #expect(bytes.isComplete)
        #expect(Array(bytes.contents) == [9, 8, 7, 6, 5, 4])
        [UInt8]([3]).withUnsafeBytes { bytes.append($0) }
        #expect(!bytes.isComplete, "a seventh byte of a six-byte range")
        let short = RangeBytes(count: 3, from: pool)
        [UInt8]([1, 2]).withUnsafeBytes { short.append($0) }
        #expect(!short.isComplete)
    }

    /// A file larger than ``ArchiveRangeFetcher/maxEntryBytes`` is downloaded as a file: a
    /// range would hold its bytes in memory until inflated, to save one request.
    @Test func aLargeFileIsDownloadedAsAFile() async throws {
        let replay = try await Self.replay(adding: ArchiveRangeFetcher.minimumFiles, big: true)
        #expect(replay.singleDownloads == ["new/big.bin"])
        #expect(!replay.archiveRequests.isEmpty)
    }

    /// New files between files the client keeps: the gaps would add far more than the archive's
    /// share of the new bytes (1 %), so only the entries themselves are fetched.
    @Test func newFilesBetweenKeptOnesAreFetchedWithoutTheGaps() async throws {
        let count = 100
        let newBytes = 24 << 10
        let replay = try await Self.replay(versions: { scratch in
            let (v1, v2) = (scratch + "/v1", scratch + "/v2")
            var generator = SystemRandomNumberGenerator()
            var added: [String] = []
            for index in 0..<count {
                let kept = (0..<(15 << 10)).map { _ in UInt8.random(in: 0...255, using: &generator) }
                for root in [v1, v2] {
                    try FileManager.default.createDirectory(atPath: root + "/g", withIntermediateDirectories: true)
                    try Data(kept).write(to: URL(fileURLWithPath: root + String(format: "/g/k%03d.bin", index)))
                }
                let name = String(format: "g/k%03d_new.bin", index)
                let bytes = (0..<newBytes).map { _ in UInt8.random(in: 0...255, using: &generator) }
                try Data(bytes).write(to: URL(fileURLWithPath: v2 + "/" + name))
                added.append(name)
            }
            return (v1, v2, added)
        })
        #expect(replay.singleDownloads.isEmpty)
        let fetched = replay.archiveRequests.reduce(0) { $0 + $1.bodyBytes }
        // The kept files between them are 15 KiB each, under the gap a range spans: fetched,
        // they would add 1.5 MiB. Without them: the new bytes, their local headers, and the
        // archive's end read to find its directory.
        #expect(fetched < count * newBytes + 100 << 10, "\(fetched) bytes of the archive")
    }

    /// The archive's own bytes may add at most 1 % to the new files': 100 new files of 4 KiB
    /// (400 KiB) beside a directory of some 200 records (over 4 KiB) are downloaded one by one,
    /// which fetches exactly their bytes, and nothing is asked of the archive.
    @Test func newFilesTheDirectoryWouldAddOverOnePercentToAreDownloadedOneByOne() async throws {
        let replay = try await Self.replay(versions: { scratch in
            let (v1, v2) = (scratch + "/v1", scratch + "/v2")
            var generator = SystemRandomNumberGenerator()
            var added: [String] = []
            for index in 0..<100 {
                for root in [v1, v2] {
                    try FileManager.default.createDirectory(atPath: root + "/k", withIntermediateDirectories: true)
                    try Data("kept \(index)".utf8).write(to: URL(fileURLWithPath: root + "/k/\(index).txt"))
                }
                let name = "g/\(index).bin"
                try FileManager.default.createDirectory(atPath: v2 + "/g", withIntermediateDirectories: true)
                let bytes = (0..<(4 << 10)).map { _ in UInt8.random(in: 0...255, using: &generator) }
                try Data(bytes).write(to: URL(fileURLWithPath: v2 + "/" + name))
                added.append(name)
            }
            return (v1, v2, added)
        })
        #expect(replay.archiveRequests.isEmpty)
        #expect(replay.singleDownloads == Set(replay.added))
    }

    /// 64 tiny new files in a tree of 5,000: its directory (at least 62 bytes an entry) would
    /// weigh far more than the files, which the plan and the index tell before any request.
    @Test func aLargeTreeGainingFewBytesAsksNothingOfTheArchive() async throws {
        let replay = try await Self.replay(versions: { scratch in
            let (v1, v2) = (scratch + "/v1", scratch + "/v2")
            for root in [v1, v2] {
                for folder in 0..<50 {
                    try FileManager.default.createDirectory(
                        atPath: root + "/k/\(folder)", withIntermediateDirectories: true)
                    for file in 0..<100 {
                        try Data("\(folder)/\(file)".utf8).write(
                            to: URL(fileURLWithPath: root + "/k/\(folder)/\(file).txt"))
                    }
                }
            }
            let added = (0..<ArchiveRangeFetcher.minimumFiles).map { "new/\($0).txt" }
            try FileManager.default.createDirectory(atPath: v2 + "/new", withIntermediateDirectories: true)
            for path in added { try Data(path.utf8).write(to: URL(fileURLWithPath: v2 + "/" + path)) }
            return (v1, v2, added)
        })
        #expect(replay.archiveRequests.isEmpty)
        #expect(replay.singleDownloads == Set(replay.added))
    }

    @Test func aFewNewFilesAreDownloadedOneByOne() async throws {
        let replay = try await Self.replay(adding: ArchiveRangeFetcher.minimumFiles - 1)
        #expect(replay.archiveRequests.isEmpty)
        #expect(replay.singleDownloads == Set(replay.added))
    }

    /// A hostile (or careless) publisher's archive holds other bytes, with a correct CRC-32, for
    /// some files, and a symlink entry for one: those are downloaded, and only those.
    @Test func entriesWhoseBytesDifferFromTheChangeListAreDownloadedInstead() async throws {
        var altered: Set<String> = []
        let replay = try await Self.replay { storage, _, added in
            let content = storage + "/RXCacheContent/"
            altered = [added[1], added[2], added[7], added[40], added[99]]
            var entries: [RawZip.Entry] = []
            for path in try FileManager.default.subpathsOfDirectory(atPath: content).sorted() {
                var isFolder: ObjCBool = false
                FileManager.default.fileExists(atPath: content + path, isDirectory: &isFolder)
                var data = isFolder.boolValue ? [] : [UInt8](try Data(contentsOf: URL(fileURLWithPath: content + path)))
                var entry = RawZip.Entry(
                    rawName: Array(("RXCacheContent/" + path + (isFolder.boolValue ? "/" : "")).utf8), data: [])
                if isFolder.boolValue { entry.mode = 0o040755 }
                if altered.contains(path) {
                    data = data.map { $0 ^ 0x5A }
                    if path == added[7] { entry.mode = 0o120777 }
                }
                entry.data = data
                entries.append(entry)
            }
            try RawZip(entries: entries).bytes().write(to: URL(fileURLWithPath: storage + "/RXCacheContent.zip"))
            try StorageEditing.reseal(storage)
        }
        #expect(replay.singleDownloads == altered)
        #expect(!replay.archiveRequests.isEmpty)
    }

    /// Servers that do not answer ranges as asked, and an archive that is not there: every new
    /// file is downloaded one by one.
    @Test(arguments: ["whole body as 206", "shifted range", "404", "overlapping entries"], [false, true])
    func anArchiveThatCannotGiveItsEntriesLeavesThemToSingleDownloads(_ fault: String, stored: Bool) async throws {
        let replay = try await Self.replay(stored: stored) { storage, server, _ in
            switch fault {
            case "whole body as 206": server.injectFault(.wholeBodyAsPartialContent, forPath: "/RXCacheContent.zip")
            case "shifted range":
                server.injectFault(.shiftedRange(startShift: 1, endShift: 1), forPath: "/RXCacheContent.zip")
            case "404": server.injectFault(.status(404), forPath: "/RXCacheContent.zip")
            default:
                // Two records whose local headers are one: not plainly laid out.
                var entries = [
                    RawZip.Entry(rawName: Array("RXCacheContent/kept/a.txt".utf8), data: Array("kept a.txt\n".utf8))
                ]
                var shared = RawZip.Entry(rawName: Array("RXCacheContent/kept/b.txt".utf8), data: [])
                shared.sharesLocalHeaderOf = 0
                entries.append(shared)
                try RawZip(entries: entries).bytes().write(to: URL(fileURLWithPath: storage + "/RXCacheContent.zip"))
                try StorageEditing.reseal(storage)
            }
        }
        #expect(replay.singleDownloads == Set(replay.added))
    }

    /// Range answers that break off mid-body (the connection closed after a few KiB), answer
    /// 503, or stall at random: the transport retries each from its first byte, a streamed range
    /// keeps the files it placed and skips them on the retry, and the tree comes out exact with
    /// nothing repaired, whichever files ended up downloaded alone.
    @Test(arguments: [false, true])
    func rangesThatBreakOffAreRetriedAndTheTreeIsExact(stored: Bool) async throws {
        let replay = try await Self.replay(adding: 160, stored: stored) { _, server, _ in
            server.injectFault(.truncate(afterBytes: 150_000), forPath: "/RXCacheContent.zip", times: 2)
            server.injectRandomFaults(
                rate: 0.3, seed: stored ? 7 : 8, from: [.truncate(afterBytes: 200_000), .status(503)]
            ) { $0 == "/RXCacheContent.zip" }
        }
        let archive = replay.archiveRequests
        #expect(archive.contains { $0.status == 206 }, "some ranges came whole")
        #expect(archive.count >= 4, "\(archive.count) requests for the archive")
        #expect(replay.singleDownloads.count < replay.added.count, "the ranges placed files")
    }

    /// The archive is published again between the answer giving its directory and the ranges:
    /// `If-Match` makes the ranges fail (412), and the files are downloaded one by one.
    @Test(arguments: [false, true])
    func anArchiveRepublishedDuringTheReplayIsNotMixedIn(stored: Bool) async throws {
        let replay = try await Self.replay(stored: stored) { storage, server, _ in
            let archive = storage + "/RXCacheContent.zip"
            // Every answer of the archive waits 0.5 s before the file is opened, so the new upload
            // below is in place before any range after the first is served.
            server.injectFault(.delay(seconds: 0.5), forPath: "/RXCacheContent.zip")
            let replaced = Mutex(false)
            server.observeRequests { record in
                guard record.path == "/RXCacheContent.zip",
                    replaced.withLock({ done in
                        defer { done = true }
                        return !done
                    })
                else { return }
                // The same bytes under a new inode: a new entity tag, as a new upload gives.
                let copy = archive + ".new"
                try? FileManager.default.copyItem(atPath: archive, toPath: copy)
                rename(copy, archive)
            }
        }
        #expect(replay.archiveRequests.contains { $0.status == 412 })
        #expect(replay.singleDownloads == Set(replay.added))
    }

    /// A change list declaring sizes whose sum no integer holds: no range is planned (the sum
    /// would overflow), and the files, longer than nothing the list allows, are refused.
    @Test func sizesPastAnyFileFailTheUpdateWithoutACrash() async throws {
        _ = try await Self.replay(failing: .integrity) { storage, _, added in
            let list = storage + "/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json"
            var document = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: list))) as? [String: Any])
            var changes = try #require(document["changes"] as? [[String: Any]])
            for index in changes.indices where changes[index]["size"] != nil {
                changes[index]["size"] = Int64.max / 2
            }
            #expect(changes.filter { $0["size"] != nil }.count == added.count)
            document["changes"] = changes
            try JSONSerialization.data(withJSONObject: document).write(to: URL(fileURLWithPath: list))
            try StorageEditing.reseal(storage)
        }
    }

    @Test func withoutIntegrityTheArchiveIsNotUsed() async throws {
        let replay = try await Self.replay { storage, _, _ in try StorageEditing.stripIntegrity(storage) }
        #expect(replay.archiveRequests.isEmpty)
        #expect(replay.singleDownloads == Set(replay.added))
    }

    @Test(
        "ranges: entries join the range before them across small gaps until it reaches its target",
        arguments: [
            // (entries as start..<end, wanted, maxGap, target, expected pieces as (start, end, entries))
            ([0..<10, 10..<20, 20..<30, 30..<40], [0, 1, 2, 3], UInt64(0), UInt64(100), [(0, 40, [0, 1, 2, 3])]),
            ([0..<10, 10..<20, 20..<30, 30..<40], [0, 2], 0, 100, [(0, 10, [0]), (20, 30, [2])]),
            ([0..<10, 10..<20, 20..<30, 30..<40], [0, 2], 10, 100, [(0, 30, [0, 2])]),
            ([0..<10, 10..<20, 20..<30, 30..<40], [0, 1, 2, 3], 0, 20, [(0, 20, [0, 1]), (20, 40, [2, 3])]),
            (
                [0..<10, 10..<20, 20..<30, 30..<40], [0, 1, 2, 3], 0, 5,
                [(0, 10, [0]), (10, 20, [1]), (20, 30, [2]), (30, 40, [3])]
            ),
            ([0..<10, 10..<20, 20..<30, 30..<40], [3], 0, 100, [(30, 40, [3])]),
            ([0..<10], [], 0, 100, []),
        ] as [([Range<UInt64>], [Int], UInt64, UInt64, [(UInt64, UInt64, [Int])])])
    func rangePlan(
        entries: [Range<UInt64>], wanted: [Int], maxGap: UInt64, target: UInt64, expected: [(UInt64, UInt64, [Int])]
    ) {
        let directory = entries.map { ArchiveDirectory.Entry(name: [], start: $0.lowerBound, end: $0.upperBound) }
        let plan = ArchiveRangePlan(wanted: wanted, entries: directory, maxGap: maxGap, target: target)
        #expect(plan.pieces == expected.map { ArchiveRangePlan.Piece(start: $0.0, end: $0.1, entries: $0.2) })
    }

    @Test(
        "ranges go out with the most entries first, ties in archive order",
        arguments: [
            // entries per piece, in archive order → the order the pieces are fetched in
            ([1, 3, 3, 2], [1, 2, 3, 0]),
            ([5, 1, 1, 1], [0, 1, 2, 3]),
            ([1, 1, 1], [0, 1, 2]),
            ([2], [0]),
            ([], []),
        ] as [([Int], [Int])])
    func rangeLaunchOrder(counts: [Int], expected: [Int]) {
        var start: UInt64 = 0
        let pieces = counts.map { count -> ArchiveRangePlan.Piece in
            defer { start += 100 }
            return ArchiveRangePlan.Piece(start: start, end: start + 100, entries: Array(repeating: 0, count: count))
        }
        let plan = ArchiveRangePlan(pieces: pieces)
        #expect(plan.launchOrder == expected.map { pieces[$0] })
    }

    @Test(
        "the target range size: four ranges a connection, from 256 KiB to 2 MiB",
        arguments: [
            (UInt64(48 << 20), 8, UInt64(48 << 20) / 32), (1 << 20, 8, 256 << 10), (1 << 40, 8, 2 << 20),
            (4 << 20, 0, 1 << 20),
        ] as [(UInt64, Int, UInt64)])
    func rangeTarget(total: UInt64, connections: Int, target: UInt64) {
        #expect(ArchiveRangePlan.target(totalBytes: total, connections: connections) == target)
    }

    @Test(
        "Content-Range's complete length",
        arguments: [
            ("bytes 0-9/100", Int64(100)), ("bytes 5-9/7", nil), ("bytes */100", nil), ("bytes 0-9/*", nil),
            ("bytes 9-5/100", nil), ("garbage", nil), ("bytes 0-9/99999999999999999999999", nil),
        ] as [(String, Int64?)])
    func contentRangeTotal(header: String, total: Int64?) {
        #expect(ResponseExpectation.completeLength(ofContentRange: header) == total)
    }
}
