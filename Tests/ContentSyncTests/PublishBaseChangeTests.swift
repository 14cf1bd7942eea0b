import Crypto
import Foundation
import StorageServer
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// A storage moved to another base URL (1.0 and 1.1 published under A, 1.2 under B), served on
/// loopback and mirrored by real clients (protocol.md §8.5).
@Suite("a storage moved to another base URL keeps every client able to update", .timeLimit(.minutes(3)))
struct PublishBaseChangeTests {
    static let movedBase = URL(string: "https://moved.invalid/store/")!
    static let key = Curve25519.Signing.PrivateKey()

    /// Publishes ExampleStorage's `version` into `storage` under `base`, and copies the storage
    /// as it then is to `scratch`/published-`version`.
    func publish(
        _ version: String, storage: String, scratch: String, base: URL, initialize: Bool = false,
        signed: Bool = false
    ) async throws -> (PublishReport, URL) {
        let content = scratch + "/content-\(version)"
        try PublishFixture.materializeContent(version, at: content)
        var options = PublishOptions(storage: storage, content: content, version: v(version), baseURL: base)
        options.initialize = initialize
        options.signingKey = signed ? Self.key.rawRepresentation.base64EncodedString() : nil
        let publishing = options
        let report = try await offPool { try Publisher.publish(publishing) }
        let snapshot = scratch + "/published-\(version)"
        try FileManager.default.copyItem(atPath: storage, toPath: snapshot)
        return (report, URL(fileURLWithPath: snapshot))
    }

    /// A client of `server`; with `trusting`, it trusts the publisher's key, so every list it
    /// fetches must be covered by the signed status.
    func client(_ name: String, of server: StorageServer, scratch: String, trusting: Bool = false) throws
        -> CacheManager
    {
        try FileManager.default.createDirectory(atPath: scratch + "/\(name)", withIntermediateDirectories: true)
        var configuration = SyncConfiguration(
            baseURL: server.baseURL!, contentDirectory: scratch + "/\(name)/content",
            stateDatabasePath: scratch + "/\(name)/state.sqlite")
        if trusting { configuration.trustedSigningKeys = [Self.key.publicKey.rawRepresentation.base64EncodedString()] }
        return try CacheManager(configuration: configuration)
    }

    @Test(arguments: [false, true])
    func clientsAtThePreviousVersionReplayAndClientsFurtherBehindRestore(signed: Bool) async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            // A is a live loopback server too: a client that fetched a list named under A would show in its log.
            try FileManager.default.createDirectory(atPath: scratch + "/nothing", withIntermediateDirectories: true)
            try await withStorageServer(root: URL(fileURLWithPath: scratch + "/nothing")) { oldHost in
                let oldBase = oldHost.baseURL!
                var snapshots: [String: URL] = [:]
                snapshots["1.0"] = try await publish(
                    "1.0", storage: storage, scratch: scratch, base: oldBase, initialize: true, signed: signed
                ).1
                snapshots["1.1"] = try await publish(
                    "1.1", storage: storage, scratch: scratch, base: oldBase, signed: signed
                ).1
                let (moved, movedSnapshot) = try await publish(
                    "1.2", storage: storage, scratch: scratch, base: Self.movedBase, signed: signed)
                snapshots["1.2"] = movedSnapshot
                #expect(moved.previousBaseURL == oldBase)
                #expect(moved.minimalVersion == v("1.1") && moved.requestedMinimalVersion == v("1.0"))
                // The earlier entries stay as published (their lists name paths under A); the new one is under B.
                let list = try String(contentsOfFile: storage + "/" + StorageLayout.updateListPath, encoding: .utf8)
                #expect(list.contains(oldBase.absoluteString + "RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json"))
                #expect(
                    list.contains(
                        Self.movedBase.absoluteString + "RXCacheConfig/HistoryOfVersions/changes_1.1_1.2.json"))

