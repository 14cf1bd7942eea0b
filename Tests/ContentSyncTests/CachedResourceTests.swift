import Foundation
import GRDB
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// The stored copies of storage files (status, update list, change lists) behind conditional fetches.
@Suite("Stored storage files are kept, replaced and forgotten as asked", .timeLimit(.minutes(3)))
struct CachedResourceTests {
    static let list = URL(string: "https://h.example/s/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json")!
    static let status = URL(string: "https://h.example/s/RXCacheConfig/cacheStatus.json")!

    @Test func aSavedBodyIsReadBackAndASecondSaveReplacesIt() async throws {
        try await withTemporaryDirectory { folder in
            let store = try StateStore(path: folder + "/state.sqlite")
            #expect(try await store.cachedETag(Self.list) == nil)
            let first = Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            try await store.saveCachedResource(
                CachedResourceRecord(url: Self.list.absoluteString, etag: "\"a\"", body: first, fetchedAt: Date()))
            #expect(try await store.cachedETag(Self.list) == "\"a\"")
            #expect(try await store.cachedResource(Self.list)?.body == first)
            let second = Data("{\"from\": \"1.0\"}".utf8)
            try await store.saveCachedResource(
                CachedResourceRecord(url: Self.list.absoluteString, etag: "\"b\"", body: second, fetchedAt: Date()))
            let stored = try #require(try await store.cachedResource(Self.list))
            #expect(stored.etag == "\"b\"" && stored.body == second)
        }
    }

    /// The state database's folder renamed away under an open store, and a folder put in its
    /// place whose `state.sqlite` links to another program's database: every connection the
    /// pool opens later still reads and writes the store's own file (`HeldFolderPath`). By
    /// path, the new readers opened the other program's database.
    @Test func aStateFolderSwappedUnderAnOpenStoreKeepsItsDatabase() async throws {
        try await withTemporaryDirectory { root in
            let folder = root + "/state"
            let other = root + "/app.sqlite"
            let app = try DatabaseQueue(path: other)
            try app.inDatabase { db in try db.execute(sql: "CREATE TABLE secrets (v TEXT)") }
            try app.close()
            let before = try Data(contentsOf: URL(fileURLWithPath: other))
            let store = try StateStore(path: folder + "/state.sqlite")
            try await store.saveCachedResource(
                CachedResourceRecord(url: Self.list.absoluteString, etag: "\"a\"", body: Data([1]), fetchedAt: Date()))
            try FileManager.default.moveItem(atPath: folder, toPath: root + "/moved")
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
            try FileManager.default.createSymbolicLink(atPath: folder + "/state.sqlite", withDestinationPath: other)
            // Reads at once need readers beside the first: the pool opens them now.
            let tags = try await withThrowingTaskGroup(of: String?.self) { group in
                for _ in 0..<8 { group.addTask { try await store.cachedETag(Self.list) } }
                return try await group.reduce(into: [String?]()) { $0.append($1) }
            }
            #expect(tags == Array(repeating: "\"a\"", count: 8))
            try await store.saveCachedResource(
                CachedResourceRecord(url: Self.status.absoluteString, etag: "\"s\"", body: Data([2]), fetchedAt: Date())
            )
            #expect(try Data(contentsOf: URL(fileURLWithPath: other)) == before)
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["state.sqlite"])
        }
    }

    /// The companions' check looks in the folder the store holds, not at the path, which may
    /// lead to another folder by then: a `-wal` planted there is refused, while the path's
    /// folder is clean. (By path, the planted link passed the check.)
    @Test func theCompanionsAreCheckedInTheFolderHeld() async throws {
        try await withTemporaryDirectory { root in
            try FileManager.default.createDirectory(atPath: root + "/clean", withIntermediateDirectories: false)
            try FileManager.default.createDirectory(atPath: root + "/held", withIntermediateDirectories: false)
            try FileManager.default.createSymbolicLink(
                atPath: root + "/held/state.sqlite-wal", withDestinationPath: root + "/elsewhere")
            let held = open(root + "/held", O_RDONLY | O_DIRECTORY)
            defer { close(held) }
            #expect(throws: Never.self) { try StateStore.checkCompanions(of: root + "/clean/state.sqlite", in: nil) }
            #expect {
                try StateStore.checkCompanions(of: root + "/clean/state.sqlite", in: held)
            } throws: { error in
                (error as? SyncError)?.message.contains("write-ahead log") == true
            }
        }
    }

    /// The update lock is opened in the state database's folder as the store holds it: a
    /// folder put at the path since gets no lock file, and a link planted in the held folder
    /// is refused.
    @Test func theUpdateLockIsOpenedInTheFolderHeld() async throws {
        try await withTemporaryDirectory { root in
            let store = try StateStore(path: root + "/state/state.sqlite")
            let folder = try #require(store.folder)
            try FileManager.default.moveItem(atPath: root + "/state", toPath: root + "/moved")
            try FileManager.default.createDirectory(atPath: root + "/state", withIntermediateDirectories: false)
            do {
                let lock = try UpdateLock(
                    statePath: store.path, stateFolder: folder, contentDirectory: root + "/content",
                    staging: StagingArea(contentDirectory: root + "/content"))
                withExtendedLifetime(lock) {}
            }
            #expect(FileManager.default.fileExists(atPath: root + "/moved/state.sqlite.lock"))
            #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/state").isEmpty)

            try FileManager.default.removeItem(atPath: root + "/moved/state.sqlite.lock")
            try FileManager.default.createSymbolicLink(
                atPath: root + "/moved/state.sqlite.lock", withDestinationPath: root + "/planted")
            #expect {
                _ = try UpdateLock(
                    statePath: store.path, stateFolder: folder, contentDirectory: root + "/content",
                    staging: StagingArea(contentDirectory: root + "/content"))
            } throws: { error in
                (error as? SyncError)?.message.contains("is a symlink") == true
            }
            #expect(!FileManager.default.fileExists(atPath: root + "/planted"))
        }
    }

    @Test func forgettingSomeFilesKeepsTheOthers() async throws {
        try await withTemporaryDirectory { folder in
            let store = try StateStore(path: folder + "/state.sqlite")
            for url in [Self.list, Self.status] {
                try await store.saveCachedResource(
                    CachedResourceRecord(url: url.absoluteString, etag: "\"e\"", body: Data([1]), fetchedAt: Date()))
            }
            try await store.deleteCachedResources([Self.list])
            #expect(try await store.cachedETag(Self.list) == nil)
            #expect(try await store.cachedETag(Self.status) == "\"e\"")
        }
    }

    /// An entity tag is kept and sent back only when it is short and has no control characters:
    /// a 100 KB one (a hostile origin or database row) went with every request, and a line break
    /// would end the header.
    @Test(arguments: [
        ("\"abc-123\"", true), ("W/\"x\"", true), ("\"é\"", true),
        ("\"" + String(repeating: "a", count: 1_022) + "\"", true),
        ("\"" + String(repeating: "a", count: 1_023) + "\"", false),
        ("\"a\"\r\nHost: evil", false), ("\"a\u{7F}\"", false), ("\"a\tb\"", false),
    ])
    func onlyAShortPrintableEntityTagIsUsed(tag: String, usable: Bool) {
        #expect(StorageClient.isUsableEntityTag(tag) == usable)
    }
}
