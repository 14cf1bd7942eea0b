import Foundation
import StorageServer
import Testing
import Transport

@testable import ContentSync

/// The engine hands the transport more downloads than it may run, so that a finished download's
/// connection starts the next at once; the connections at once stay
/// ``SyncConfiguration/maxConcurrentDownloads``.
@Suite("Downloads queued ahead, connections capped", .timeLimit(.minutes(3)))
struct DownloadQueueTests {
    @Test(
        "queued downloads: twice the cap with the manager's own transport, exactly the cap with a given one",
        arguments: [(1, false, 2), (8, false, 16), (3, false, 6), (0, false, 2), (8, true, 8), (2, true, 2)])
    func queueDepth(maxConcurrentDownloads: Int, given: Bool, queued: Int) async throws {
        var configuration = SyncConfiguration(
            baseURL: URL(string: "http://127.0.0.1:9/")!, contentDirectory: "/tmp/x", stateDatabasePath: "/tmp/x.sqlite"
        )
        configuration.maxConcurrentDownloads = maxConcurrentDownloads
        let transport = given ? try CurlTransport() : nil
        configuration.transport = transport
        #expect(Stager.downloadsQueued(configuration) == queued)
        await transport?.shutdown()
    }

    @Test(
        "a replay with slow answers never keeps more connections busy than maxConcurrentDownloads",
        arguments: [false, true])
    func connectionsStayCapped(givenTransport: Bool) async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            harness.serve("1.1")
            try await harness.sync()
            harness.serve("1.4")
            harness.server.resetLog()
            // Every content file waits before its answer: downloads overlap as much as the
            // client lets them.
            harness.server.injectFault(.delay(seconds: 0.2)) { $0.hasPrefix("/RXCacheContent/") }
            var configuration = harness.configuration(concurrency: 2)
            // A given transport allows 8 connections: the manager's setting alone bounds it.
            let transport = givenTransport ? try CurlTransport() : nil
            configuration.transport = transport
            let report = try await CacheManager(configuration: configuration).checkForUpdates()
            await transport?.shutdown()
            #expect(report.outcome == .replayed)
            try harness.expectTree(is: "1.4")
            #expect(report.filesDownloaded >= 4, "the test needs downloads to overlap")
            // The cap (a loaded machine may serve the held answers one after another, so 1 is
            // not a failure; a client past its cap shows 3 or more).
            #expect(
                (1...2).contains(harness.server.peakConcurrentRequests),
                "\(harness.server.peakConcurrentRequests) at once")
        }
    }
}
