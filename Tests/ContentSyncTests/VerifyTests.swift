import Foundation
import StorageServer
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

@Suite("verify lists every difference from the published version and repairs it", .timeLimit(.minutes(3)))
struct VerifyTests {
    @Test func differencesAreListedAndRepairedAtomically() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            _ = try PublishFixture.publish("1.1", storage: storage, scratch: scratch, initialize: true)
            try await withSyncHarness(storageRoot: URL(fileURLWithPath: storage)) { harness in
                try await harness.sync()
                let manager = try harness.manager()
                #expect(try await manager.verify().matches)

                try "drifted".write(toFile: harness.content + "/README.txt", atomically: true, encoding: .utf8)
                try FileManager.default.removeItem(atPath: harness.content + "/docs/faq.md")
                try "x".write(toFile: harness.content + "/extra.txt", atomically: true, encoding: .utf8)
                try FileManager.default.removeItem(atPath: harness.content + "/drafts")

                let check = try await manager.verify()
                #expect(!check.matches)
                #expect(
                    Set(check.differences) == [
                        "different file README.txt (7 bytes, expected \(try size("README.txt", scratch)))",
                        "missing file docs/faq.md", "extra file extra.txt", "missing folder drafts",
                    ])
                let repair = try await manager.verify(repair: true)
                #expect(repair.matches)
                #expect(repair.repaired == 4)
                try harness.expectTree(is: "1.1")
                #expect(try await manager.history().first?.kind == .repair)
                #expect(try await manager.verify().matches)
            }
        }
    }

    func size(_ path: String, _ scratch: String) throws -> Int {
        try Data(contentsOf: URL(fileURLWithPath: scratch + "/content-1.1/" + path)).count
    }

    /// A manifest that is not the tree the digest vouches for named correct local files as
    /// different, and advised a repair that was then refused (outside audit): `verify` says the
    /// storage is inconsistent instead, and lists nothing.
    @Test func aManifestThatContradictsTheTreeDigestIsTheStoragesFault() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            _ = try PublishFixture.publish("1.1", storage: storage, scratch: scratch, initialize: true)
            try await withSyncHarness(storageRoot: URL(fileURLWithPath: storage)) { harness in
                try await harness.sync()
                let manifestPath = storage + "/RXCacheConfig/contentManifest.json"
                var manifest =
                    try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: manifestPath)))
                    as! [String: Any]
                var files = manifest["files"] as! [String: Any]
                files["README.txt"] = ["sha256": String(repeating: "0", count: 64), "size": 5]
                manifest["files"] = files
                try JSONSerialization.data(withJSONObject: manifest, options: [.sortedKeys])
                    .write(to: URL(fileURLWithPath: manifestPath))
                try StorageEditing.reseal(storage)
                try "x".write(toFile: harness.content + "/extra.txt", atomically: true, encoding: .utf8)

                for repair in [false, true] {
                    await #expect {
                        try await harness.manager().verify(repair: repair)
                    } throws: { error in
                        let error = error as! SyncError
                        return error.code == .integrity && error.message.contains("the storage is inconsistent")
                            && error.message.contains("republish")
                    }
                }
                #expect(FileManager.default.fileExists(atPath: harness.content + "/extra.txt"), "nothing repaired")
            }
        }
    }

    @Test func aStorageWithoutIntegrityDataCannotBeVerified() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = try copySnapshot("1.4", to: scratch + "/storage")
            try StorageEditing.stripIntegrity(storage.path)
            try await withSyncHarness(storageRoot: storage) { harness in
                try await harness.sync()
                await #expect {
                    try await harness.manager().verify()
                } throws: { error in
                    (error as! SyncError).code == .configuration && "\(error)".contains("republish")
                }
            }
        }
    }
}
