import Foundation
import StorageServer
import Synchronization
import Testing

@testable import ContentSync
@testable import StorageFormat

/// `SyncConfiguration.beforeSwitch`: asked with the complete staged tree before the switch; a
/// veto leaves version N exactly as it was, and the next update asks again.
@Suite("A pre-switch veto keeps version N", .timeLimit(.minutes(3)))
struct BeforeSwitchTests {
    /// What the hook was shown: each pending switch, and the staged tree as it was then.
    final class Recorder: Sendable {
        private let seen = Mutex<[(PendingSwitch, TreeSnapshot)]>([])
        var switches: [PendingSwitch] { seen.withLock { $0.map(\.0) } }
        var trees: [TreeSnapshot] { seen.withLock { $0.map(\.1) } }

        /// A hook that records, then throws `veto` when given.
        func hook(vetoingWith veto: (any Error & Sendable)?) -> @Sendable (PendingSwitch) async throws -> Void {
            { pending in
                let tree = try await offPool { try TreeSnapshot.read(pending.stagedDirectory) }
                self.seen.withLock { $0.append((pending, tree)) }
                if let veto { throw veto }
            }
        }
    }

    struct NotToday: Error, Sendable, CustomStringConvertible {
        var description: String { "the smoke test found no index page" }
    }

    func manager(_ harness: SyncHarness, _ hook: (@Sendable (PendingSwitch) async throws -> Void)?) throws
        -> CacheManager
    {
        var configuration = harness.configuration()
        configuration.beforeSwitch = hook
        return try CacheManager(configuration: configuration)
    }

