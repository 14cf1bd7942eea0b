import Foundation
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// Status files, update lists and change lists no publisher should produce. A 1.0 client
/// replays to 1.1; every case checks that 1.0 stays intact.
extension HostileStorageTests {
    static let listPath = "/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json"
    static let updateListPath = "/RXCacheConfig/listOfURLsToUpdatesByVersion.json"
    static let statusPath = "/RXCacheConfig/cacheStatus.json"

    func expectDocumentRefused(
        _ relative: String, code: SyncError.Code, mentioning text: String,
        _ replace: @escaping (String) -> String
    ) async throws {
        try await expectRefused(from: "1.0", damaged: "1.1", code: code, mentioning: text) { storage in
            try rewrite(storage + relative, replace)
        }
    }

    @Test(arguments: [statusPath, updateListPath, listPath])
    func aDeeplyNestedDocumentIsRefused(relative: String) async throws {
        let code: SyncError.Code =
            relative == Self.statusPath
            ? .invalidStatus : relative == Self.listPath ? .invalidChangeList : .invalidUpdateList
        try await expectDocumentRefused(relative, code: code, mentioning: "nest") { _ in
            String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        }
    }

    @Test func aStatusLargerThanAnyStatusIsRefusedWithoutReadingItAll() async throws {
        // The storage's fault, not the network's: .integrity (exit 4), as for any file over its limit.
        try await expectRefused(from: "1.0", damaged: "1.1", code: .integrity, mentioning: "cacheStatus.json") {
            storage in
            // Without integrity data, so that resealing leaves the padding alone.
            try StorageEditing.stripIntegrity(storage)
            let path = storage + Self.statusPath
            var padded = try Data(contentsOf: URL(fileURLWithPath: path))
            padded.append(Data(repeating: 0x20, count: 65 << 20))
            try padded.write(to: URL(fileURLWithPath: path))
        }
    }

