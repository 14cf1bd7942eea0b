import Foundation
import StorageServer
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// What a replay fetches: each change list once, only those the chain needs, and a fallback
/// that still converges when names lie or lists are missing (protocol.md §2.1).
@Suite("A replay fetches each change list it needs once, and no other", .timeLimit(.minutes(3)))
struct ChainFetchingTests {
    static let history = "https://content-sync.invalid/ExampleStorage/RXCacheConfig/HistoryOfVersions/"
    static let historyPath = "/RXCacheConfig/HistoryOfVersions/"

    /// Syncs a client at `from` against a copy of `version` changed by `edit` (resealed), checks
    /// it replays to `version`, and returns the change-list requests it made, by path.
    func replay(from: String, to version: String, _ edit: (String) throws -> Void) async throws -> [String: Int] {
        try await withTemporaryDirectory { scratch in
            let storage = try copySnapshot(version, to: scratch + "/storage")
            try edit(storage.path)
            try StorageEditing.reseal(storage.path)
            return try await withSyncHarness(serving: from) { harness in
                try await harness.sync()
                harness.server.setRoot(storage)
                harness.server.resetLog()
                let report = try await harness.sync()
                #expect(report.outcome == .replayed)
                try harness.expectTree(is: version)
                var counts: [String: Int] = [:]
                for request in harness.server.requests() where request.path.hasPrefix(Self.historyPath) {
                    counts[String(request.path.dropFirst(Self.historyPath.count)), default: 0] += 1
                }
                return counts
            }
        }
    }

    @Test func anUpdateListNamingOneListThousandsOfTimesFetchesItOnce() async throws {
        let counts = try await replay(from: "1.0", to: "1.1") { storage in
            // The same file written three ways: as published, with an upper-case host and default
            // port, and relative to the update list.
            let forms = [
                Self.history + "changes_1.0_1.1.json",
                "HTTPS://CONTENT-SYNC.INVALID:443/ExampleStorage/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json",
                "HistoryOfVersions/changes_1.0_1.1.json",
            ]
            try StorageEditing.writeUpdateList(storage, (0..<3000).map { forms[$0 % 3] })
        }
        #expect(counts == ["changes_1.0_1.1.json": 1])
    }

    @Test func onlyTheChainsListsAreFetched() async throws {
        let counts = try await replay(from: "1.2", to: "1.4") { storage in
            // Valid lists the chain never takes: a later 1.2 → 1.4 and a second copy of 1.3 → 1.4.
            let folder = storage + "/RXCacheConfig/HistoryOfVersions/"
            try FileManager.default.createDirectory(atPath: folder + "later", withIntermediateDirectories: true)
            try FileManager.default.copyItem(
                atPath: folder + "changes_1.3_1.4.json", toPath: folder + "later/changes_1.3_1.4.json")
            try #"{"from": "1.2", "to": "1.4", "changes": []}"#.write(
                toFile: folder + "later/changes_1.2_1.4.json", atomically: true, encoding: .utf8)
            let names = [
                "changes_1.0_1.1.json", "changes_1.1_1.2.json", "changes_1.2_1.3.json", "changes_1.3_1.4.json",
                "later/changes_1.2_1.4.json", "later/changes_1.3_1.4.json",
            ]
            try StorageEditing.writeUpdateList(storage, names.map { Self.history + $0 })
        }
        #expect(counts == ["changes_1.2_1.3.json": 1, "changes_1.3_1.4.json": 1])
    }

    @Test func listsWhoseNamesLieStillConverge() async throws {
        let counts = try await replay(from: "1.0", to: "1.2") { storage in
            // Each file holds the other's list.
            let folder = storage + "/RXCacheConfig/HistoryOfVersions/"
            try FileManager.default.moveItem(atPath: folder + "changes_1.0_1.1.json", toPath: folder + "swap.json")
            try FileManager.default.moveItem(
                atPath: folder + "changes_1.1_1.2.json", toPath: folder + "changes_1.0_1.1.json")
            try FileManager.default.moveItem(atPath: folder + "swap.json", toPath: folder + "changes_1.1_1.2.json")
        }
        #expect(counts == ["changes_1.0_1.1.json": 1, "changes_1.1_1.2.json": 1])
    }

    @Test func aMissingListIsSkippedForALaterCopy() async throws {
        let counts = try await replay(from: "1.0", to: "1.2") { storage in
            try StorageEditing.writeUpdateList(
                storage,
                [
                    Self.history + "gone/changes_1.0_1.1.json", Self.history + "changes_1.0_1.1.json",
                    Self.history + "changes_1.1_1.2.json",
                ])
        }
        #expect(counts == ["gone/changes_1.0_1.1.json": 1, "changes_1.0_1.1.json": 1, "changes_1.1_1.2.json": 1])
    }

    @Test func storedCopiesOfListsTheClientHasPassedAreForgotten() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            try await harness.sync()
            harness.serve("1.1")
            try await harness.sync()
            let passed = harness.baseURL.appendingPathComponent("RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json")
            let store = try StateStore(path: harness.state)
            #expect(try await store.cachedResource(passed) != nil, "the list just replayed is kept, for a retry")
            harness.serve("1.2")
            try await harness.sync()
            #expect(try await store.cachedResource(passed) == nil)
            try harness.expectTree(is: "1.2")
        }
    }
}

extension ChainFetchingTests {
    @Test func aChangeListLargerThanTheStoredLimitIsNotKeptInTheStateDatabase() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = try copySnapshot("1.1", to: scratch + "/storage")
            // Valid JSON, padded past the limit with whitespace.
            let list = storage.path + "/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json"
            var body = try Data(contentsOf: URL(fileURLWithPath: list))
            body.append(Data(repeating: 0x20, count: StorageClient.maxStoredBodyBytes))
            try body.write(to: URL(fileURLWithPath: list))
            try StorageEditing.reseal(storage.path)
            try await withSyncHarness(serving: "1.0") { harness in
                try await harness.sync()
                harness.server.setRoot(storage)
                #expect(try await harness.sync().outcome == .replayed)
                try harness.expectTree(is: "1.1")
                let store = try StateStore(path: harness.state)
                let stored = harness.baseURL.appendingPathComponent(
                    "RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json")
                #expect(try await store.cachedResource(stored) == nil)
                #expect(
                    try await store.cachedResource(
                        harness.baseURL.appendingPathComponent("RXCacheConfig/cacheStatus.json")) != nil)
            }
        }
    }
}
