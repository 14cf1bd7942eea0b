import Foundation
import StorageServer
import Testing

@testable import ContentSync
@testable import StorageFormat

/// The storage's JSON files whose sizes the integrity data declares are cut off past them: an
/// endless update list or change list cost the client the transport's whole 64 MiB limit, in
/// memory and traffic, before its hash refused it.
@Suite("Storage files are read only up to their declared sizes", .timeLimit(.minutes(3)))
struct DeclaredSizeTests {
    @Test(arguments: ["RXCacheConfig/listOfURLsToUpdatesByVersion.json", "changes_1.0_1.1.json"])
    func aFileLongerThanItsDeclaredSizeIsCutOffThere(padded suffix: String) async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            let root = ExampleStorageFixture.snapshot("1.2").path
            // 8 MiB of trailing spaces: still JSON, but not the bytes the status declares.
            let padding = Data(repeating: UInt8(ascii: " "), count: 8 << 20)
            let origin = try ScriptedOrigin { request in
                let path = String(request.path.dropFirst()).removingPercentEncoding ?? ""
                guard let data = FileManager.default.contents(atPath: root + "/" + path) else {
                    return ScriptedOrigin.Answer(status: 404)
                }
                return ScriptedOrigin.Answer(body: path.hasSuffix(suffix) ? data + padding : data)
            }
            defer { origin.stop() }
            var configuration = harness.configuration()
            configuration.baseURL = origin.url("/")
            let manager = try CacheManager(configuration: configuration)
            await #expect {
                try await manager.checkForUpdates()
            } throws: { error in
                guard let error = error as? SyncError else { return false }
                return error.code == .integrity && error.message.contains("sent more than")
            }
            try harness.expectTree(is: "1.0")
        }
    }
}
