import Foundation
import Synchronization
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
            var work = PublishWorkFolder(storage: storage)
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

    /// The publish work folder swapped for a link to an outside folder of the same layout just
    /// after it was made: staging wrote the snapshot, the archive and the lists there. Now every
    /// staged file goes into the folder the publish made, the swap is found before anything is
    /// installed, and the error names the folder as the operator knows it.
    @Test func aWorkFolderSwappedForALinkWhileStagingGetsNothingWritten() async throws {
        try await withBaseStorage { setup, storage, scratch in
            let outside = scratch + "/outside"
            let made = ["stage/RXCacheConfig/HistoryOfVersions", "kept/RXCacheConfig/HistoryOfVersions"]
            for folder in made {
                try FileManager.default.createDirectory(
                    atPath: outside + "/" + folder, withIntermediateDirectories: true)
            }
            let work = storage + "/" + PublishPaths.workFolderName
            let status = try Data(contentsOf: URL(fileURLWithPath: storage + "/" + StorageLayout.statusPath))
            let hook = CheckpointHook { point in
                if point.phase == .staging, point.action == "snapshot the content folder" {
                    rename(work, scratch + "/moved")
                    symlink(outside, work)
                }
                return .proceed
            }
            let error = try #require(throws: PublishError.self) { try setup.publish(storage: storage, hook: hook) }
            #expect(error.code == .invalidStorage)
            #expect(error.message.contains(work), "names the folder: \(error.message)")
            #expect(!error.message.contains("/proc/self/fd"))
            // Exactly the folders made there: nothing staged in them, nothing deleted.
            let found = Set(
                FileManager.default.enumerator(atPath: outside)?.allObjects.compactMap { $0 as? String } ?? [])
            #expect(
                found
                    == [
                        "stage", "stage/RXCacheConfig", "stage/RXCacheConfig/HistoryOfVersions", "kept",
                        "kept/RXCacheConfig", "kept/RXCacheConfig/HistoryOfVersions",
                    ])
            #expect(try Data(contentsOf: URL(fileURLWithPath: storage + "/" + StorageLayout.statusPath)) == status)
            // Once the link is gone, the next publish goes through.
            unlink(work)
            #expect(try setup.publish(storage: storage).toVersion == v("1.1"))
        }
    }

    /// Recovery deleting an interrupted publish's work folder, which was swapped for a link to an
    /// outside folder just before: it emptied the outside folder. Now it deletes only in the
    /// folder it opened, and leaves what stands at the name.
    @Test func recoveryDeletesOnlyInTheWorkFolderItOpened() async throws {
        try await withBaseStorage { setup, storage, scratch in
            let outside = scratch + "/outside"
            try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
            try Data("mine".utf8).write(to: URL(fileURLWithPath: outside + "/keep.txt"))
            var planted = PublishWorkFolder(storage: storage)
            try planted.create()
            try planted.writeJournal(
                PublishJournal(phase: .staging, pid: 1, toVersion: "1.1", minimalVersion: "1.0"), durable: false)
            let work = storage + "/" + PublishPaths.workFolderName
            let hook = CheckpointHook { point in
                if point.phase == .recovery {
                    rename(work, scratch + "/moved")
                    symlink(outside, work)
                }
                return .proceed
            }
            #expect(throws: PublishError.self) { try setup.publish(storage: storage, hook: hook) }
            #expect(FileManager.default.fileExists(atPath: outside + "/keep.txt"))
            #expect(try FileManager.default.contentsOfDirectory(atPath: scratch + "/moved").isEmpty)
        }
    }
}

