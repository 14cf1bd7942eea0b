import Foundation
import Testing

@testable import ItemCache

/// Big values are read through their file, never as one `Data`; small ones from the index.
@Suite("Stored values as files and chunks")
struct StoredValueTests {
    @Test("a file value comes as its open descriptor, checked; an inline one as bytes; damage is a miss")
    func valuesAsFiles() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let store = try ItemStoreTests.open(folder, limit: 64 << 20, inline: 16 << 10)
        let big = ItemStoreTests.bytes(3 << 20, 7)
        try await store.store(big, for: ItemStoreTests.key("big"))
        try await store.store(Data("small".utf8), for: ItemStoreTests.key("small"))

        let read = try await store.withValue(for: ItemStoreTests.key("big")) { value -> Data in
            guard case .file(let descriptor) = value.content else {
                Issue.record("a 3 MiB value should be a file")
                return Data()
            }
            #expect(lseek(descriptor, 0, SEEK_CUR) == 0)
            var chunks = 0
            var collected = Data()
            try value.forEachChunk(size: 1 << 20) { chunk in
                chunks += 1
                collected.append(chunk)
            }
            #expect(chunks == 3)
            return collected
        }
        #expect(read == big)
        let small = try await store.withValue(for: ItemStoreTests.key("small")) { value -> Data? in
            if case .bytes(let data) = value.content { return data }
            return nil
        }
        #expect(small == Data("small".utf8))
        #expect(try await store.withValue(for: ItemStoreTests.key("none")) { _ in 1 } == nil)

        // One byte changed in the file, its size the same: never handed out.
        let file = try #require(
            try ItemStoreTests.read(store) { db in
                try String.fetchOne(db, sql: "SELECT file FROM item WHERE key = 'custom:big'")
            })
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: folder + "/blobs/" + file))
        try handle.seek(toOffset: 2_000_000)
        handle.write(Data([0xFF]))
        try handle.close()
        #expect(try await store.withValue(for: ItemStoreTests.key("big")) { _ in 1 } == nil)
        #expect(try store.blockingItem(for: ItemStoreTests.key("big")) == nil)
    }
}