    func expectVeto(of version: String, _ error: any Error, sourceLocation: SourceLocation = #_sourceLocation) {
        let error = error as? SyncError
        #expect(error?.code == .vetoed, "\(String(describing: error))", sourceLocation: sourceLocation)
        #expect(
            error?.message.contains("version \(version)") == true, "\(String(describing: error))",
            sourceLocation: sourceLocation)
        #expect(
            error?.message.contains("the smoke test found no index page") == true, "\(String(describing: error))",
            sourceLocation: sourceLocation)
    }

    @Test func aVetoedReplayLeavesTheFolderAtNAndTheNextUpdateResumesAndAsksAgain() async throws {
        try await withSyncHarness(serving: "1.2") { harness in
            try await harness.sync()
            let before = try harness.tree()
            harness.serve("1.4")
            harness.server.resetLog()
            let vetoing = Recorder()
            await #expect {
                try await manager(harness, vetoing.hook(vetoingWith: NotToday())).checkForUpdates()
            } throws: { error in
                expectVeto(of: "1.4", error)
                return true
            }
            let after = try harness.tree()
            #expect(after == before, "the folder changed: \(after.difference(from: before))")
            try harness.expectTree(is: "1.2")
            let status = try await SyncStatus.read(statePath: harness.state, contentDirectory: harness.content)
            #expect(status.version == "1.2")
            #expect(status.state == .failed)
            #expect(status.lastErrorCode == .vetoed)
            #expect(status.runningUpdate == nil)
            #expect(status.history.first?.kind == .replay && status.history.first?.outcome == .failed)

            // The hook saw the whole new version, staged beside the content.
            let shown = try #require(vetoing.switches.first)
            #expect(vetoing.switches.count == 1)
            #expect(vetoing.trees.first == ExampleStorageFixture.manifest("1.4"))
            #expect(shown.kind == .replay && shown.fromVersion?.text == "1.2" && shown.toVersion.text == "1.4")
            #expect(shown.contentDirectory == harness.content && shown.stagedDirectory != harness.content)
            #expect(shown.filesDownloaded == harness.contentDownloads().count && shown.filesDownloaded > 0)
            #expect(shown.filesReused > 0)
            #expect(shown.changeListsApplied == 2)
            // The vetoed attempt's downloads are in its history (the next attempt reuses them).
            #expect(status.history.first?.bytesDownloaded == shown.bytesDownloaded && shown.bytesDownloaded > 0)
            #expect(status.history.first?.filesDownloaded == shown.filesDownloaded)

            // The next update resumes the kept staged tree (nothing is downloaded again), asks
            // again, and switches when allowed.
            harness.server.resetLog()
            let approving = Recorder()
            let report = try await manager(harness, approving.hook(vetoingWith: nil)).checkForUpdates()
            #expect(report.outcome == .replayed && report.toVersion.text == "1.4")
            #expect(report.bytesDownloaded == 0 && report.filesDownloaded == 0, "counted once, by the vetoed attempt")
            try harness.expectTree(is: "1.4")
            #expect(approving.trees == [ExampleStorageFixture.manifest("1.4")])
            #expect(harness.contentDownloads().isEmpty, "downloaded again: \(harness.contentDownloads())")
            #expect(try await harness.manager().localVersion()?.text == "1.4")
            #expect(!FileManager.default.fileExists(atPath: StagingArea(contentDirectory: harness.content).next))
        }
    }

    @Test func aVetoedRestoreLeavesTheFolderAtNAndTheNextUpdateSwitchesWithoutTheArchiveAgain() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            let before = try harness.tree()
            // 1.3's minimal version is 1.1: a 1.0 client restores.
            harness.serve("1.3")
            harness.server.resetLog()
            let vetoing = Recorder()
            await #expect {
                try await manager(harness, vetoing.hook(vetoingWith: NotToday())).checkForUpdates()
            } throws: { error in
                expectVeto(of: "1.3", error)
                return true
            }
            let after = try harness.tree()
            #expect(after == before, "the folder changed: \(after.difference(from: before))")
            #expect(try await harness.manager().localVersion()?.text == "1.0")
            let shown = try #require(vetoing.switches.first)
            #expect(shown.kind == .restore && shown.fromVersion?.text == "1.0" && shown.toVersion.text == "1.3")
            #expect(shown.filesDownloaded == ExampleStorageFixture.manifest("1.3").files.count)
            #expect(shown.bytesDownloaded > 0 && shown.filesReused == 0 && shown.changeListsApplied == 0)
            #expect(vetoing.trees.first == ExampleStorageFixture.manifest("1.3"))
            let history = try await harness.manager().history()
            #expect(history.first?.kind == .restore && history.first?.errorCode == .vetoed)
            #expect(history.first?.bytesDownloaded == shown.bytesDownloaded)
            #expect(history.first?.filesDownloaded == shown.filesDownloaded)

            harness.server.resetLog()
            let approving = Recorder()
            let report = try await manager(harness, approving.hook(vetoingWith: nil)).checkForUpdates()
            #expect(report.outcome == .restored)
            #expect(report.bytesDownloaded == 0, "counted once, by the vetoed attempt")
            try harness.expectTree(is: "1.3")
            #expect(approving.trees == [ExampleStorageFixture.manifest("1.3")])
            #expect(
                harness.server.bytesServed(forPathSuffix: "RXCacheContent.zip") == 0,
                "the kept archive was downloaded again")
        }
    }

    @Test func aVetoedFirstRestoreCreatesNoFolderAndShowsNoOldVersion() async throws {
        try await withSyncHarness(serving: "1.2") { harness in
            let vetoing = Recorder()
            await #expect {
                try await manager(harness, vetoing.hook(vetoingWith: NotToday())).checkForUpdates()
            } throws: { error in
                expectVeto(of: "1.2", error)
                return true
            }
            #expect(!FileManager.default.fileExists(atPath: harness.content))
            #expect(try await harness.manager().localVersion() == nil)
            #expect(vetoing.switches.first?.fromVersion == nil && vetoing.switches.first?.kind == .restore)
            #expect(vetoing.trees.first == ExampleStorageFixture.manifest("1.2"))
            try await harness.sync()
            try harness.expectTree(is: "1.2")
        }
    }

    /// A version vetoed, then superseded: the kept staged tree is for the old target, and the
    /// next update builds the new one from scratch.
    @Test func anUpdateToAnotherVersionAfterAVetoStartsAfresh() async throws {
        try await withSyncHarness(serving: "1.2") { harness in
            try await harness.sync()
            harness.serve("1.3")
            await #expect(throws: SyncError.self) {
                try await manager(harness, Recorder().hook(vetoingWith: NotToday())).checkForUpdates()
            }
            try harness.expectTree(is: "1.2")
            harness.serve("1.4")
            let approving = Recorder()
            let report = try await manager(harness, approving.hook(vetoingWith: nil)).checkForUpdates()
            #expect(report.fromVersion?.text == "1.2" && report.toVersion.text == "1.4")
            try harness.expectTree(is: "1.4")
            #expect(approving.trees == [ExampleStorageFixture.manifest("1.4")])
        }
    }

    /// A hook still waiting when the update is suspended: the update ends as cancelled, not
    /// vetoed, and leaves no lock or staging that stops the next run.
    @Test func aHookCancelledWhileItWaitsLeavesNothingThatBreaksTheNextRun() async throws {
        try await withSyncHarness(serving: "1.2") { harness in
            try await harness.sync()
            harness.serve("1.4")
            let (entered, enteredContinuation) = AsyncStream<Void>.makeStream()
            let manager = try manager(harness) { _ in
                enteredContinuation.yield()
                try await Task.sleep(for: .seconds(600))
            }
            async let outcome: Result<SyncReport, SyncError> = { () async -> Result<SyncReport, SyncError> in
                do throws(SyncError) { return .success(try await manager.checkForUpdates()) } catch {
                    return .failure(error)
                }
            }()
            var iterator = entered.makeAsyncIterator()
            await iterator.next()
            await manager.suspend()
            guard case .failure(let error) = await outcome else {
                Issue.record("the update finished although its hook never returned")
                return
            }
            #expect(error.code == .cancelled, "\(error)")
            try harness.expectTree(is: "1.2")
            let status = try await SyncStatus.read(statePath: harness.state, contentDirectory: harness.content)
            #expect(status.version == "1.2" && status.runningUpdate == nil)

            let report = try await harness.sync()
            #expect(report.toVersion.text == "1.4")
            try harness.expectTree(is: "1.4")
        }
    }

    @Test func aVetoedRepairLeavesTheDamagedFolderAsItWas() async throws {
        try await withSyncHarness(serving: "1.2") { harness in
            try await harness.sync()
            try "damaged".write(toFile: harness.content + "/README.txt", atomically: true, encoding: .utf8)
            let before = try harness.tree()
            let vetoing = Recorder()
            await #expect {
                try await manager(harness, vetoing.hook(vetoingWith: NotToday())).verify(repair: true)
            } throws: { error in
                expectVeto(of: "1.2", error)
                return true
            }
            #expect(try harness.tree() == before)
            #expect(
                vetoing.switches.first?.kind == .repair && vetoing.trees.first == ExampleStorageFixture.manifest("1.2"))
            let repaired = try await harness.manager().verify(repair: true)
            #expect(repaired.matches)
            try harness.expectTree(is: "1.2")
        }
    }
}