    @Test(arguments: [
        (#"{"actualCacheVersion": "1.1", "minimalCacheVersion": "1.0""#, "cacheStatus.json"),
        (
            #"{"actualCacheVersion": {"major": 1}, "minimalCacheVersion": "1.0", "urlAtListOfURLsToUpdatesByVersion": "x", "urlAtZipArchiveOfCacheContent": "y", "zippedArchiveSizeInMB": "1", "unzippedArchiveSizeInMB": "1"}"#,
            "actualCacheVersion"
        ),
        (
            #"{"actualCacheVersion": "1.1", "minimalCacheVersion": "1.2", "urlAtListOfURLsToUpdatesByVersion": "https://content-sync.invalid/ExampleStorage/RXCacheConfig/listOfURLsToUpdatesByVersion.json", "urlAtZipArchiveOfCacheContent": "https://content-sync.invalid/ExampleStorage/RXCacheContent.zip", "zippedArchiveSizeInMB": "1", "unzippedArchiveSizeInMB": "1"}"#,
            "minimalCacheVersion"
        ),
        (
            #"{"actualCacheVersion": "1.1", "minimalCacheVersion": "1.0", "urlAtListOfURLsToUpdatesByVersion": "https://content-sync.invalid/ExampleStorage/RXCacheConfig/listOfURLsToUpdatesByVersion.json", "urlAtZipArchiveOfCacheContent": "https://content-sync.invalid/ExampleStorage/RXCacheContent.zip", "zippedArchiveSizeInMB": "-5", "unzippedArchiveSizeInMB": "1"}"#,
            "zippedArchiveSizeInMB"
        ),
        ("\u{FEFF}\u{0}garbage", "cacheStatus.json"),
    ])
    func aMalformedStatusIsRefused(body: String, mentioning text: String) async throws {
        try await expectDocumentRefused(Self.statusPath, code: .invalidStatus, mentioning: text) { _ in body }
    }

    @Test(arguments: [
        #"{"updatesByVersions": "changes_1.0_1.1.json"}"#, #"{"updatesByVersions": [42]}"#, "not json at all",
    ])
    func aMalformedUpdateListIsRefused(body: String) async throws {
        try await expectDocumentRefused(
            Self.updateListPath, code: .invalidUpdateList, mentioning: "listOfURLsToUpdatesByVersion.json"
        ) { _ in body }
    }

    @Test(arguments: [
        #"{"from": "1.0", "to": "1.1", "changes": {"oldPath": ""}}"#,
        #"{"from": "one", "to": "1.1", "changes": []}"#,
        #"{"from": "1.0", "to": "1.1", "changes": [{"oldPath": "", "newPath": "https://content-sync.invalid/ExampleStorage/RXCacheContent/x.txt", "redownload": "sometimes"}]}"#,
    ])
    func aChangeListWithWrongTypesIsRefused(body: String) async throws {
        try await expectDocumentRefused(Self.listPath, code: .invalidChangeList, mentioning: "changes_1.0_1.1.json") {
            _ in body
        }
    }

    @Test(arguments: [
        "https://content-sync.invalid/ExampleStorage/RXCacheConfig/cacheStatus.json",
        "https://content-sync.invalid/ExampleStorage/RXCacheContent/a%FF.txt",
        "file:///etc/passwd",
    ])
    func aChangeOutsideTheContentIsRefused(target: String) async throws {
        try await expectDocumentRefused(Self.listPath, code: .unsafePath, mentioning: "changes_1.0_1.1.json") { text in
            text.replacingOccurrences(of: Self.contentPrefix + "docs/faq.md", with: target)
        }
    }

    @Test func anArchiveRedirectedToALocalFileIsRefused() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = try copySnapshot("1.3", to: scratch + "/storage")
            try await withSyncHarness(serving: "1.0") { harness in
                try await harness.sync()
                harness.server.setRoot(storage)
                harness.server.injectFault(.redirect(to: "file:///etc/passwd"), forPath: "/RXCacheContent.zip")
                await #expect {
                    try await harness.sync()
                } throws: { error in
                    (error as! SyncError).code == .network && "\(error)".contains("RXCacheContent.zip")
                }
                try harness.expectTree(is: "1.0")
            }
        }
    }

    // MARK: - Update lists whose versions go back (issue 4: "list cycles, change lists out of order")

    /// Each list is published on 1.2's storage in place of its real update list; the client at
    /// 1.0 refuses it before fetching any change list, and keeps 1.0.
    @Test(arguments: [
        // A cycle: a list going back, even one no chain from 1.0 to 1.2 would take.
        (
            ["changes_1.0_1.1.json", "changes_1.1_1.2.json", "changes_1.2_1.0.json"],
            "changes_1.2_1.0.json, goes from 1.2 back to 1.0"
        ),
        // A list from a version to itself.
        (
            ["changes_1.0_1.1.json", "changes_1.1_1.1.json", "changes_1.1_1.2.json"],
            "changes_1.1_1.1.json, goes from 1.1 back to 1.1"
        ),
        // The real lists, newest first.
        (
            ["changes_1.1_1.2.json", "changes_1.0_1.1.json"],
            "changes_1.0_1.1.json comes after changes_1.1_1.2.json, which reaches the later version 1.2"
        ),
    ])
    func anUpdateListWhoseVersionsGoBackIsRefused(names: [String], reason: String) async throws {
        try await withTemporaryDirectory { scratch in
            let storage = try copySnapshot("1.2", to: scratch + "/storage")
            let history = storage.path + "/RXCacheConfig/HistoryOfVersions/"
            for name in names where !FileManager.default.fileExists(atPath: history + name) {
                let (from, to) = UpdateList.versions(inFileName: name)
                try #"{"from": "\#(from!.text)", "to": "\#(to!.text)", "changes": []}"#.write(
                    toFile: history + name, atomically: true, encoding: .utf8)
            }
            let base = "https://content-sync.invalid/ExampleStorage/RXCacheConfig/HistoryOfVersions/"
            try StorageEditing.writeUpdateList(storage.path, names.map { base + $0 })
            try StorageEditing.reseal(storage.path)
            try await withSyncHarness(serving: "1.0") { harness in
                try await harness.sync()
                harness.server.setRoot(storage)
                harness.server.resetLog()
                await #expect {
                    try await harness.sync()
                } throws: { error in
                    let error = error as! SyncError
                    return error.code == .invalidUpdateList && error.message.contains(reason)
                        && error.message.contains("listOfURLsToUpdatesByVersion.json")
                        && error.message.contains("the publisher must")
                }
                #expect(harness.server.requests().filter { $0.path.contains("HistoryOfVersions") }.isEmpty)
                try harness.expectTree(is: "1.0")
                // The publisher's fix heals it: the lists in order, the cycle gone.
                try StorageEditing.writeUpdateList(
                    storage.path, ["changes_1.0_1.1.json", "changes_1.1_1.2.json"].map { base + $0 })
                try StorageEditing.reseal(storage.path)
                #expect(try await harness.sync().outcome == .replayed)
                try harness.expectTree(is: "1.2")
            }
        }
    }

    /// Entries that cannot continue the chain (issue 2: "skip entries that do not continue the
    /// chain") are skipped wherever they stand, even out of order with the others: only the
    /// lists a replay may take must come oldest first.
    @Test func entriesThatCannotContinueTheChainAreSkippedWhereverTheyStand() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = try copySnapshot("1.2", to: scratch + "/storage")
            let base = "https://content-sync.invalid/ExampleStorage/RXCacheConfig/HistoryOfVersions/"
            let names = [
                "changes_1.0_1.1.json", "changes_1.5_1.6.json", "changes_0.9_1.0.json", "changes_1.1_1.2.json",
            ]
            try StorageEditing.writeUpdateList(storage.path, names.map { base + $0 })
            try StorageEditing.reseal(storage.path)
            try await withSyncHarness(serving: "1.0") { harness in
                try await harness.sync()
                harness.server.setRoot(storage)
                let report = try await harness.sync()
                #expect(report.outcome == .replayed)
                #expect(report.changeListsApplied == 2)
                try harness.expectTree(is: "1.2")
            }
        }
    }
}