/// A neighbour who may only create names in a shared (sticky) storage folder plants a work
/// folder, a journal link, or a base folder of their own; or swaps `RXCacheConfig/` while the
/// leftovers of an older publisher are cleaned (an outside audit found each).
@Suite("A publish acts only on its own user's folders")
struct PublishOwnFolderTests {
    /// Another user's work folder with a forged journal: recovery installed their status and
    /// swapped their staged content in. Now it is refused before anything in it is read.
    @Test func anotherUsersWorkFolderIsRefusedAndNothingIsInstalled() async throws {
        try await withBaseStorage { setup, storage, _ in
            let status = try Data(contentsOf: URL(fileURLWithPath: storage + "/" + StorageLayout.statusPath))
            var planted = PublishWorkFolder(storage: storage)
            try planted.create()
            try Data("{\"forged\": true}".utf8).write(
                to: URL(fileURLWithPath: planted.root + "/kept/" + StorageLayout.statusPath))
            var journal = PublishJournal(phase: .installing, pid: 1, toVersion: "1.1", minimalVersion: "1.0")
            journal.statusSHA256 = String(repeating: "0", count: 64)
            journal.steps = [.init(path: StorageLayout.statusPath, existed: true)]
            try planted.writeJournal(journal, durable: false)
            let work = storage + "/" + PublishPaths.workFolderName
            #expect(chown(work, 65534, 65534) == 0)
            let error = try #require(throws: PublishError.self) { try setup.publish(storage: storage) }
            #expect(error.code == .invalidStorage)
            #expect(error.message.contains("belongs to another user (uid 65534)"), "\(error.message)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: storage + "/" + StorageLayout.statusPath)) == status)
            #expect(FileManager.default.fileExists(atPath: work + "/journal.json"), "theirs is left to them")
        }
    }

    /// A journal that is a symlink is not followed (it opened and parsed a root-only file).
    @Test func aJournalThatIsALinkIsNotFollowed() async throws {
        try await withBaseStorage { setup, storage, scratch in
            try Data("{\"format\": \"secret\"}".utf8).write(to: URL(fileURLWithPath: scratch + "/secret.json"))
            let work = storage + "/" + PublishPaths.workFolderName
            try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
            symlink(scratch + "/secret.json", work + "/journal.json")
            let error = try #require(throws: PublishError.self) { try setup.publish(storage: storage) }
            #expect(error.message.contains("journal.json: it is a symlink"), "\(error.message)")
            #expect(!error.message.contains("secret"), "nothing of the target shows: \(error.message)")
        }
    }

    /// `RXCacheConfig/` swapped for a link to an outside folder just before an older publisher's
    /// leftover in it is deleted: the outside folder's file of that name went.
    @Test func leftoversAreDeletedOnlyInTheStoragesOwnFolders() async throws {
        try await withBaseStorage { setup, storage, scratch in
            let config = storage + "/RXCacheConfig"
            let outside = scratch + "/outside"
            try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
            for folder in [config, outside] {
                try Data("{}".utf8).write(to: URL(fileURLWithPath: folder + "/cacheStatus.json.tmp"))
            }
            let hook = CheckpointHook { point in
                if point.action == "delete the leftover RXCacheConfig/cacheStatus.json.tmp" {
                    rename(config, scratch + "/config-moved")
                    symlink(outside, config)
                }
                return .proceed
            }
            _ = try? setup.publish(storage: storage, hook: hook)
            #expect(FileManager.default.fileExists(atPath: outside + "/cacheStatus.json.tmp"))
            #expect(!FileManager.default.fileExists(atPath: scratch + "/config-moved/cacheStatus.json.tmp"))
        }
    }

    /// A base folder another user made is not taken as the publisher's cache: it is made again.
    @Test func anotherUsersBaseFolderIsMadeAgain() async throws {
        try await withBaseStorage { setup, storage, _ in
            let base = PublishBase(storage: storage)
            #expect(FileManager.default.fileExists(atPath: base.retired), "the base storage's publish kept a tree")
            // Their retired tree, with a file of theirs in it for the next publish to take.
            try Data("theirs".utf8).write(to: URL(fileURLWithPath: base.retired + "/planted.txt"))
            #expect(chown(base.root, 65534, 65534) == 0)
            try setup.publish(storage: storage)
            #expect(FileSystem.status(of: base.root)?.st_uid == geteuid(), "made again, this user's")
            #expect(!FileManager.default.fileExists(atPath: storage + "/RXCacheContent/planted.txt"))
            #expect(!FileManager.default.fileExists(atPath: base.retired + "/planted.txt"))
        }
    }
}

