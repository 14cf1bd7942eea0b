import Foundation
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// One publish per storage, layouts that would corrupt it, and storages an interrupted or older
/// publish left in a state that must not be built on.
@Suite("publish refuses what would leave a storage that is not a valid version", .timeLimit(.minutes(3)))
struct PublishSafetyTests {
    @Test func aSecondPublishOfTheSameStorageFailsAtOnceNamingTheProcessThatHoldsIt() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let storage = scratch + "/storage"
            try setup.makeBase(at: storage)
            let before = try storageSnapshot(storage)
            // flock belongs to the open file description: a second descriptor in this process conflicts.
            var held: PublishLock? = try PublishLock(storage: storage)
            #expect {
                try PublishLock(storage: storage)
            } throws: { error in
                (error as! PublishError).code == .busy && "\(error)".contains("process \(getpid())")
            }
            try FileManager.default.createSymbolicLink(atPath: scratch + "/alias", withDestinationPath: storage)
            for (path, dryRun) in [(storage, false), (scratch + "/alias", false), (storage, true)] {
                var options = try setup.options(storage: path)
                options.dryRun = dryRun
                #expect {
                    try Publisher.publish(options)
                } throws: { error in
                    (error as! PublishError).code == .busy && "\(error)".hasPrefix("another publish of /")
                        && "\(error)".hasSuffix(" is running (process \(getpid())); wait for it to finish, or stop it")
                }
            }
            #expect(try storageSnapshot(storage) == before, "the refused publishes wrote nothing")
            #expect(held != nil)
            held = nil
            try setup.publish(storage: storage)
            #expect(
                try String(contentsOfFile: storage + "/" + StorageLayout.statusPath, encoding: .utf8).contains(
                    "\"1.1\""))
        }
    }

    @Test func theLockIsHeldFromRecoveryToTheCommit() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let storage = scratch + "/storage"
            try setup.makeBase(at: storage)
            let second = try setup.options(storage: storage, version: "1.2")
            // At every checkpoint of the first publish, a second one is refused.
            let hook = CheckpointHook { _ in
                do {
                    _ = try Publisher.publish(second)
                    return .fail
                } catch {
                    return "\(error)".contains("another publish of") ? .proceed : .fail
                }
            }
            try setup.publish(storage: storage, hook: hook)
            #expect(hook.checkpoints.count > 10)
            #expect(
                try String(contentsOfFile: storage + "/" + StorageLayout.statusPath, encoding: .utf8).contains(
                    "\"1.1\""))
        }
    }

    @Test(arguments: [
        ("storage", "the storage itself"),
        ("storage/RXCacheContent", "the storage's own RXCacheContent/"),
        ("storage/RXCacheContent/docs", "inside the storage's own RXCacheContent/"),
        ("storage/.content-sync-publish", "the storage's publish work folder"),
        ("storage/sources", "inside the storage"),
        ("alias/sources", "inside the storage"),
    ])
    func aContentFolderInsideTheStorageIsRefused(content: String, words: String) async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let storage = scratch + "/storage"
            try setup.makeBase(at: storage)
            try FileManager.default.createSymbolicLink(atPath: scratch + "/alias", withDestinationPath: storage)
            let folder = scratch + "/" + content
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let before = try storageSnapshot(storage)
            var options = try setup.options(storage: storage)
            options.content = folder
            #expect {
                try Publisher.publish(options)
            } throws: { error in
                (error as! PublishError).code == .configuration && "\(error)".contains("is \(words)")
                    && "\(error)".contains("outside the storage")
            }
            #expect(try storageSnapshot(storage) == before)
        }
    }

    @Test func aStorageInsideTheContentFolderIsRefused() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let content = try setup.content("1.1")
            try FileManager.default.createSymbolicLink(atPath: scratch + "/link", withDestinationPath: content)
            for storage in [content + "/store", scratch + "/link/store"] {
                var options = try setup.options(storage: storage)
                options.initialize = true
                #expect {
                    try Publisher.publish(options)
                } throws: { error in
                    (error as! PublishError).code == .configuration
                        && "\(error)".contains("is inside the content folder")
                        && (error as! PublishError).option == .storage
                }
                #expect(!FileManager.default.fileExists(atPath: content + "/store"), "nothing created")
            }
        }
    }

    @Test func aDryRunRefusesAnInterruptedInstallAndIgnoresAnInterruptedStaging() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let storage = scratch + "/storage"
            try setup.makeBase(at: storage)
            let recorder = CheckpointHook()
            try setup.makeBase(at: scratch + "/count")
            try setup.publish(storage: scratch + "/count", hook: recorder)
            let firstInstall = try #require(recorder.checkpoints.first { $0.phase == .install })
            let archiveStep = try #require(recorder.checkpoints.first { $0.action == "build the archive" })
            let archiveInPlace = try #require(
                recorder.checkpoints.first { $0.action.hasPrefix("put RXCacheContent.zip") })
            // Killed while staging, nothing is visible; killed once installing, the storage may be neither version.
            for (point, refused) in [(archiveStep, false), (firstInstall, true), (archiveInPlace, true)] {
                try setup.makeBase(at: storage)
                _ = try? setup.publish(storage: storage, hook: CheckpointHook(stopAt: point.index))
                let killed = try storageSnapshot(storage)
                var options = try setup.options(storage: storage)
                options.dryRun = true
                if refused {
                    #expect {
                        try Publisher.publish(options)
                    } throws: { error in
                        "\(error)".contains("was interrupted while installing")
                            && "\(error)".contains("run the publish for real")
                            && (error as! PublishError).option == .dryRun
                    }
                } else {
                    let report = try Publisher.publish(options)
                    #expect(!report.changes.isEmpty && report.fromVersion == v("1.0") && report.recovery == nil)
                }
                #expect(try storageSnapshot(storage) == killed, "a dry run writes nothing")
            }
        }
    }

    @Test func whatAnOlderSyncAgentsInterruptedPublishLeftIsDeletedAndReported() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let storage = scratch + "/storage"
            try setup.makeBase(at: storage)
            try setup.makeBase(at: scratch + "/reference")
            try setup.publish(storage: scratch + "/reference")
            let leftovers = [
                ".RXCacheContent.incoming/a.txt", "RXCacheContent.zip.tmp", "RXCacheConfig/cacheStatus.json.tmp",
                "RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json.tmp",
            ]
            for path in leftovers {
                try FileManager.default.createDirectory(
                    atPath: ((storage + "/" + path) as NSString).deletingLastPathComponent,
                    withIntermediateDirectories: true)
                try "partial".write(toFile: storage + "/" + path, atomically: false, encoding: .utf8)
            }
            let report = try setup.publish(storage: storage)
            #expect(
                report.removedLeftovers.sorted() == [
                    ".RXCacheContent.incoming", "RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json.tmp",
                    "RXCacheConfig/cacheStatus.json.tmp", "RXCacheContent.zip.tmp",
                ])
            #expect(try storageSnapshot(storage) == storageSnapshot(scratch + "/reference"))
        }
    }

    /// What the previous publisher left when killed after swapping the content in (defect 5):
    /// 1.1's content under 1.0's status. Diffing it would publish an empty change list.
    /// Publishes 1.1 over a storage at 1.0 that `damage` changed first (given the storage's path
    /// and the fixture), with `adjust`'s options: the publish must be refused with an error that
    /// `matches`, and with `unchanged` the storage must be byte for byte what the damage left.
    func expectRefused(
        in scratch: String, unchanged: Bool = true,
        damage: (_ storage: String, _ setup: InterruptedPublish) throws -> Void = { _, _ in },
        adjusting adjust: (inout PublishOptions) -> Void = { _ in },
        sourceLocation: SourceLocation = #_sourceLocation, _ matches: @escaping (any Error) -> Bool
    ) throws {
        let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
        let storage = scratch + "/storage"
        try setup.makeBase(at: storage)
        try damage(storage, setup)
        let before = unchanged ? try storageSnapshot(storage) : nil
        var options = try setup.options(storage: storage)
        adjust(&options)
        #expect(sourceLocation: sourceLocation) {
            try Publisher.publish(options)
        } throws: { error in
            matches(error)
        }
        if let before { #expect(try storageSnapshot(storage) == before, sourceLocation: sourceLocation) }
    }

    @Test func contentThatDoesNotMatchTheStatusTreeDigestIsNotBuiltOn() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            try expectRefused(in: scratch) { storage, setup in
                try FileManager.default.removeItem(atPath: storage + "/RXCacheContent")
                try FileManager.default.copyItem(atPath: try setup.content("1.1"), toPath: storage + "/RXCacheContent")
            } _: { error in
                "\(error)".contains("does not match the treeDigest") && "\(error)".contains("put 1.0's content back")
            }
        }
    }

    @Test func runningACompletedPublishAgainChangesNothingAndOtherContentUnderTheSameVersionIsRefused() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let storage = scratch + "/storage"
            try setup.makeBase(at: storage)
            try setup.publish(storage: storage)
            let published = try storageSnapshot(storage)
            let again = try setup.publish(storage: storage)
            #expect(again.alreadyPublished && again.recovery == nil && again.files == 19)
            #expect(try storageSnapshot(storage) == published)
            var other = try setup.options(storage: storage)
            other.content = try setup.content("1.2")
            #expect {
                try Publisher.publish(other)
            } throws: { error in
                "\(error)".contains("not greater than the storage's current 1.1 (it was published with other content")
            }
            var otherMinimal = try setup.options(storage: storage)
            otherMinimal.minimal = v("1.1")
            #expect(throws: PublishError.self) { try Publisher.publish(otherMinimal) }
            #expect(try storageSnapshot(storage) == published)
        }
    }

    /// The storage's own folders are never written or emptied through a link (an outside audit:
    /// a committed `.content-sync-publish` symlink had its target emptied; a linked
    /// `RXCacheConfig/` got the status written outside). A file in their place is named too.
    @Test(arguments: [
        (".content-sync-publish", true), ("RXCacheConfig", true),
        ("RXCacheConfig/HistoryOfVersions", true), ("RXCacheConfig/HistoryOfVersions", false),
        ("RXCacheContent", false),
    ])
    func aLinkOrFileInPlaceOfTheStoragesOwnFolderIsRefused(relative: String, link: Bool) async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let outside = scratch + "/outside"
            let place = scratch + "/storage/" + relative
            var outsideBefore: TreeSnapshot?
            try expectRefused(in: scratch) { _, _ in
                if FileManager.default.fileExists(atPath: place) {
                    try FileManager.default.moveItem(atPath: place, toPath: outside)
                } else {
                    try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
                }
                try Data("keep me".utf8).write(to: URL(fileURLWithPath: outside + "/precious.txt"))
                if link {
                    try FileManager.default.createSymbolicLink(atPath: place, withDestinationPath: outside)
                } else {
                    try Data("a file".utf8).write(to: URL(fileURLWithPath: place))
                }
                outsideBefore = try storageSnapshot(outside)
            } _: { error in
                (error as? PublishError)?.code == .invalidStorage && "\(error)".contains(place)
                    && "\(error)".contains(link ? "is a symlink" : "is a file")
                    && "\(error)".contains("then publish again")
            }
            #expect(try storageSnapshot(outside) == outsideBefore)
        }
    }

    /// A storage with versions whose update list is gone (or a folder in its place) is not
    /// published on: its history was silently started again, and every client behind restored
    /// from the archive.
    @Test(arguments: [false, true])
    func aMissingUpdateListIsNotStartedAgainSilently(folder: Bool) async throws {
        try await withBlockingTemporaryDirectory { scratch in
            try expectRefused(in: scratch) { storage, _ in
                let list = storage + "/" + StorageLayout.updateListPath
                try FileManager.default.removeItem(atPath: list)
                if folder { try FileManager.default.createDirectory(atPath: list, withIntermediateDirectories: false) }
            } _: { error in
                (error as? PublishError)?.code == .invalidStorage
                    && "\(error)".contains(folder ? "is not a file" : "is missing")
                    && "\(error)".contains("{\"updatesByVersions\": []}")
            }
        }
    }

    /// A version whose change list's file name cannot be made is refused up front, not at the
    /// very end with a file-system error (exit 5, "File name too long"): such a version cannot
    /// be made at all (`CacheVersion.maxLength`), and two of the longest still name a file.
    @Test func aVersionTooLongForItsChangeListsNameIsRefusedUpFront() throws {
        let long = "1." + Array(repeating: "1", count: 110).joined(separator: ".")
        let refused = #expect(throws: CacheVersionError.self) { try CacheVersion(long) }
        #expect("\(refused.map { "\($0)" } ?? "")".contains("a version has at most 100 characters"))
        let longest = String(repeating: "1.", count: CacheVersion.maxLength / 2 - 1) + "10"
        #expect(try CacheVersion(longest).text.utf8.count == CacheVersion.maxLength)
        // With its temporary name (`.tmp-PID-N`, up to 32 bytes more) within a file name's 255.
        #expect("changes_\(longest)_\(longest).json".utf8.count + 32 <= 255)
    }

    /// A folder, FIFO or link in the status's place is a damaged storage, named as such (it was
    /// "not a storage yet … use --init"), and never read or waited on. (No snapshot: it would
    /// read the FIFO.)
    @Test(arguments: ["folder", "fifo", "symlink"])
    func somethingElseInTheStatusPlaceIsNamed(kind: String) async throws {
        try await withBlockingTemporaryDirectory { scratch in
            try expectRefused(in: scratch, unchanged: false) { storage, _ in
                let status = storage + "/" + StorageLayout.statusPath
                try FileManager.default.moveItem(atPath: status, toPath: scratch + "/status.json")
                switch kind {
                case "folder":
                    try FileManager.default.createDirectory(atPath: status, withIntermediateDirectories: false)
                case "fifo": #expect(mkfifo(status, 0o644) == 0)
                default:
                    try FileManager.default.createSymbolicLink(
                        atPath: status, withDestinationPath: scratch + "/status.json")
                }
            } _: { error in
                (error as? PublishError)?.code == .invalidStorage
                    && "\(error)".contains("but the storage's status must be a regular file there")
                    && !"\(error)".contains("--init")
            }
        }
    }

    /// A storage folder that cannot be made is named with the system's words, not Foundation's
    /// ("NSCocoaErrorDomain Code=513"), and the folders made on the way are removed again.
    @Test func aStorageFolderThatCannotBeMadeIsNamedPlainly() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.0")
            var options = try setup.options(storage: scratch + "/new/plain/storage")
            options.initialize = true
            try FileManager.default.createDirectory(atPath: scratch + "/new", withIntermediateDirectories: false)
            try Data("a file".utf8).write(to: URL(fileURLWithPath: scratch + "/new/plain"))
            #expect {
                try Publisher.publish(options)
            } throws: { error in
                "\(error)".contains("cannot create the storage folder \(scratch)/new/plain/storage")
                    && "\(error)".contains("Not a directory") && !"\(error)".contains("NSCocoaErrorDomain")
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: scratch + "/new") == ["plain"])
        }
    }

    @Test func aFifoOrSymlinkInTheContentIsRefusedBeforeItBlocksAndNothingIsLeft() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            var pipe = ""
            // The storage as it was: no work folder, nothing else.
            try expectRefused(in: scratch) { _, setup in
                pipe = try setup.content("1.1") + "/docs/pipe.txt"
                #expect(mkfifo(pipe, 0o644) == 0)
            } _: { error in
                "\(error)".contains(pipe) && "\(error)".contains("special file")
            }
        }
    }

    /// The scan refuses the name; the snapshot holding it must still be deleted, by its bytes.
    @Test func aNameThatIsNotUTF8IsRefusedAndLeavesNoWorkFolder() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let storage = scratch + "/storage"
            try setup.makeBase(at: storage)
            let before = try storageSnapshot(storage)
            let content = try setup.content("1.1")
            // "café.txt" in Latin-1
            let name: [UInt8] = Array((content + "/docs/caf").utf8) + [0xE9, 0x2E, 0x74, 0x78, 0x74, 0]
            let fd = name.withUnsafeBufferPointer {
                $0.withMemoryRebound(to: CChar.self) { open($0.baseAddress!, O_WRONLY | O_CREAT, 0o644) }
            }
            #expect(fd >= 0)
            close(fd)
            #expect(throws: PublishError.self) { try setup.publish(storage: storage) }
            #expect(try storageSnapshot(storage) == before, "no work folder left, nothing else changed")
            _ = name.withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { unlink($0.baseAddress!) } }
            try setup.publish(storage: storage)
            #expect(
                try String(contentsOfFile: storage + "/" + StorageLayout.statusPath, encoding: .utf8).contains(
                    "\"1.1\""))
        }
    }

    @Test(arguments: [
        #"{"phase": "elsewhere""#,
        #"{"format": 2, "phase": "installing", "pid": 1, "toVersion": "1.1", "minimalVersion": "1.0", "statusSHA256": "x", "createdFolders": [], "steps": []}"#,
    ])
    func anUnreadableJournalStopsThePublishInsteadOfGuessing(journal: String) async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let storage = scratch + "/storage"
            try setup.makeBase(at: storage)
            try FileManager.default.createDirectory(
                atPath: storage + "/.content-sync-publish", withIntermediateDirectories: true)
            try journal.write(
                toFile: storage + "/.content-sync-publish/journal.json", atomically: false, encoding: .utf8)
            let before = try storageSnapshot(storage)
            #expect {
                try setup.publish(storage: storage)
            } throws: { error in
                "\(error)".contains("is not a publish journal this publisher can read")
            }
            #expect(try storageSnapshot(storage) == before)
        }
    }

    /// An update list clients would refuse (its versions go back) is not published on: the
    /// publish names the entry and changes nothing.
    @Test func anUpdateListWhoseVersionsGoBackIsNotPublishedOn() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let storage = scratch + "/storage"
            try setup.makeBase(at: storage)
            try setup.publish(storage: storage)
            let history = PublishFixture.base.absoluteString + "RXCacheConfig/HistoryOfVersions/"
            try #"{"updatesByVersions": ["\#(history)changes_1.0_1.1.json", "\#(history)changes_1.1_1.0.json"]}"#
                .write(toFile: storage + "/" + StorageLayout.updateListPath, atomically: true, encoding: .utf8)
            let before = try storageSnapshot(storage)
            for dryRun in [true, false] {
                var options = try setup.options(storage: storage, version: "1.2")
                options.dryRun = dryRun
                #expect {
                    try Publisher.publish(options)
                } throws: { error in
                    let error = error as! PublishError
                    return error.code == .invalidStorage
                        && error.message.contains(
                            "listOfURLsToUpdatesByVersion.json: entry #1, changes_1.1_1.0.json, goes from 1.1 back to 1.0"
                        )
                        && error.message.hasSuffix("fix it before publishing")
                }
            }
            #expect(try storageSnapshot(storage) == before)
        }
    }

    /// A list that names a version above the status's (a hand-made entry, a list copied from
    /// elsewhere), or whose lists come out of order, is not published on: appending the next
    /// version's list after it would leave every client behind refusing the list for good.
    @Test(
        arguments: [
            (["changes_1.0_1.1.json", "changes_1.1_1.3.json"], "entry #1, changes_1.1_1.3.json, reaches 1.3, above"),
            (
                ["changes_1.0_1.1.json", "changes_0.9_1.0.json"],
                "changes_0.9_1.0.json comes after changes_1.0_1.1.json"
            ),
        ])
    func anUpdateListRunningAheadOrOutOfOrderIsNotPublishedOn(names: [String], reason: String) async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let storage = scratch + "/storage"
            try setup.makeBase(at: storage)
            try setup.publish(storage: storage)
            let history = PublishFixture.base.absoluteString + "RXCacheConfig/HistoryOfVersions/"
            let list = names.map { "\"\(history)\($0)\"" }.joined(separator: ", ")
            try #"{"updatesByVersions": [\#(list)]}"#
                .write(toFile: storage + "/" + StorageLayout.updateListPath, atomically: true, encoding: .utf8)
            let before = try storageSnapshot(storage)
            for dryRun in [true, false] {
                var options = try setup.options(storage: storage, version: "1.2")
                options.dryRun = dryRun
                #expect {
                    try Publisher.publish(options)
                } throws: { error in
                    let error = error as! PublishError
                    return error.code == .invalidStorage && error.message.contains(reason)
                        && error.message.contains("listOfURLsToUpdatesByVersion.json")
                }
            }
            #expect(try storageSnapshot(storage) == before)
        }
    }

    /// A storage published under another --base-url goes on, with the minimal version raised to
    /// the previous one: the earlier lists name paths under the old base, which clients refuse.
    @Test func aBaseURLOtherThanTheOneTheStorageWasPublishedWithRaisesTheMinimalVersion() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let storage = scratch + "/storage"
            try setup.makeBase(at: storage)
            try setup.publish(storage: storage)
            let moved = URL(string: "http://publish.invalid/store/")! // another scheme is another base
            var options = try setup.options(storage: storage, version: "1.2")
            options.baseURL = moved
            options.minimal = v("1.0")

            // A dry run says what the publish would do, and writes nothing.
            let before = try storageSnapshot(storage)
            options.dryRun = true
            let plan = try Publisher.publish(options)
            #expect(
                plan.previousBaseURL == PublishFixture.base && plan.minimalVersion == v("1.1")
                    && plan.requestedMinimalVersion == v("1.0"))
            #expect(try storageSnapshot(storage) == before)

            options.dryRun = false
            let report = try Publisher.publish(options)
            #expect(report.previousBaseURL == PublishFixture.base)
            #expect(report.minimalVersion == v("1.1") && report.requestedMinimalVersion == v("1.0"))
            #expect(report.previousURLsOutsideBase.isEmpty)
            let status = try #require(
                try JSONSerialization.jsonObject(
                    with: Data(contentsOf: URL(fileURLWithPath: storage + "/" + StorageLayout.statusPath)))
                    as? [String: Any])
            #expect(status["minimalCacheVersion"] as? String == "1.1")
            #expect(status["urlAtZipArchiveOfCacheContent"] as? String == moved.absoluteString + "RXCacheContent.zip")
            let list = try #require(
                try JSONSerialization.jsonObject(
                    with: Data(contentsOf: URL(fileURLWithPath: storage + "/" + StorageLayout.updateListPath)))
                    as? [String: [String]])
            #expect(
                list["updatesByVersions"] == [
                    PublishFixture.base.absoluteString + "RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json",
                    moved.absoluteString + "RXCacheConfig/HistoryOfVersions/changes_1.1_1.2.json",
                ])

            // The same command again is a no-op, --minimal 1.0 raised as before.
            let published = try storageSnapshot(storage)
            let again = try Publisher.publish(options)
            #expect(
                again.alreadyPublished && again.minimalVersion == v("1.1") && again.requestedMinimalVersion == v("1.0"))
            #expect(try storageSnapshot(storage) == published)

            // The new base spelled with another letter case of the host is the same base, and a
            // later --minimal below 1.1 is raised still: a client at 1.0 would need the list under the old base.
            var next = try setup.options(storage: storage, version: "1.3")
            next.baseURL = URL(string: "http://PUBLISH.invalid/store")!
            next.minimal = v("1.0")
            let later = try Publisher.publish(next)
            #expect(
                later.previousBaseURL == nil && later.minimalVersion == v("1.1")
                    && later.requestedMinimalVersion == v("1.0"))
            // Without --minimal the minimal version stays where it is.
            next = try setup.options(storage: storage, version: "1.4")
            next.baseURL = moved
            let last = try Publisher.publish(next)
            #expect(
                last.previousBaseURL == nil && last.minimalVersion == v("1.1") && last.requestedMinimalVersion == nil)
        }
    }

    @Test func aRefusalAfterRecoverySaysWhatRecoveryDid() async throws {
        try await withBlockingTemporaryDirectory { scratch in
            let setup = InterruptedPublish(scratch: scratch, baseVersion: "1.0", version: "1.1")
            let storage = scratch + "/storage"
            try setup.makeBase(at: storage)
            // Killed once committed; then the same version with other content.
            let hook = CheckpointHook { $0.phase == .cleanup ? .kill : .proceed }
            #expect(throws: PublishError.self) { try setup.publish(storage: storage, hook: hook) }
            var other = try setup.options(storage: storage)
            other.content = try setup.content("1.2")
            #expect {
                try Publisher.publish(other)
            } throws: { error in
                "\(error)".contains("not greater than the storage's current 1.1")
                    && "\(error)".contains(
                        "(before that, recovery: an interrupted publish of 1.1 over 1.0 had committed")
            }
            #expect(!FileManager.default.fileExists(atPath: storage + "/.content-sync-publish"))
        }
    }
}

