import Foundation
import StorageServer
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// `kill -9` of a publish, simulated in-process: a checkpoint hook stops the publish just before
/// one of its changes on disk and nothing runs after it (no rollback, no cleanup), which is all
/// a kill leaves, since a publish keeps no state but the disk. Every checkpoint of a clean run is
/// tried. The limit detects hangs: the every-checkpoint test took 212 s in a clean clone's
/// `make test` on 2 cores, and ran past 5 minutes on a load of 7.
@Suite("A publish killed or failing anywhere is completed or rolled back by the next run", .timeLimit(.minutes(10)))
struct PublishInterruptionTests {
    /// The checkpoints of a clean run of `setup`'s publish over a fresh base.
    func cleanCheckpoints(_ setup: InterruptedPublish, storage: String) throws -> [PublishCheckpoint] {
        try setup.makeBase(at: storage)
        let recorder = CheckpointHook()
        try setup.publish(storage: storage, hook: recorder)
        return recorder.checkpoints
    }

    /// A clean publish of `version` over a fresh base: what every interrupted run must end as.
    func reference(_ setup: InterruptedPublish, version: String? = nil, at storage: String) throws -> TreeSnapshot {
        try setup.makeBase(at: storage)
        try setup.publish(storage: storage, version: version)
        return try storageSnapshot(storage)
    }

