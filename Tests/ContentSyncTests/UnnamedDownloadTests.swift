import Foundation
import Synchronization
import Testing
import Transport

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// Forwards to a real ``CurlTransport`` and records which download call each content file took.
final class RecordingTransport: Transport {
    let base: CurlTransport
    /// When false, `download(_:into:options:)` is the protocol's default (through `/proc/self/fd`),
    /// as for an app's own transport that implements only the path-based call.
    let nativeDescriptorDownloads: Bool
    private let calls = Mutex<[(file: String, unnamed: Bool)]>([])

    init(nativeDescriptorDownloads: Bool = true) throws {
        self.base = try CurlTransport()
        self.nativeDescriptorDownloads = nativeDescriptorDownloads
    }

    var contentCalls: [(file: String, unnamed: Bool)] {
        calls.withLock { $0 }.filter { $0.file.contains("/RXCacheContent/") }
    }

    func data(for request: HTTPRequest) async throws -> HTTPResponse {
        try await base.data(for: request)
    }

    func download(_ request: HTTPRequest, to path: String, options: DownloadOptions) async throws -> HTTPResponse {
        if path.split(separator: "/").count != 4 || !path.hasPrefix("/proc/self/fd/") {
            calls.withLock { $0.append((request.url.path, false)) }
        }
        return try await base.download(request, to: path, options: options)
    }

    func download(_ request: HTTPRequest, into descriptor: Int32, options: DownloadOptions) async throws -> HTTPResponse
    {
        calls.withLock { $0.append((request.url.path, true)) }
        if nativeDescriptorDownloads {
            return try await base.download(request, into: descriptor, options: options)
        }
        return try await download(request, to: "/proc/self/fd/\(descriptor)", options: options)
    }
}

@Suite("Small declared files download as unnamed files linked into place", .timeLimit(.minutes(3)))
struct UnnamedDownloadTests {
    func replay(_ transport: RecordingTransport, storage: URL? = nil, edit: ((String) throws -> Void)? = nil)
        async throws -> SyncHarness.Outcome
    {
        try await withTemporaryDirectory { scratch in
            let v10 = try copySnapshot("1.0", to: scratch + "/1.0")
            let v11 = try copySnapshot("1.1", to: scratch + "/1.1")
            try edit?(v10.path)
            try edit?(v11.path)
            return try await withSyncHarness(storageRoot: v10) { harness in
                try await harness.sync()
                harness.server.setRoot(v11)
                var configuration = harness.configuration()
                configuration.transport = transport
                let report = try await CacheManager(configuration: configuration).checkForUpdates()
                let staging = StagingArea(contentDirectory: harness.content)
                return SyncHarness.Outcome(
                    report: report, tree: try harness.tree(),
                    stagingLeftovers: allPaths(under: staging.root))
            }
        }
    }

