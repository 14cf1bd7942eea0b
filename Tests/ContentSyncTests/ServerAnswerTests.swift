import Foundation
import StorageServer
import Testing
import Transport

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// End to end: a storage without integrity data (so no hash stands between a wrong answer and the
/// content folder) replays 1.2 → 1.4 while the host answers one content file with a response
/// that does not answer the request. The update either refuses, leaving 1.2 byte-identical, or
/// installs exactly 1.4: never a truncated, empty, overlong or still-compressed file.
@Suite("Answers that do not fit the request never reach the content folder", .timeLimit(.minutes(3)))
struct ServerAnswerTests {
    static let blob = "/RXCacheContent/data/blob.bin"

    /// 1.4's blob.bin as published.
    static var newBlob: Data {
        FileManager.default.contents(
            atPath: ExampleStorageFixture.snapshot("1.4").path + "/RXCacheContent/data/blob.bin")!
    }

    /// Syncs 1.2 from a stripped copy, serves a stripped 1.4, lets `inject` misbehave, and runs
    /// `check` after one update attempt (`nil` when it succeeded).
    func replay(_ inject: (StorageServer) -> Void, check: (SyncHarness, SyncError?) throws -> Void) async throws {
        try await withTemporaryDirectory { scratch in
            let v12 = try copySnapshot("1.2", to: scratch + "/1.2")
            let v14 = try copySnapshot("1.4", to: scratch + "/1.4")
            try StorageEditing.stripIntegrity(v12.path)
            try StorageEditing.stripIntegrity(v14.path)
            try await withSyncHarness(storageRoot: v12) { harness in
                try await harness.sync()
                try harness.expectTree(is: "1.2")
                harness.server.setRoot(v14)
                harness.server.resetLog()
                inject(harness.server)
                var failure: SyncError?
                do {
                    try await harness.sync(concurrency: 1)
                } catch let error as SyncError {
                    failure = error
                }
                try check(harness, failure)
            }
        }
    }

    @Test func aPartialContentAnswerToAPlainGetIsRefusedAndTheOldVersionStays() async throws {
        let first100 = Self.newBlob.prefix(100)
        try await replay(
            { server in
                server.injectFault(
                    .status(206, headers: ["Content-Range": "bytes 0-99/\(Self.newBlob.count)"], body: first100),
                    forPath: Self.blob)
            },
            check: { harness, failure in
                #expect(failure?.code == .network)
                #expect(failure?.message.contains("blob.bin") == true)
                #expect(failure?.message.contains("206 Partial Content to a request without Range") == true)
                try harness.expectTree(is: "1.2")
            })
    }

    @Test func aNotModifiedAnswerToAnUnconditionalGetIsRefusedAndTheOldVersionStays() async throws {
        try await replay(
            { server in
                server.injectFault(.status(304), forPath: Self.blob)
            },
            check: { harness, failure in
                #expect(failure?.code == .network)
                #expect(failure?.message.contains("304 Not Modified to a request without If-None-Match") == true)
                try harness.expectTree(is: "1.2")
            })
    }

    @Test func aResumeAnsweredWithTheWholeBodyAs206IsNotAppendedAndTheFileArrivesExact() async throws {
        try await replay(
            { server in
                // The first GET is cut short; the resume that follows is answered from byte 0.
                server.injectFault(.truncate(afterBytes: 30_000), forPath: Self.blob, times: 1)
                server.injectFault(.wholeBodyAsPartialContent, forPath: Self.blob, times: 1)
            },
            check: { harness, failure in
                #expect(failure == nil, "\(failure.map { "\($0)" } ?? "")")
                try harness.expectTree(is: "1.4")
                let blob = harness.server.requests().filter { $0.path == Self.blob }
                #expect(blob.map(\.status) == [200, 206, 200])
                #expect(blob.map(\.range) == [nil, "bytes=30000-", nil])
            })
    }

    @Test func gzipEncodedContentIsInstalledDecoded() async throws {
        try await replay(
            { server in
                server.injectFault(.gzipEncoded, where: { $0.hasPrefix("/RXCacheContent/") })
            },
            check: { harness, failure in
                #expect(failure == nil, "\(failure.map { "\($0)" } ?? "")")
                try harness.expectTree(is: "1.4")
                let content = harness.server.requests().filter { $0.path.hasPrefix("/RXCacheContent/") }
                #expect(!content.isEmpty)
                #expect(content.allSatisfy { $0.fault == .gzipEncoded && $0.status == 200 })
            })
    }

    @Test func aFileLargerThanItsDeclaredSizeIsAnIntegrityFailureNotANetworkOne() async throws {
        try await withSyncHarness(serving: "1.2") { harness in
            try await harness.sync()
            harness.serve("1.4")
            harness.server.injectFault(.status(200, body: Self.newBlob + Data(count: 1_000)), forPath: Self.blob)

            await #expect {
                try await harness.sync(concurrency: 1)
            } throws: { error in
                let error = error as! SyncError
                return error.code == .integrity && error.message.contains("blob.bin")
            }
            try harness.expectTree(is: "1.2")
        }
    }

    @Test func aNotModifiedToAStatusFetchWithNothingCachedIsRefusedAndCachesNothing() async throws {
        try await withSyncHarness(serving: "1.2") { harness in
            let statusPath = "/RXCacheConfig/cacheStatus.json"
            let etag = try #require(
                try await CurlTransport().data(
                    for: HTTPRequest(
                        url: harness.server.url(for: statusPath),
                        method: "HEAD")
                ).etag)
            // Accepted, the empty body would be cached under the real tag, and every later run
            // would send that tag, get a real 304 and parse the empty body again.
            harness.server.injectFault(.status(304, headers: ["ETag": etag]), forPath: statusPath)

            await #expect {
                try await harness.sync()
            } throws: { error in
                let error = error as! SyncError
                return error.code == .network
                    && error.message.contains("304 Not Modified to a request without If-None-Match")
            }
            harness.server.clearFaults()
            try await harness.sync()

            try harness.expectTree(is: "1.2")
        }
    }

    @Test func transportCodesMapToTheSyncCodeThatBlamesTheRightParty() {
        let url = URL(string: "https://example.com/RXCacheContent/a.bin")!
        let tooLarge = SyncError.wrap(
            TransportError(code: .tooLarge, message: "a.bin is larger than its declared 10 bytes", url: url),
            context: "downloading 'a.bin'")
        let invalid = SyncError.wrap(
            TransportError(code: .invalidResponse, message: "GET a.bin answered 304 …", url: url))
        let network = SyncError.wrap(TransportError(code: .network, message: "reset", url: url))

        #expect(tooLarge.code == .integrity)
        #expect(tooLarge.message == "downloading 'a.bin': a.bin is larger than its declared 10 bytes")
        #expect(invalid.code == .network)
        #expect(invalid.message == "GET a.bin answered 304 …")
        #expect(network.code == .network)
    }
}
