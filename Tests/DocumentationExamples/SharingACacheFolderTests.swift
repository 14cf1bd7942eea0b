import ContentSync
import Foundation
import ItemCache
import StorageServer
import Testing

/// The ItemCache guide's sharing articles, run as written.
@Suite("The item cache's sharing examples work as the guide says", .timeLimit(.minutes(3)))
struct SharingACacheFolderTests {
    @Test func workersOnOneFolderFetchOnceAndAToolNeverMakesAFolder() async throws {
        let root = NSTemporaryDirectory() + "cache-sharing-example-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/site", withIntermediateDirectories: true)
        try Data("shared".utf8).write(to: URL(fileURLWithPath: root + "/site/item"))
        let server = StorageServer(root: URL(fileURLWithPath: root + "/site"))
        _ = try await server.start()
        defer { Task { await server.stop() } }
        server.injectFault(.delay(seconds: 0.3), forPath: "/item", times: 1)

        let workers = try (0..<3).map { _ in try startWorker(cacheFolder: root + "/cache") }
        let values = try await withThrowingTaskGroup(of: Data.self) { group in
            for worker in workers { group.addTask { try await worker.item(for: server.url(for: "item")).data } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(values == Array(repeating: Data("shared".utf8), count: 3))
        #expect(server.requestCount(forPath: "/item") == 1)
        for worker in workers { try await worker.close() }

        #expect(openForInspection(root + "/cache", sharing: .group) != nil)
        #expect(
            openForInspection(root + "/cache") == nil, "group-writable: refused unless shared with the group on purpose"
        )
        #expect(openForInspection(root + "/mistyped") == nil)
        #expect(!FileManager.default.fileExists(atPath: root + "/mistyped"))
        #expect(openForInspection(root + "/site") == nil, "a folder of someone else's files is refused")
    }

    @Test func theSyncedFolderAndTheCacheShareOneTransport() async throws {
        let root = NSTemporaryDirectory() + "cache-transport-example-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let storage = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("ExampleStorage/versions/1.4")
        let server = StorageServer(root: storage)
        _ = try await server.start()
        defer { Task { await server.stop() } }
        let app = try AppData(storage: try #require(server.baseURL), appSupport: root)
        let status = try await app.refresh(item: server.url(for: "RXCacheConfig/cacheStatus.json"))
        #expect(String(decoding: status, as: UTF8.self).contains("actualCacheVersion"))
        #expect(FileManager.default.fileExists(atPath: root + "/content"))
        try await app.stop()
    }
}
