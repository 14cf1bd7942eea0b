import Foundation
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
