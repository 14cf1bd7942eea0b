import Archive
import Foundation
import StorageServer
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

@Suite("Clients verify what they receive and repair drift", .timeLimit(.minutes(3)))
struct IntegrityTests {
    /// A published storage at 1.0 (snapshot kept) then 1.1, and a client synced to 1.0.
    func withPublishedPair(_ body: (SyncHarness, String) async throws -> Void) async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            _ = try PublishFixture.publish("1.0", storage: storage, scratch: scratch, initialize: true)
            let first = scratch + "/snapshot-1.0"
            try FileManager.default.copyItem(atPath: storage, toPath: first)
            _ = try PublishFixture.publish("1.1", storage: storage, scratch: scratch)
            try await withSyncHarness(storageRoot: URL(fileURLWithPath: first)) { harness in
                try await harness.sync()
                try harness.expectTree(is: "1.0")
                harness.server.setRoot(URL(fileURLWithPath: storage))
                try await body(harness, storage)
            }
        }
    }

    func expectIntegrityFailure(_ harness: SyncHarness, mentioning text: String, keeping version: String) async throws {
        await #expect {
            try await harness.sync()
        } throws: { error in
            let error = error as! SyncError
            return error.code == .integrity && error.message.contains(text)
        }
        try harness.expectTree(is: version)
    }

    @Test func aClientWithIntegrityChecksOffStillSyncsAStorageThatCarriesThem() async throws {
        try await withPublishedPair { harness, storage in
            // A tampered file shows that checks are really off: the client takes it as published.
            try "tampered".write(toFile: storage + "/RXCacheContent/docs/faq.md", atomically: true, encoding: .utf8)
            var configuration = harness.configuration()
            configuration.verifyIntegrity = false
            let report = try await CacheManager(configuration: configuration).checkForUpdates()
            #expect(report.outcome == .replayed)
            #expect(try String(contentsOfFile: harness.content + "/docs/faq.md", encoding: .utf8) == "tampered")
        }
    }

    @Test func aChangedFileIsRefusedAndTheOldVersionKept() async throws {
        try await withPublishedPair { harness, storage in
            // docs/faq.md is added in 1.1; the storage now serves different bytes for it.
            try "tampered".write(toFile: storage + "/RXCacheContent/docs/faq.md", atomically: true, encoding: .utf8)
            try await expectIntegrityFailure(harness, mentioning: "faq.md", keeping: "1.0")
        }
    }

    @Test func aChangedFileInsideADeepFolderRedownloadIsRefusedByItsOwnHash() async throws {
        // ExampleStorage 1.3 refreshes styles/ with one deep redownload that names each file's bytes.
        try await withTemporaryDirectory { scratch in
            let storage = try copySnapshot("1.3", to: scratch + "/storage")
            try "tampered".write(
                toFile: storage.path + "/RXCacheContent/styles/print/print.css", atomically: true, encoding: .utf8)
            try await withSyncHarness(serving: "1.2") { harness in
                try await harness.sync()
                harness.server.setRoot(storage)
                let earlier = harness.server.requests().count
                try await expectIntegrityFailure(harness, mentioning: "styles/print/print.css", keeping: "1.2")
                #expect(
                    !harness.server.requests().dropFirst(earlier).contains { $0.path == "/RXCacheContent.zip" },
                    "refused by the file's own hash, not after a repair")
            }
        }
    }

    @Test func aChangedChangeListIsRefused() async throws {
        try await withPublishedPair { harness, storage in
            try rewrite(storage + "/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json") { $0 + " " }
            try await expectIntegrityFailure(harness, mentioning: "changes_1.0_1.1.json", keeping: "1.0")
        }
    }

    @Test func aChangedArchiveIsRefusedOnAFreshRestore() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            _ = try PublishFixture.publish("1.0", storage: storage, scratch: scratch, initialize: true)
            var zip = try Data(contentsOf: URL(fileURLWithPath: storage + "/RXCacheContent.zip"))
            zip[zip.count / 2] ^= 0xFF
            try zip.write(to: URL(fileURLWithPath: storage + "/RXCacheContent.zip"))
            try await withSyncHarness(storageRoot: URL(fileURLWithPath: storage)) { harness in
                await #expect {
                    try await harness.sync()
                } throws: { error in
                    (error as! SyncError).code == .integrity && "\(error)".contains("RXCacheContent.zip")
                }
                #expect(!FileManager.default.fileExists(atPath: harness.content))
            }
        }
    }

    @Test func aStaleArchiveIsRepairedFromTheContentManifest() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            _ = try PublishFixture.publish("1.0", storage: storage, scratch: scratch, initialize: true)
            let staleZip = try Data(contentsOf: URL(fileURLWithPath: storage + "/RXCacheContent.zip"))
            _ = try PublishFixture.publish("1.1", storage: storage, scratch: scratch)
            // The publisher forgot to rebuild the archive: 1.0's zip, with a status that vouches for it.
            try staleZip.write(to: URL(fileURLWithPath: storage + "/RXCacheContent.zip"))
            try rewrite(storage + "/RXCacheConfig/cacheStatus.json") { text in
                let regex = /"archive" : \{\s*"sha256" : "[0-9a-f]+",\s*"size" : [0-9]+\s*\}/
                return text.replacing(
                    regex,
                    with:
                        "\"archive\" : {\"sha256\" : \"\(FileDigest.sha256(staleZip))\", \"size\" : \(staleZip.count)}")
            }
            try await withSyncHarness(storageRoot: URL(fileURLWithPath: storage)) { harness in
                let report = try await harness.sync()
                #expect(report.outcome == .restored)
                #expect(report.repairedFiles > 0)
                #expect(report.warnings.contains { $0.contains("stale archive") })
                try harness.expectTree(is: "1.1")
            }
        }
    }

    /// With the restore's twin, the replay builds from the twin, which the drift never reached;
    /// without it (the staging area cleared), from links to the content folder, and the tree
    /// check repairs what they carried.
    @Test(arguments: [true, false])
    func localDriftIsRepairedDuringAReplay(keepingTwin: Bool) async throws {
        try await withPublishedPair { harness, _ in
            if !keepingTwin { try harness.removeTwinFolder() }
            // Something corrupted a file the replay keeps, and planted a folder.
            try "corrupted locally".write(toFile: harness.content + "/README.txt", atomically: true, encoding: .utf8)
            try FileManager.default.createDirectory(
                atPath: harness.content + "/stray", withIntermediateDirectories: true)
            let report = try await harness.sync()
            #expect(report.outcome == .replayed)
            if keepingTwin {
                #expect(report.repairedFiles == 0, "the twin holds 1.0 as restored")
            } else {
                #expect(report.repairedFiles >= 2)
            }
            try harness.expectTree(is: "1.1")
        }
    }

    @Test func aFileLargerThanDeclaredIsCutOffAtItsSize() async throws {
        try await withPublishedPair { harness, storage in
            let path = storage + "/RXCacheContent/docs/faq.md"
            let original = try Data(contentsOf: URL(fileURLWithPath: path))
            try (original + Data(repeating: 0x41, count: 5 << 20)).write(to: URL(fileURLWithPath: path))
            harness.server.resetLog()
            await #expect(throws: SyncError.self) { try await harness.sync() }
            try harness.expectTree(is: "1.0")
            #expect(harness.server.requests().contains { $0.path.hasSuffix("faq.md") })
        }
    }
}