/// The publisher's base folder flipped between itself and a link to an outside folder while it
/// is kept again and again: nothing outside is deleted or written (it was used by path after a
/// check).
@Suite("The publisher's base folder is used through the folder it opened")
struct PublishBaseNeighbourTests {
    @Test func aBaseFolderFlippedForALinkIsNeverWrittenThrough() async throws {
        try await withTemporaryDirectory { scratch in
            try await offPool {
                let storage = scratch + "/storage"
                let outside = scratch + "/outside"
                try FileManager.default.createDirectory(
                    atPath: outside + "/retired", withIntermediateDirectories: true)
                try FileManager.default.createDirectory(atPath: storage, withIntermediateDirectories: true)
                try Data("mine".utf8).write(to: URL(fileURLWithPath: outside + "/retired/victim.txt"))
                try Data("mine".utf8).write(to: URL(fileURLWithPath: outside + "/index"))
                let base = PublishBase(storage: storage)
                base.keep(previous: nil, index: PublishIndex())
                let stop = Mutex(false)
                let flipper = Thread {
                    let root = base.root
                    while !stop.withLock({ $0 }) {
                        guard rename(root, root + ".real") == 0 else { continue }
                        symlink(outside, root)
                        unlink(root)
                        rename(root + ".real", root)
                    }
                }
                flipper.start()
                for round in 0..<3_000 {
                    try FileManager.default.createDirectory(
                        atPath: scratch + "/previous-\(round)", withIntermediateDirectories: true)
                    base.keep(previous: scratch + "/previous-\(round)", index: PublishIndex())
                    _ = base.loadIndex()
                }
                stop.withLock { $0 = true }
                while flipper.isExecuting { usleep(1_000) }
                #expect(FileManager.default.fileExists(atPath: outside + "/retired/victim.txt"))
                #expect(try Data(contentsOf: URL(fileURLWithPath: outside + "/index")) == Data("mine".utf8))
                #expect(!FileManager.default.fileExists(atPath: outside + "/.gitignore"))
            }
        }
    }
}

/// ``HeldFolder``: the folder it opened, wherever its name goes.
@Suite("A held folder")
struct HeldFolderTests {
    @Test func itWorksInTheFolderItOpenedAndNamesItAsTheCallerDid() async throws {
        try await withTemporaryDirectory { scratch in
            try FileManager.default.createDirectory(atPath: scratch + "/work", withIntermediateDirectories: true)
            let held = try #require(try HeldFolder(opening: "work", in: scratch))
            #expect(held.path.hasPrefix("/proc/self/fd/"))
            #expect(held.shown("cannot write \(held.path)/a/b: denied") == "cannot write \(scratch)/work/a/b: denied")
            let other = "/proc/self/fd/\(held.descriptor)0/x"
            #expect(held.shown(other) == other, "another descriptor's name is left")
            #expect(held.shown("/proc/self/fd/\(held.descriptor)") == scratch + "/work")
            #expect(held.isStillInPlace)
            rename(scratch + "/work", scratch + "/moved")
            symlink(scratch + "/elsewhere", scratch + "/work")
            try Data("x".utf8).write(to: URL(fileURLWithPath: held.path + "/file"))
            #expect(FileManager.default.fileExists(atPath: scratch + "/moved/file"))
            #expect(!held.isStillInPlace)
            #expect(try held.removeName() == false)
            #expect(FileManager.default.fileExists(atPath: scratch + "/moved"))
        }
    }

    @Test func aLinkOrAFileAtTheNameIsRefusedAndNothingIsNil() async throws {
        try await withTemporaryDirectory { scratch in
            try FileManager.default.createDirectory(atPath: scratch + "/real", withIntermediateDirectories: true)
            symlink(scratch + "/real", scratch + "/link")
            try Data("x".utf8).write(to: URL(fileURLWithPath: scratch + "/file"))
            #expect(throws: FileSystemError.self) { try HeldFolder(opening: "link", in: scratch) }
            #expect(throws: FileSystemError.self) { try HeldFolder(opening: "file", in: scratch) }
            #expect(try HeldFolder(opening: "missing", in: scratch) == nil)
            let held = try #require(try HeldFolder(opening: "real", in: scratch))
            #expect(try held.removeName())
            #expect(!FileManager.default.fileExists(atPath: scratch + "/real"))
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