    /// Checks the storage as a client would see it right after a kill: its status is the old
    /// one or the new one; with the new one, everything else is the new version; with the old
    /// one, every file is one version's or the other's and `RXCacheContent/` is one of them whole.
    func expectConsistent(_ storage: String, base: TreeSnapshot, new: TreeSnapshot, _ context: String) throws {
        let visible = withoutWorkFolder(try storageSnapshot(storage))
        let status = StorageLayout.statusPath
        if !new.files.isEmpty, visible.files[status] == new.files[status] {
            #expect(
                visible == new,
                "\(context): the new status is visible but the storage is not the new version: \(visible.difference(from: new))"
            )
            return
        }
        #expect(visible.files[status] == base.files[status], "\(context): the status is neither version's")
        for (path, hash) in visible.files where !path.hasPrefix("RXCacheContent/") {
            #expect(hash == base.files[path] || hash == new.files[path], "\(context): \(path) is neither version's")
        }
        func content(_ tree: TreeSnapshot) -> TreeSnapshot {
            TreeSnapshot(
                folders: tree.folders.filter { $0.hasPrefix("RXCacheContent/") },
                files: tree.files.filter { $0.key.hasPrefix("RXCacheContent/") })
        }
        #expect(
            content(visible) == content(base) || content(visible) == content(new),
            "\(context): RXCacheContent/ is a mix")
    }

    /// The state right after recovery: a run stopped at its first staging checkpoint (or one
    /// that finds the version already published) has only recovered.
    func stateAfterRecovery(_ setup: InterruptedPublish, storage: String, version: String? = nil) throws -> (
        PublishReport?, TreeSnapshot
    ) {
        let hook = CheckpointHook { $0.phase == .staging ? .kill : .proceed }
        var report: PublishReport?
        do {
            report = try setup.publish(storage: storage, version: version, hook: hook)
        } catch let error as PublishError {
            #expect(error.code == .interrupted, "\(error)")
        }
        return (report, try storageSnapshot(storage))
    }

    @Test func aPublishKilledAtEveryCheckpointIsCompletedByRunningTheSameCommandAgain() async throws {
        try await withTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            // Publishing blocks: off the cooperative pool, which the servers of other tests need.
            let (points, new, base) = try await offPool { [self] in
                let points = try cleanCheckpoints(setup, storage: scratch + "/count")
                let new = try reference(setup, at: scratch + "/reference")
                try setup.makeBase(at: scratch + "/base")
                return (points, new, try storageSnapshot(scratch + "/base"))
            }
            // 5 staging, 10 install (a new change list, then keep + replace for 3 files, the swap, keep + replace the
            // status), 2 cleanup (keep the replaced version and the index, delete the work folder).
            #expect(
                points.count == 17 && points.filter { $0.phase == .install }.count == 10
                    && points.last?.phase == .cleanup, "\(points)")
            var rolledBack = 0
            try await withStorageServer(root: URL(fileURLWithPath: scratch + "/base")) { server in
                for point in points {
                    let storage = scratch + "/storage-\(point.index)"
                    let report = try await offPool { [self] in
                        try setup.makeBase(at: storage)
                        #expect(throws: PublishError.self) {
                            try setup.publish(storage: storage, hook: CheckpointHook(stopAt: point.index))
                        }
                        try expectConsistent(storage, base: base, new: new, "killed at \(point)")
                        let report = try setup.publish(storage: storage)
                        try expectStorage(storage, is: new, "killed at \(point), then run again")
                        return report
                    }
                    #expect(report.alreadyPublished == (point.phase == .cleanup))
                    #expect(!FileManager.default.fileExists(atPath: storage + "/" + PublishPaths.workFolderName))
                    let expected: PublishRecovery? =
                        switch point.phase {
                        case .staging: point.index == 0 ? nil : .discarded(version: v("1.1"))
                        case .install: .rolledBack(version: v("1.1"), restored: v("1.0"))
                        case .cleanup: .finished(version: v("1.1"), from: v("1.0"))
                        case .recovery: nil
                        }
                    #expect(report.recovery == expected, "killed at \(point)")
                    if point.phase == .install { rolledBack += 1 }

                    // A client at 1.0 replays the published change list to exactly 1.1; a new client restores it.
                    try await expectClients(
                        server: server, base: scratch + "/base", storage: storage,
                        scratch: scratch + "/clients-\(point.index)",
                        version: "1.1", context: "killed at \(point)")
                    try FileManager.default.removeItem(atPath: storage)
                }
            }
            #expect(rolledBack >= 8)
        }
    }

    /// The storage is byte-identical to `expected`.
    func expectStorage(
        _ storage: String, is expected: TreeSnapshot, _ context: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let actual = try storageSnapshot(storage)
        #expect(actual == expected, "\(context): \(actual.difference(from: expected))", sourceLocation: sourceLocation)
    }

    /// A client at the base version replays to `version`; a fresh client restores it.
    func expectClients(
        server: StorageServer, base: String, storage: String, scratch: String, version: String, context: String
    ) async throws {
        func configuration(_ name: String) -> SyncConfiguration {
            SyncConfiguration(
                baseURL: server.baseURL!, contentDirectory: scratch + "/\(name)/content",
                stateDatabasePath: scratch + "/\(name)/state.sqlite")
        }
        try FileManager.default.createDirectory(atPath: scratch + "/replay", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: scratch + "/fresh", withIntermediateDirectories: true)
        server.setRoot(URL(fileURLWithPath: base))
        _ = try await CacheManager(configuration: configuration("replay")).checkForUpdates()
        server.setRoot(URL(fileURLWithPath: storage))
        let replay = try await CacheManager(configuration: configuration("replay")).checkForUpdates()
        #expect(replay.outcome == .replayed, "\(context)")
        #expect(
            try TreeSnapshot.read(scratch + "/replay/content") == ExampleStorageFixture.manifest(version),
            "\(context): replay")
        _ = try await CacheManager(configuration: configuration("fresh")).checkForUpdates()
        #expect(
            try TreeSnapshot.read(scratch + "/fresh/content") == ExampleStorageFixture.manifest(version),
            "\(context): restore")
        try FileManager.default.removeItem(atPath: scratch)
    }

    @Test func recoveryPutsBackExactlyThePreviousVersionOrFinishesTheNewOne() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let points = try cleanCheckpoints(setup, storage: scratch + "/count")
            let new = try reference(setup, at: scratch + "/reference")
            try setup.makeBase(at: scratch + "/base")
            let base = try storageSnapshot(scratch + "/base")
            for point in points {
                let storage = scratch + "/storage"
                try setup.makeBase(at: storage)
                _ = try? setup.publish(storage: storage, hook: CheckpointHook(stopAt: point.index))
                let (early, recovered) = try stateAfterRecovery(setup, storage: storage)
                if point.phase == .cleanup {
                    #expect(
                        early?.alreadyPublished == true
                            && early?.recovery == .finished(version: v("1.1"), from: v("1.0")))
                    #expect(recovered == new, "killed at \(point): \(recovered.difference(from: new))")
                } else {
                    #expect(early == nil, "killed at \(point)")
                    #expect(recovered == base, "killed at \(point), recovered: \(recovered.difference(from: base))")
                }
                try FileManager.default.removeItem(atPath: storage)
            }
        }
    }

    @Test func aRunKilledWhileRecoveringIsRecoveredByTheNextOne() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let points = try cleanCheckpoints(setup, storage: scratch + "/count")
            let new = try reference(setup, at: scratch + "/reference")
            var killsInRecovery = 0
            for point in points where point.phase == .install || point.phase == .cleanup {
                // Count the recovery's own checkpoints after this kill, then kill it at each.
                // The killed state is made again for each second kill: a copy of it would give the
                // staged content folder another inode than the journal names.
                let storage = scratch + "/storage"
                func killed() throws {
                    try setup.makeBase(at: storage)
                    _ = try? setup.publish(storage: storage, hook: CheckpointHook(stopAt: point.index))
                }
                try killed()
                let recorder = CheckpointHook()
                try setup.publish(storage: storage, hook: recorder)
                let recoveryPoints = recorder.checkpoints.filter { $0.phase == .recovery }
                #expect(!recoveryPoints.isEmpty, "\(point)")
                for second in recoveryPoints {
                    try killed()
                    #expect(throws: PublishError.self) {
                        try setup.publish(storage: storage, hook: CheckpointHook(stopAt: second.index))
                    }
                    killsInRecovery += 1
                    try setup.publish(storage: storage)
                    try expectStorage(storage, is: new, "killed at \(point), then in recovery at \(second)")
                }
                try FileManager.default.removeItem(atPath: storage)
            }
            #expect(killsInRecovery >= 10)
        }
    }

    @Test func aFailureAtAnyCheckpointBeforeTheCommitLeavesThePreviousVersionExactly() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let points = try cleanCheckpoints(setup, storage: scratch + "/count")
            let new = try reference(setup, at: scratch + "/reference")
            try setup.makeBase(at: scratch + "/base")
            let base = try storageSnapshot(scratch + "/base")
            for point in points {
                let storage = scratch + "/storage"
                try setup.makeBase(at: storage)
                #expect {
                    try setup.publish(storage: storage, hook: CheckpointHook(stopAt: point.index, .fail))
                } throws: { error in
                    let message = "\(error)"
                    return message.contains("simulated I/O error")
                        && (point.phase != .install || message.contains("rolled back, the storage is 1.0 again"))
                        && (point.phase != .cleanup || message.contains("published 1.1, but"))
                }
                if point.phase == .cleanup {
                    // Committed: the next run only deletes the work folder.
                    #expect(withoutWorkFolder(try storageSnapshot(storage)) == new)
                    let report = try setup.publish(storage: storage)
                    #expect(report.alreadyPublished && report.recovery == .finished(version: v("1.1"), from: v("1.0")))
                    #expect(try storageSnapshot(storage) == new)
                } else {
                    try expectStorage(storage, is: base, "failed at \(point)")
                }
                try FileManager.default.removeItem(atPath: storage)
            }
        }
    }

    @Test func aRollbackThatFailsIsFinishedByTheNextRun() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let points = try cleanCheckpoints(setup, storage: scratch + "/count")
            let new = try reference(setup, at: scratch + "/reference")
            try setup.makeBase(at: scratch + "/base")
            let base = try storageSnapshot(scratch + "/base")
            var failedRollbacks = 0
            for point in points where point.phase == .install {
                // Fail at this install step, then again at each step of the in-process rollback.
                for undo in 0..<8 {
                    let storage = scratch + "/storage"
                    try setup.makeBase(at: storage)
                    let hook = CheckpointHook { checkpoint in
                        checkpoint.index == point.index || checkpoint.index == point.index + 1 + undo ? .fail : .proceed
                    }
                    var message = ""
                    do { try setup.publish(storage: storage, hook: hook) } catch { message = "\(error)" }
                    let rolledBackPartly =
                        message.contains("rolling back failed too") && message.contains("run the same publish again")
                    #expect(rolledBackPartly || message.contains("rolled back, the storage is 1.0 again"), "\(message)")
                    if rolledBackPartly {
                        failedRollbacks += 1
                        #expect(FileManager.default.fileExists(atPath: storage + "/.content-sync-publish/journal.json"))
                    } else {
                        try expectStorage(storage, is: base, "failed at \(point), rollback step \(undo) not reached")
                    }
                    let report = try setup.publish(storage: storage)
                    #expect(!rolledBackPartly || report.recovery == .rolledBack(version: v("1.1"), restored: v("1.0")))
                    try expectStorage(
                        storage, is: new, "failed at \(point), then its rollback at step \(undo), then run again")
                    try FileManager.default.removeItem(atPath: storage)
                }
            }
            #expect(failedRollbacks >= 8)
        }
    }

    @Test func aDifferentPublishAfterAnInterruptedOneRollsItBackAndPublishesFromThePreviousVersion() async throws {
        try await withTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            // Publishing blocks: off the cooperative pool, which the servers of other tests need.
            let (points, direct) = try await offPool { [self] in
                let points = try cleanCheckpoints(setup, storage: scratch + "/count")
                let direct = try reference(setup, version: "1.2", at: scratch + "/reference-1.2")
                try setup.makeBase(at: scratch + "/base")
                return (points, direct)
            }
            try await withStorageServer(root: URL(fileURLWithPath: scratch)) { server in
                for point in points where point.phase == .install {
                    let storage = scratch + "/storage-\(point.index)"
                    let report = try await offPool { [self] in
                        try setup.makeBase(at: storage)
                        _ = try? setup.publish(storage: storage, hook: CheckpointHook(stopAt: point.index))
                        let report = try setup.publish(storage: storage, version: "1.2")
                        // Byte-identical to publishing 1.2 straight over 1.0: no trace of 1.1 in the lists or the status.
                        try expectStorage(storage, is: direct, "killed 1.1 at \(point), then published 1.2")
                        return report
                    }
                    #expect(report.recovery == .rolledBack(version: v("1.1"), restored: v("1.0")), "\(point)")
                    #expect(
                        report.fromVersion == v("1.0")
                            && report.changeListPath == "RXCacheConfig/HistoryOfVersions/changes_1.0_1.2.json")
                    let status = try String(contentsOfFile: storage + "/" + StorageLayout.statusPath, encoding: .utf8)
                    #expect(!status.contains("changes_1.0_1.1"))
                    try await expectClients(
                        server: server, base: scratch + "/base", storage: storage, scratch: scratch + "/clients",
                        version: "1.2", context: "1.1 killed at \(point), then 1.2")
                    try FileManager.default.removeItem(atPath: storage)
                }
            }
        }
    }

    @Test func anInterruptedInitIsCompletedOrLeavesAnEmptyFolder() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            var setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.0")
            setup.initialize = true
            let points = try cleanCheckpoints(setup, storage: scratch + "/count")
            #expect(points.contains { $0.action.contains("create RXCacheConfig/") } && points.count == 14, "\(points)")
            let new = try reference(setup, at: scratch + "/reference")
            let empty = TreeSnapshot(folders: [], files: [:])
            for point in points {
                let storage = scratch + "/storage"
                try setup.makeBase(at: storage)
                #expect(throws: PublishError.self) {
                    try setup.publish(storage: storage, hook: CheckpointHook(stopAt: point.index))
                }
                let (early, recovered) = try stateAfterRecovery(setup, storage: storage)
                #expect(
                    recovered == (early?.alreadyPublished == true ? new : empty), "killed at \(point): \(recovered)")
                try setup.publish(storage: storage)
                try expectStorage(storage, is: new, "killed at \(point)")
                try FileManager.default.removeItem(atPath: storage)
            }
        }
    }

    @Test func theTwoRenameSwapWithoutRenameExchangeIsRolledBackAndCompletedToo() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            var setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            setup.exchangeUnsupported = true
            let points = try cleanCheckpoints(setup, storage: scratch + "/count")
            #expect(points.contains { $0.action.contains("move the new RXCacheContent/ into place") })
            let new = try reference(setup, at: scratch + "/reference")
            try setup.makeBase(at: scratch + "/base")
            let base = try storageSnapshot(scratch + "/base")
            for point in points {
                let storage = scratch + "/storage"
                try setup.makeBase(at: storage)
                _ = try? setup.publish(storage: storage, hook: CheckpointHook(stopAt: point.index))
                let (early, recovered) = try stateAfterRecovery(setup, storage: storage)
                #expect(recovered == (early?.alreadyPublished == true ? new : base), "killed at \(point)")
                try setup.publish(storage: storage)
                #expect(try storageSnapshot(storage) == new, "killed at \(point)")
                try FileManager.default.removeItem(atPath: storage)
            }
        }
    }

    @Test func aSignedPublishKilledAnywhereEndsAsACleanSignedPublish() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            var setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            setup.signingKey = SigningTests.key.rawRepresentation.base64EncodedString()
            let points = try cleanCheckpoints(setup, storage: scratch + "/count")
            let new = try reference(setup, at: scratch + "/reference")
            for point in points {
                let storage = scratch + "/storage"
                try setup.makeBase(at: storage)
                _ = try? setup.publish(storage: storage, hook: CheckpointHook(stopAt: point.index))
                try setup.publish(storage: storage)
                #expect(try storageSnapshot(storage) == new, "killed at \(point)")
                let status = try JSONValue.parse(
                    Data(contentsOf: URL(fileURLWithPath: storage + "/" + StorageLayout.statusPath)))
                #expect(throws: Never.self) {
                    try StatusSignature.verify(
                        status, trustedKeys: [SigningTests.key.publicKey], now: Date(), name: "status")
                }
                try FileManager.default.removeItem(atPath: storage)
            }
        }
    }

    @Test func editingTheContentFolderDuringAPublishCannotMakeTheArchiveManifestAndListsDisagree() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let new = try reference(setup, at: scratch + "/reference")
            let storage = scratch + "/storage"
            try setup.makeBase(at: storage)
            let content = try setup.content("1.1")
            // Once the snapshot is taken, the publisher's own folder changes under it.
            let hook = CheckpointHook { point in
                if point.action == "build the archive" {
                    try? "edited mid-publish".write(toFile: content + "/README.txt", atomically: false, encoding: .utf8)
                    try? "new mid-publish".write(toFile: content + "/late.txt", atomically: false, encoding: .utf8)
                }
                return .proceed
            }
            try setup.publish(storage: storage, hook: hook)
            try expectStorage(storage, is: new, "the published version is the snapshot")
            let status =
                try JSONSerialization.jsonObject(
                    with: Data(contentsOf: URL(fileURLWithPath: storage + "/" + StorageLayout.statusPath)))
                as! [String: Any]
            let integrity = status["integrity"] as! [String: Any]
            #expect(
                integrity["treeDigest"] as? String
                    == TreeDigest.digest(of: try ContentTree.scan(storage + "/RXCacheContent")))
        }
    }
}