    @Test func aReplayOfDeclaredSmallFilesUsesOnlyUnnamedFilesAndLeavesNothingBehind() async throws {
        let transport = try RecordingTransport()
        let outcome = try await replay(transport)
        #expect(outcome.report.outcome == .replayed)
        #expect(outcome.report.filesDownloaded > 0)
        #expect(
            outcome.tree == ExampleStorageFixture.manifest("1.1"),
            "\(outcome.tree.difference(from: ExampleStorageFixture.manifest("1.1")))")
        #expect(transport.contentCalls.count == outcome.report.filesDownloaded)
        let named = transport.contentCalls.filter { !$0.unnamed }.map(\.file)
        #expect(named.isEmpty, "\(named)")
        // Nothing but the previous version, kept as the twin the next replay catches up.
        let leftovers = outcome.stagingLeftovers.filter { $0 != "retired" && !$0.hasPrefix("retired/") }
        #expect(leftovers.isEmpty, "\(leftovers)")
        #expect(outcome.stagingLeftovers.contains("retired/README.txt"))
    }

    @Test func aTransportWithOnlyPathDownloadsGetsTheUnnamedFileThroughProc() async throws {
        let transport = try RecordingTransport(nativeDescriptorDownloads: false)
        let outcome = try await replay(transport)
        #expect(outcome.report.outcome == .replayed)
        #expect(
            outcome.tree == ExampleStorageFixture.manifest("1.1"),
            "\(outcome.tree.difference(from: ExampleStorageFixture.manifest("1.1")))")
        #expect(transport.contentCalls.count == outcome.report.filesDownloaded && outcome.report.filesDownloaded > 0)
        let named = transport.contentCalls.filter { !$0.unnamed }.map(\.file)
        #expect(named.isEmpty, "\(named)")
    }

    @Test func filesOfUndeclaredSizeGoThroughResumablePartialFiles() async throws {
        let transport = try RecordingTransport()
        let outcome = try await replay(transport, edit: { try StorageEditing.stripIntegrity($0) })
        #expect(
            outcome.tree == ExampleStorageFixture.manifest("1.1"),
            "\(outcome.tree.difference(from: ExampleStorageFixture.manifest("1.1")))")
        #expect(transport.contentCalls.count == outcome.report.filesDownloaded && outcome.report.filesDownloaded > 0)
        let unnamed = transport.contentCalls.filter(\.unnamed).map(\.file)
        #expect(unnamed.isEmpty, "\(unnamed)")
        // Nothing but the previous version, kept as the twin the next replay catches up.
        let leftovers = outcome.stagingLeftovers.filter { $0 != "retired" && !$0.hasPrefix("retired/") }
        #expect(leftovers.isEmpty, "\(leftovers)")
        #expect(outcome.stagingLeftovers.contains("retired/README.txt"))
    }

    /// The once-per-update probe that decides between unnamed and partial files.
    @Test func theProbeSaysYesHereLeavesNothingAndSaysNoWhereItCannotWork() async throws {
        try await withTemporaryDirectory { folder in
            #expect(DownloadDestination.namingWorks(in: folder))
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder).isEmpty)
            // A stale probe from a killed run does not make it fail (the staging area's leftovers
            // go after the next switch, as any other).
            try "stale".write(toFile: folder + "/unnamed-file-probe.1.0", atomically: false, encoding: .utf8)
            #expect(DownloadDestination.namingWorks(in: folder))
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["unnamed-file-probe.1.0"])
            #expect(!DownloadDestination.namingWorks(in: folder + "/missing"))
            // Probes at once in one folder never take each other's file: every one says yes (an
            // update probes once, under its lock; any other caller is safe too).
            let answers = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<32 { group.addTask { DownloadDestination.namingWorks(in: folder) } }
                return await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(answers == Array(repeating: true, count: 32))
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["unnamed-file-probe.1.0"])
        }
    }

    @Test func anUnnamedFileAppearsOnlyWhenLinkedAndVanishesOtherwise() async throws {
        try await withTemporaryDirectory { folder in
            let kept = try #require(DownloadDestination.openUnnamed(in: folder, for: folder + "/kept.txt"))
            let dropped = try #require(DownloadDestination.openUnnamed(in: folder, for: folder + "/dropped.txt"))
            for case .unnamed(let descriptor, _) in [kept, dropped] {
                #expect(write(descriptor, "bytes", 5) == 5)
            }
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder).isEmpty)
            #expect(kept.identity?.size == 5)
            try kept.link()
            kept.close()
            dropped.discard()
            dropped.close()
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["kept.txt"])
            #expect(try String(contentsOfFile: folder + "/kept.txt", encoding: .utf8) == "bytes")
            // A name that exists already is not overwritten.
            let again = try #require(DownloadDestination.openUnnamed(in: folder, for: folder + "/kept.txt"))
            defer { again.close() }
            #expect(throws: SyncError.self) { try again.link() }
        }
    }
}

extension SyncHarness {
    struct Outcome {
        var report: SyncReport
        var tree: TreeSnapshot
        var stagingLeftovers: Set<String>
    }
}
