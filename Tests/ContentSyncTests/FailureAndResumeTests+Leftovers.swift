import Foundation
import StorageServer
import Testing
import ToolSupport

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// Regressions found by the crash loop (`scripts/chaos/crash_loop.py`).
extension FailureAndResumeTests {
    /// A restore that fails after extraction (here: its tree check cannot reach the content
    /// manifest) keeps the archive, so the next run does not download it again.
    @Test func aRestoreInterruptedAfterExtractionDoesNotDownloadTheArchiveAgain() async throws {
        try await withTemporaryDirectory { scratch in
            // An archive over 1 MiB (smaller ones are not kept for resuming), left stale by its
            // publisher so that the tree check needs the manifest.
            let content = scratch + "/content"
            try PublishFixture.materializeContent("1.0", at: content)
            var random = SplitMix64(seed: 42)
            try Data((0..<(2 << 20)).map { _ in UInt8(truncatingIfNeeded: random.next()) })
                .write(to: URL(fileURLWithPath: content + "/data/big.bin"))
            let storage = scratch + "/storage"
            var options = PublishOptions(
                storage: storage, content: content, version: v("1.0"), baseURL: PublishFixture.base)
            options.initialize = true
            _ = try Publisher.publish(options)
            let staleZip = try Data(contentsOf: URL(fileURLWithPath: storage + "/RXCacheContent.zip"))
            try "new in 1.1".write(toFile: content + "/extra.txt", atomically: true, encoding: .utf8)
            _ = try Publisher.publish(
                PublishOptions(storage: storage, content: content, version: v("1.1"), baseURL: PublishFixture.base))
            try staleZip.write(to: URL(fileURLWithPath: storage + "/RXCacheContent.zip"))
            try StorageEditing.reseal(storage)

            try await withSyncHarness(storageRoot: URL(fileURLWithPath: storage)) { harness in
                harness.server.injectFault(.status(503), forPath: "/RXCacheConfig/contentManifest.json")
                await #expect(throws: SyncError.self) { try await harness.sync() }
                #expect(!FileManager.default.fileExists(atPath: harness.content))
                #expect(harness.server.bytesServed(forPathSuffix: "RXCacheContent.zip") == staleZip.count)

                harness.server.clearFaults()
                harness.server.resetLog()
                let report = try await harness.sync()
                #expect(report.outcome == .restored)
                #expect(
                    harness.server.bytesServed(forPathSuffix: "RXCacheContent.zip") == 0,
                    "the kept archive was downloaded again")
                #expect(try String(contentsOfFile: harness.content + "/extra.txt", encoding: .utf8) == "new in 1.1")
            }
        }
    }

    /// A run killed while it deleted the previous version after its switch leaves the staging
    /// area behind with no plan pending; the next run removes it, but for the twin.
    @Test func stagingLeftAfterAFinishedSwitchIsRemovedByTheNextRun() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            let staging = StagingArea(contentDirectory: harness.content)
            for leftover in [staging.discarded, staging.next, staging.seed] {
                try FileManager.default.createDirectory(atPath: leftover + "/docs", withIntermediateDirectories: true)
                try "old".write(toFile: leftover + "/docs/intro.md", atomically: true, encoding: .utf8)
            }
            try FileManager.default.createDirectory(atPath: staging.partial, withIntermediateDirectories: true)
            let twin = try #require(FileSystem.identity(of: staging.retired))
            let report = try await harness.sync()
            #expect(report.outcome == .upToDate)
            #expect(harness.stagingEntries() == ["retired"])
            #expect(FileSystem.identity(of: staging.retired).map { $0 == twin } == true)
            try harness.expectTree(is: "1.0")
        }
    }
}