                try await withStorageServer(root: snapshots["1.0"]!) { server in
                    let stepper = try client("stepper", of: server, scratch: scratch, trusting: signed)
                    let behind = try client("behind", of: server, scratch: scratch, trusting: signed)
                    #expect(try await stepper.checkForUpdates().outcome == .restored)
                    #expect(try await behind.checkForUpdates().outcome == .restored)
                    server.setRoot(snapshots["1.1"]!)
                    #expect(try await stepper.checkForUpdates().outcome == .replayed)
                    server.setRoot(snapshots["1.2"]!)
                    server.resetLog()
                    let replay = try await stepper.checkForUpdates()
                    #expect(replay.outcome == .replayed && replay.toVersion == v("1.2"))
                    let lists = server.requests().map(\.path).filter {
                        $0.hasPrefix("/RXCacheConfig/HistoryOfVersions/")
                    }
                    #expect(lists == ["/RXCacheConfig/HistoryOfVersions/changes_1.1_1.2.json"])
                    let restore = try await behind.checkForUpdates()
                    #expect(restore.outcome == .restored && restore.toVersion == v("1.2"))
                    let fresh = try await client("fresh", of: server, scratch: scratch, trusting: signed)
                        .checkForUpdates()
                    #expect(fresh.outcome == .restored && fresh.toVersion == v("1.2"))
                    for name in ["stepper", "behind", "fresh"] {
                        let tree = try TreeSnapshot.read(scratch + "/\(name)/content")
                        #expect(
                            tree == ExampleStorageFixture.manifest("1.2"),
                            "\(name): \(tree.difference(from: ExampleStorageFixture.manifest("1.2")))")
                    }
                }
                #expect(
                    oldHost.requests().isEmpty,
                    "no client configured with the loopback base asked A: \(oldHost.requests().map(\.path))")

                // A client configured with A still updates when A serves this storage too.
                oldHost.setRoot(snapshots["1.1"]!)
                let mirror = try client("mirror", of: oldHost, scratch: scratch, trusting: signed)
                #expect(try await mirror.checkForUpdates().outcome == .restored)
                oldHost.setRoot(snapshots["1.2"]!)
                #expect(try await mirror.checkForUpdates().outcome == .replayed)
                #expect(try TreeSnapshot.read(scratch + "/mirror/content") == ExampleStorageFixture.manifest("1.2"))
            }
        }
    }

    /// Why the minimal version is raised: with 1.2's status put back to minimal 1.0, a client at
    /// 1.0 replays changes_1.0_1.1.json, fetched from A, and refuses its paths under A.
    @Test func withoutTheRaisedMinimalAClientFurtherBehindWouldBeStuck() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = scratch + "/storage"
            try FileManager.default.createDirectory(atPath: storage, withIntermediateDirectories: true)
            try await withStorageServer(root: URL(fileURLWithPath: storage)) { oldHost in
                let oldBase = oldHost.baseURL!
                let (_, first) = try await publish(
                    "1.0", storage: storage, scratch: scratch, base: oldBase, initialize: true)
                _ = try await publish("1.1", storage: storage, scratch: scratch, base: oldBase)
                let (_, moved) = try await publish("1.2", storage: storage, scratch: scratch, base: Self.movedBase)
                try rewrite(moved.path + "/" + StorageLayout.statusPath) {
                    $0.replacingOccurrences(
                        of: #""minimalCacheVersion" : "1.1""#,
                        with: #""minimalCacheVersion" : "1.0""#)
                }
                try await withStorageServer(root: first) { server in
                    let behind = try client("behind", of: server, scratch: scratch)
                    #expect(try await behind.checkForUpdates().outcome == .restored)
                    server.setRoot(moved)
                    await #expect {
                        try await behind.checkForUpdates()
                    } throws: { error in
                        (error as? SyncError)?.code == .unsafePath && "\(error)".contains("changes_1.0_1.1.json")
                            && "\(error)".contains("'\(oldBase.absoluteString)RXCacheContent/")
                    }
                    #expect(oldHost.requestCount(forPath: "/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json") == 1)
                    #expect(try TreeSnapshot.read(scratch + "/behind/content") == ExampleStorageFixture.manifest("1.0"))
                }
            }
        }
    }
}
