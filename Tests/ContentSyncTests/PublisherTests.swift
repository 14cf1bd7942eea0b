import Archive
import Foundation
import StorageServer
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

@Suite("publish builds storages that clients mirror exactly", .timeLimit(.minutes(3)))
struct PublisherTests {
    @Test func everyPublishedVersionSyncsFromScratchAndFromEveryOlderVersion() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            let versions = ExampleStorageFixture.versions
            var snapshots: [String: URL] = [:]
            for (index, version) in versions.enumerated() {
                let report = try PublishFixture.publish(
                    version, storage: storage, scratch: scratch, initialize: index == 0)
                #expect(report.toVersion.text == version)
                let snapshot = scratch + "/snapshot-\(version)"
                try FileManager.default.copyItem(atPath: storage, toPath: snapshot)
                snapshots[version] = URL(fileURLWithPath: snapshot)
            }
            for (index, target) in versions.enumerated() {
                for start in [nil] + versions[..<index].map(Optional.some) {
                    try await withSyncHarness(storageRoot: snapshots[start ?? target]!) { harness in
                        try await harness.sync()
                        harness.server.setRoot(snapshots[target]!)
                        let report = try await harness.sync()
                        #expect(report.toVersion.text == target)
                        try harness.expectTree(is: target)
                        if start != nil && start != target {
                            #expect(report.outcome == .replayed, "\(start!) → \(target) replays: minimal stays 1.0")
                        }
                    }
                }
            }
        }
    }

    @Test func theIntegrityDataTellsTheTruthAboutWhatWasPublished() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            _ = try PublishFixture.publish("1.1", storage: storage, scratch: scratch, initialize: true)
            _ = try PublishFixture.publish("1.2", storage: storage, scratch: scratch)
            let status = try #require(
                try JSONSerialization.jsonObject(
                    with: Data(contentsOf: URL(fileURLWithPath: storage + "/RXCacheConfig/cacheStatus.json")))
                    as? [String: Any])
            let integrity = try #require(status["integrity"] as? [String: Any])
            let archive = try #require(integrity["archive"] as? [String: Any])
            let zip = try Data(contentsOf: URL(fileURLWithPath: storage + "/RXCacheContent.zip"))
            #expect(archive["sha256"] as? String == FileDigest.sha256(zip))
            #expect((archive["size"] as? NSNumber)?.intValue == zip.count)
            #expect(
                integrity["treeDigest"] as? String
                    == TreeDigest.digest(of: try ContentTree.scan(scratch + "/content-1.2")))
            let lists = try #require(integrity["changeLists"] as? [String: [String: Any]])
            let listURL = PublishFixture.base.absoluteString + "RXCacheConfig/HistoryOfVersions/changes_1.1_1.2.json"
            let listData = try Data(
                contentsOf: URL(fileURLWithPath: storage + "/RXCacheConfig/HistoryOfVersions/changes_1.1_1.2.json"))
            #expect(lists[listURL]?["sha256"] as? String == FileDigest.sha256(listData))
            // Every change that downloads names the bytes it downloads.
            let changeList = try #require(try JSONSerialization.jsonObject(with: listData) as? [String: Any])
            var checked = 0
            for change in changeList["changes"] as! [[String: Any]] {
                guard let hash = change["sha256"] as? String else { continue }
                let url = change["newPath"] as! String
                let relative = String(url.dropFirst((PublishFixture.base.absoluteString + "RXCacheContent/").count))
                    .removingPercentEncoding!
                #expect(SHA256Hex.of(file: scratch + "/content-1.2/" + relative) == hash)
                checked += 1
            }
            #expect(checked > 0)
        }
    }

    @Test func publishingTheSameContentTwiceGivesTheSameArchiveBytes() async throws {
        try await withTemporaryDirectory { scratch in
            for name in ["a", "b"] {
                _ = try PublishFixture.publish("1.2", storage: scratch + "/\(name)", scratch: scratch, initialize: true)
            }
            let a = FileManager.default.contents(atPath: scratch + "/a/RXCacheContent.zip")
            let b = FileManager.default.contents(atPath: scratch + "/b/RXCacheContent.zip")
            #expect(a != nil && a == b)
            let statusA = FileManager.default.contents(atPath: scratch + "/a/RXCacheConfig/cacheStatus.json")
            #expect(statusA == FileManager.default.contents(atPath: scratch + "/b/RXCacheConfig/cacheStatus.json"))
        }
    }

    @Test func anArchiveBuiltFromThePreviousOneIsByteIdenticalToAFreshOne() async throws {
        try await withTemporaryDirectory { scratch in
            var last: PublishReport?
            for (index, version) in ["1.0", "1.1", "1.2", "1.3", "1.4"].enumerated() {
                last = try PublishFixture.publish(
                    version, storage: scratch + "/incremental", scratch: scratch, initialize: index == 0)
            }
            _ = try PublishFixture.publish("1.4", storage: scratch + "/fresh", scratch: scratch, initialize: true)
            #expect((last?.reusedArchiveEntries ?? 0) >= 10, "1.3 → 1.4 keeps most files: their entries are copied")
            let incremental = FileManager.default.contents(atPath: scratch + "/incremental/RXCacheContent.zip")
            #expect(
                incremental != nil
                    && incremental == FileManager.default.contents(atPath: scratch + "/fresh/RXCacheContent.zip"))
        }
    }

    /// A previous archive that is not the one its status published (a byte flipped in an entry's
    /// data keeps every recorded CRC and size) gives nothing to the next one: it is built fresh,
    /// byte for byte a fresh build's, instead of carrying the damage into every later version.
    /// A status without integrity data (a storage taken over from another tool) vouches for no
    /// archive: a damaged one neither fails every publish nor is copied from.
    @Test(arguments: [true, false])
    func aDamagedPreviousArchiveIsNotCopiedFrom(statusHasIntegrity: Bool) async throws {
        try await withTemporaryDirectory { scratch in
            for (index, version) in ["1.0", "1.1", "1.2", "1.3"].enumerated() {
                _ = try PublishFixture.publish(
                    version, storage: scratch + "/incremental", scratch: scratch, initialize: index == 0)
            }
            if !statusHasIntegrity {
                let path = scratch + "/incremental/RXCacheConfig/cacheStatus.json"
                var status = try #require(
                    try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path)))
                        as? [String: Any])
                #expect(status.removeValue(forKey: "integrity") != nil)
                try JSONSerialization.data(withJSONObject: status).write(to: URL(fileURLWithPath: path))
            }
            let archive = scratch + "/incremental/RXCacheContent.zip"
            let fd = open(archive, O_RDWR)
            var info = stat()
            #expect(fd >= 0 && fstat(fd, &info) == 0)
            var byte: UInt8 = 0
            let at = off_t(info.st_size / 3)
            #expect(pread(fd, &byte, 1, at) == 1)
            byte ^= 0x5A
            #expect(pwrite(fd, &byte, 1, at) == 1)
            close(fd)
            let last = try PublishFixture.publish("1.4", storage: scratch + "/incremental", scratch: scratch)
            _ = try PublishFixture.publish("1.4", storage: scratch + "/fresh", scratch: scratch, initialize: true)
            #expect(last.reusedArchiveEntries == 0, "nothing is copied from an archive that is not the published one")
            let incremental = FileManager.default.contents(atPath: archive)
            #expect(
                incremental != nil
                    && incremental == FileManager.default.contents(atPath: scratch + "/fresh/RXCacheContent.zip"))
        }
    }

    @Test func aVersionNotAboveTheCurrentOneAndAMinimalAboveTheVersionAreRefused() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            _ = try PublishFixture.publish("1.1", storage: storage, scratch: scratch, initialize: true)
            #expect(throws: PublishError.self) { try PublishFixture.publish("1.0", storage: storage, scratch: scratch) }
            #expect(throws: PublishError.self) {
                try PublishFixture.publish("1.2", storage: storage, scratch: scratch, minimal: "1.3")
            }
            #expect(throws: PublishError.self) {
                try PublishFixture.publish("1.2", storage: storage, scratch: scratch, initialize: true)
            }
            // Nothing was written by the refusals.
            let status = try String(contentsOfFile: storage + "/RXCacheConfig/cacheStatus.json", encoding: .utf8)
            #expect(status.contains("\"1.1\""))
        }
    }

    @Test func aDryRunReportsThePlanAndWritesNothing() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            _ = try PublishFixture.publish("1.0", storage: storage, scratch: scratch, initialize: true)
            let before = allPaths(under: storage)
            let zip = FileManager.default.contents(atPath: storage + "/RXCacheContent.zip")
            try PublishFixture.materializeContent("1.1", at: scratch + "/content-1.1")
            var options = PublishOptions(
                storage: storage, content: scratch + "/content-1.1", version: v("1.1"), baseURL: PublishFixture.base)
            options.dryRun = true
            let report = try Publisher.publish(options)
            #expect(!report.changes.isEmpty)
            #expect(report.bytesToDownload > 0)
            #expect(allPaths(under: storage) == before)
            #expect(FileManager.default.contents(atPath: storage + "/RXCacheContent.zip") == zip)
        }
    }

    @Test func namesThatDifferOnlyInCaseAreRefused() async throws {
        try await withTemporaryDirectory { scratch in
            try PublishFixture.materializeContent("1.0", at: scratch + "/content")
            try "shouting".write(toFile: scratch + "/content/README.TXT", atomically: true, encoding: .utf8)
            var options = PublishOptions(
                storage: scratch + "/storage", content: scratch + "/content", version: v("1.0"),
                baseURL: PublishFixture.base)
            options.initialize = true
            #expect {
                try Publisher.publish(options)
            } throws: { error in
                "\(error)".contains("'README.TXT'") && "\(error)".contains("'README.txt'")
                    && "\(error)".contains("only in case")
            }
            #expect(!FileManager.default.fileExists(atPath: scratch + "/storage/RXCacheConfig/cacheStatus.json"))
        }
    }

    @Test func symlinksInTheContentAreRefused() async throws {
        try await withTemporaryDirectory { scratch in
            try PublishFixture.materializeContent("1.0", at: scratch + "/content")
            try FileManager.default.createSymbolicLink(
                atPath: scratch + "/content/link.txt", withDestinationPath: "/etc/passwd")
            var options = PublishOptions(
                storage: scratch + "/storage", content: scratch + "/content", version: v("1.0"),
                baseURL: PublishFixture.base)
            options.initialize = true
            #expect {
                try Publisher.publish(options)
            } throws: { error in
                "\(error)".contains("link.txt") && "\(error)".contains("symlink")
            }
            #expect(!FileManager.default.fileExists(atPath: scratch + "/storage/RXCacheConfig/cacheStatus.json"))
        }
    }
}
