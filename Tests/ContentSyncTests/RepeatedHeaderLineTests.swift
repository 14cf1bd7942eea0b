import Foundation
import StorageServer
import Synchronization
import Testing

@testable import ContentSync

/// The sync engine reads headers through the same transport as the item cache: a storage host
/// that repeats header lines (two ETag, Cache-Control, Age, Vary and Set-Cookie lines) is read
/// as RFC 9110 §5.3 combines them, and a conditional request carries the combined tag.
@Suite("A storage that repeats header lines syncs, and revalidates with the combined tag")
struct RepeatedHeaderLineTests {
    @Test func repeatedLinesAreCombined() async throws {
        let root = ExampleStorageFixture.snapshot("1.0").path
        let conditional = Mutex<[String]>([])
        let origin = try ScriptedOrigin { request in
            let path = root + (request.path.removingPercentEncoding ?? request.path)
            let tag = "\"\(request.path.hashValue & 0xFFFF)\""
            let lines = [
                "ETag: \(tag)", "ETag: \"second\"", "Cache-Control: no-cache", "Cache-Control: max-age=60",
                "Age: 7200", "Age: 0", "Vary: Accept", "Vary: Accept-Language", "Set-Cookie: a=1", "Set-Cookie: b=2",
            ]
            if let sent = request.header("if-none-match") {
                conditional.withLock { $0.append(sent) }
                if sent == "\(tag), \"second\"" { return ScriptedOrigin.Answer(status: 304, headers: lines) }
            }
            guard let data = FileManager.default.contents(atPath: path) else {
                return ScriptedOrigin.Answer(status: 404)
            }
            return ScriptedOrigin.Answer(headers: lines, body: data)
        }
        defer { origin.stop() }
        try await withTemporaryDirectory { folder in
            let configuration = SyncConfiguration(
                baseURL: origin.url("/"), contentDirectory: folder + "/content",
                stateDatabasePath: folder + "/state.sqlite")
            let first = try await CacheManager(configuration: configuration).checkForUpdates()
            #expect(first.outcome != .upToDate)
            #expect(try TreeSnapshot.read(folder + "/content") == ExampleStorageFixture.manifest("1.0"))
            let second = try await CacheManager(configuration: configuration).checkForUpdates()
            #expect(second.outcome == .upToDate)
            // The status file was asked for with the whole combined tag, and the 304 was used.
            let statusTag = "\"\("/RXCacheConfig/cacheStatus.json".hashValue & 0xFFFF)\", \"second\""
            #expect(conditional.withLock { $0 }.contains(statusTag))
        }
    }
}