/// The recovery rules and the lock holder's lookup, without I/O.
@Suite("publish recovery decisions")
struct PublishJournalTests {
    func journal(_ phase: PublishJournal.Phase, status: String? = "abc") -> PublishJournal {
        var journal = PublishJournal(phase: phase, pid: 1, fromVersion: "1.0", toVersion: "1.1", minimalVersion: "1.0")
        journal.statusSHA256 = status
        return journal
    }

    @Test func theVisibleStatusDecidesBetweenRollingBackAndFinishing() {
        let cases: [(PublishJournal?, String?, PublishJournal.Recovery)] = [
            (nil, "abc", .discard),
            (journal(.staging), "abc", .discard),
            (journal(.staging, status: nil), nil, .discard),
            (journal(.installing), "old", .rollBack),
            (journal(.installing), nil, .rollBack),
            (journal(.installing), "abc", .finish),
        ]
        for (journal, visible, expected) in cases {
            #expect(
                PublishJournal.recovery(for: journal, visibleStatusSHA256: visible) == expected,
                "\(String(describing: journal?.phase)) \(String(describing: visible))")
        }
    }

    @Test func eachStepIsUndoneFromWhatIsOnDisk() {
        #expect(PublishJournal.undo(fileExisted: true, keptExists: true) == .restoreKept)
        #expect(PublishJournal.undo(fileExisted: true, keptExists: false) == .nothing)
        #expect(PublishJournal.undo(fileExisted: false, keptExists: false) == .remove)
        #expect(PublishJournal.undo(fileExisted: false, keptExists: true) == .restoreKept)
        let folders: [(Bool, Bool, Bool, Bool, PublishJournal.FolderUndo)] = [
            (true, true, false, true, .exchangeBack),
            (true, false, true, true, .moveOutAndRestoreKept),
            (true, false, false, true, .moveOut),
            (false, true, false, true, .nothing),
            (false, false, true, false, .restoreKept),
            (false, false, false, false, .nothing),
            (false, false, true, true, .nothing),
        ]
        for (isStaged, stagedExists, keptExists, destinationExists, expected) in folders {
            #expect(
                PublishJournal.undoFolder(
                    destinationIsStaged: isStaged, stagedPathExists: stagedExists,
                    keptExists: keptExists, destinationExists: destinationExists) == expected)
        }
    }
}
