import Foundation
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// A storage at 1.0 in a scratch folder, with the publish of 1.1 set up (signed with
/// ``SigningTests/key`` when `signed`, the base itself unsigned), off the cooperative pool.
private func withBaseStorage(
    signed: Bool = false,
    _ body: @escaping @Sendable (_ setup: InterruptedPublish, _ storage: String, _ scratch: String) throws -> Void
) async throws {
    try await withTemporaryDirectory { scratch in
        try await offPool {
            var setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let storage = scratch + "/storage"
            try setup.makeBase(at: storage)
            if signed { setup.signingKey = SigningTests.key.rawRepresentation.base64EncodedString() }
            try body(setup, storage, scratch)
        }
    }
}

/// A neighbour who may write the storage (a shared disk) plants a publish journal, or swaps one
/// of the storage's folders for a link while a publish runs: nothing outside the storage is
/// deleted or written (outside audits found both).
@Suite("A publish never acts outside its storage for a neighbour")
struct PublishNeighbourTests {
    /// A journal naming a step or a created folder outside the storage is refused, and recovery
    /// touches nothing: it deleted `../victim.txt` and removed `../out/emptydir`.
    @Test(arguments: [
        ("../victim.txt", "RXCacheConfig"), ("RXCacheConfig/HistoryOfVersions/../../../victim.txt", "RXCacheConfig"),
        ("RXCacheContent.zip", "../out/emptydir"), ("RXCacheConfig/cacheStatus.json", "RXCacheContent/../../out"),
    ])
    func aForgedJournalIsRefusedAndTouchesNothingOutside(step: String, folder: String) async throws {
        try await withBaseStorage { setup, storage, scratch in
            try Data("mine".utf8).write(to: URL(fileURLWithPath: scratch + "/victim.txt"))
            try FileManager.default.createDirectory(
                atPath: scratch + "/out/emptydir", withIntermediateDirectories: true)
            let work = PublishWorkFolder(storage: storage)
            try work.create()
            var journal = PublishJournal(phase: .installing, pid: 1, toVersion: "1.1", minimalVersion: "1.0")
            journal.statusSHA256 = String(repeating: "0", count: 64)
            journal.createdFolders = [folder]
            journal.steps = [.init(path: step, existed: false)]
            try work.writeJournal(journal, durable: false)
            #expect(throws: PublishError.self) { try setup.publish(storage: storage) }
            #expect(FileManager.default.fileExists(atPath: scratch + "/victim.txt"))
            #expect(FileManager.default.fileExists(atPath: scratch + "/out/emptydir"))
        }
    }

    /// The history folder swapped for a link to an outside folder just before the change list
    /// is put in place: the change list goes nowhere outside (it went through the link).
    @Test func aFolderSwappedForALinkWhilePublishingIsNeverWrittenThrough() async throws {
        try await withBaseStorage { setup, storage, scratch in
            let outside = scratch + "/outside"
            try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
            let history = storage + "/RXCacheConfig/HistoryOfVersions"
            let hook = CheckpointHook { point in
                if point.phase == .install,
                    FileSystem.status(of: history).map({ $0.st_mode & S_IFMT != S_IFLNK }) ?? true
                {
                    // Swapped before each install step: every step meets the link.
                    rename(history, history + ".real")
                    symlink(outside, history)
                }
                return .proceed
            }
            _ = try? setup.publish(storage: storage, hook: hook)
            #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
        }
    }
}

/// A list the current status vouches for, changed in the storage, is not vouched for again.
@Suite("A publish never vouches for a list someone changed")
struct PublishedListTamperTests {
    @Test(arguments: [
        ("RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json", false),
        ("RXCacheConfig/listOfURLsToUpdatesByVersion.json", false),
        ("RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json", true),
    ])
    func aChangedListIsRefusedAndTheStatusStays(list: String, deleted: Bool) async throws {
        try await withBaseStorage { setup, storage, _ in
            try setup.publish(storage: storage)
            let path = storage + "/" + list
            var bytes = try Data(contentsOf: URL(fileURLWithPath: path))
            bytes.append(contentsOf: Array(" ".utf8))
            if deleted { unlink(path) } else { try bytes.write(to: URL(fileURLWithPath: path)) }
            let status = try Data(contentsOf: URL(fileURLWithPath: storage + "/RXCacheConfig/cacheStatus.json"))
            #expect {
                try setup.publish(storage: storage, version: "1.2")
            } throws: { error in
                (error as? PublishError)?.code == .invalidStorage
                    && (error as? PublishError)?.message.contains("put back the published copy") == true
            }
            #expect(
                try Data(contentsOf: URL(fileURLWithPath: storage + "/RXCacheConfig/cacheStatus.json")) == status)
            // Put back, the publish goes on.
            bytes.removeLast()
            try bytes.write(to: URL(fileURLWithPath: path))
            #expect(try setup.publish(storage: storage, version: "1.2").toVersion == v("1.2"))
        }
    }
}

/// A status that carries the signing key's signature and no longer verifies with it (a list
/// edited and the integrity block too) is not signed again over the edit.
@Suite("A publish never signs over a status changed after it was signed")
struct PublishOwnSignatureTests {
    /// The report tells a front end whether the previous status was verified with the key: not
    /// over an unsigned one (its lists taken as they are), and so over one the key signed.
    @Test func theReportSaysWhetherThePreviousStatusWasVerified() async throws {
        try await withBaseStorage(signed: true) { setup, storage, _ in
            let overUnsigned = try setup.publish(storage: storage)
            #expect(overUnsigned.previousStatusVerified == false)
            let overSigned = try setup.publish(storage: storage, version: "1.2")
            #expect(overSigned.previousStatusVerified == true)
        }
    }

    @Test func anEditedSignedStatusIsRefused() async throws {
        try await withBaseStorage(signed: true) { setup, storage, _ in
            try setup.publish(storage: storage)
            // The neighbour's edit: a list changed, and its hash in the status to match.
            let list = storage + "/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json"
            let old = try ContentTree.fingerprint(of: list)
            var bytes = try Data(contentsOf: URL(fileURLWithPath: list))
            bytes.append(contentsOf: Array(" ".utf8))
            try bytes.write(to: URL(fileURLWithPath: list))
            let new = try ContentTree.fingerprint(of: list)
            let statusPath = storage + "/RXCacheConfig/cacheStatus.json"
            let status = try String(contentsOfFile: statusPath, encoding: .utf8)
                .replacingOccurrences(of: old.sha256, with: new.sha256)
                .replacingOccurrences(of: "\"size\":\(old.size)", with: "\"size\":\(new.size)")
            try status.write(toFile: statusPath, atomically: true, encoding: .utf8)
            #expect {
                try setup.publish(storage: storage, version: "1.2")
            } throws: { error in
                (error as? PublishError)?.code == .invalidStorage
                    && (error as? PublishError)?.message.contains("changed after it was signed") == true
            }
            #expect(try String(contentsOfFile: statusPath, encoding: .utf8) == status)
        }
    }
}
