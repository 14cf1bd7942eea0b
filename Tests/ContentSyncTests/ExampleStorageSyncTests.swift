import Foundation
import StorageServer
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

@Suite("ExampleStorage mirrors exactly, step by step and by jumps", .timeLimit(.minutes(3)))
struct ExampleStorageSyncTests {
    @Test func aFreshClientRestoresTheLatestVersionFromTheArchive() async throws {
        try await withSyncHarness(serving: "1.4") { harness in
            let report = try await harness.sync()
            #expect(report.outcome == .restored)
            #expect(report.toVersion.text == "1.4")
            try harness.expectTree(is: "1.4")
            #expect(harness.contentDownloads().isEmpty, "a restore fetches the archive, not single files")
            #expect(harness.server.requests().contains { $0.path == "/RXCacheContent.zip" && $0.status == 200 })
            // The content folder holds content only; the staging area, the twin the restore left
            // (the next replay's base): the same files, linked, not copied.
            #expect(harness.stagingEntries() == ["retired"])
            let twin = StagingArea(contentDirectory: harness.content).retired
            #expect(try TreeSnapshot.read(twin) == harness.tree())
            for path in ExampleStorageFixture.manifest("1.4").files.keys {
                let linked = try #require(FileIdentity(path: twin + "/" + path))
                #expect(linked == FileIdentity(path: harness.content + "/" + path), "\(path)")
            }
            #expect(try await harness.manager().localVersion()?.text == "1.4")
        }
    }

    @Test func everyVersionIsReachedStepByStep() async throws {
        try await withSyncHarness { harness in
            for version in ExampleStorageFixture.versions {
                harness.serve(version)
                let report = try await harness.sync()
                #expect(report.toVersion.text == version)
                try harness.expectTree(is: version)
            }
        }
    }

    @Test(arguments: [
        ("1.0", "1.1"), ("1.0", "1.2"), ("1.0", "1.3"), ("1.0", "1.4"), ("1.1", "1.3"),
        ("1.1", "1.4"), ("1.2", "1.4"), ("1.3", "1.4"), ("1.2", "1.3"),
    ])
    func aClientSeveralVersionsBehindJumpsToTheLatest(from: String, to: String) async throws {
        try await withSyncHarness(serving: from) { harness in
            try await harness.sync()
            try harness.expectTree(is: from)
            harness.serve(to)
            harness.server.resetLog()
            let report = try await harness.sync()
            try harness.expectTree(is: to)
            let minimal = try CacheVersion(ExampleStorageFixture.minimalVersion(of: to))
            let expected: SyncReport.Outcome = try CacheVersion(from) >= minimal ? .replayed : .restored
            #expect(report.outcome == expected)
            // Either way one twin is left: a replay's is the previous version, a restore's the new
            // one (the previous version is not kept).
            #expect(harness.stagingEntries() == ["retired"])
            let twin = try #require(try await StateStore(path: harness.state).twin())
            #expect(twin.baseVersion == to)
            if expected == .restored {
                #expect(try TreeSnapshot.read(StagingArea(contentDirectory: harness.content).retired) == harness.tree())
            }
            if expected == .replayed {
                let downloads = harness.contentDownloads()
                #expect(Set(downloads).count == downloads.count, "a file was fetched twice: \(downloads)")
                #expect(report.filesDownloaded == downloads.count)
            }
        }
    }

    @Test func theNetPlanFetchesAddedThenMovedFilesOnceAndAddedThenRemovedFilesNever() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            harness.serve("1.2")
            harness.server.resetLog()
            let report = try await harness.sync()
            let downloads = harness.contentDownloads()
            #expect(downloads.contains("help/faq.md"), "the 1.1 file moved in 1.2 comes from its final place")
            #expect(!downloads.contains("docs/faq.md"))
            #expect(!downloads.contains("guides/start/quickstart.md"), "added in 1.1 and removed in 1.2: never fetched")
            #expect(report.changeListsApplied == 2)
            #expect(report.filesReused > 0)
        }
    }

    @Test func aCurrentClientMakesOneConditionalRequest() async throws {
        try await withSyncHarness(serving: "1.4") { harness in
            try await harness.sync()
            harness.server.resetLog()
            let report = try await harness.sync()
            #expect(report.outcome == .upToDate)
            let requests = harness.server.requests()
            #expect(requests.count == 1)
            #expect(requests.first?.status == 304)
            #expect(requests.first?.ifNoneMatch != nil)
        }
    }

    /// A replay's progress names the version being installed and, the change list giving every
    /// file's size, the bytes in all (so a progress bar shows the time left).
    @Test func aReplaysProgressNamesItsTargetAndItsBytesInAll() async throws {
        try await withSyncHarness(serving: "1.3") { harness in
            try await harness.sync()
            harness.serve("1.4")
            let manager = try harness.manager()
            let events = await manager.events()
            let collector = Task {
                var seen: [SyncProgress] = []
                for await event in events {
                    switch event {
                    case .progress(let progress): seen.append(progress)
                    case .finished, .failed: return seen
                    default: break
                    }
                }
                return seen
            }
            try await manager.checkForUpdates()
            let seen = await collector.value
            let downloads = seen.filter { $0.phase == .downloadingFiles }
            #expect(!downloads.isEmpty, "\(seen)")
            #expect(downloads.allSatisfy { $0.bytesTotal != nil && $0.bytesTotal! > 0 }, "\(downloads)")
            #expect(seen.filter { $0.phase != .checking }.allSatisfy { $0.toVersion?.text == "1.4" }, "\(seen)")
        }
    }

    @Test func theManagerReportsStatesAndProgressToObservers() async throws {
        try await withSyncHarness(serving: "1.4") { harness in
            let manager = try harness.manager()
            let events = await manager.events()
            let collector = Task {
                var states: [CacheManagerState] = []
                var sawProgress = false
                for await event in events {
                    switch event {
                    case .stateChanged(let state): states.append(state)
                    case .progress: sawProgress = true
                    case .finished: return (states, sawProgress)
                    default: break
                    }
                }
                return (states, sawProgress)
            }
            try await manager.checkForUpdates()
            let (states, sawProgress) = await collector.value
            #expect(states.prefix(2) == [.ready, .working], "the stream starts with the current state: \(states)")
            #expect(sawProgress)
            #expect(await manager.state == .succeeded)
            #expect(await manager.lastError() == nil)
            #expect(try await manager.lastCheck() != nil)
            let history = try await manager.history()
            #expect(history.first?.outcome == .succeeded && history.first?.kind == .restore)
            // Reading helpers.
            let text = try manager.string(at: "README.txt")
            #expect(!text.isEmpty)
            #expect(throws: SyncError.self) { try manager.data(at: "../state.sqlite") }
        }
    }

    @Test func resetForgetsStateAndContentSoTheNextCheckRestores() async throws {
        try await withSyncHarness(serving: "1.4") { harness in
            let manager = try harness.manager()
            try await manager.checkForUpdates()
            try await manager.reset()
            #expect(try await manager.localVersion() == nil)
            #expect(!FileManager.default.fileExists(atPath: harness.content))
            let report = try await manager.checkForUpdates()
            #expect(report.outcome == .restored)
            try harness.expectTree(is: "1.4")
        }
    }
}
