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

    // MARK: - Tolerated: odd but harmless lists converge

    @Test func aCycleAndOutOfOrderListsInTheUpdateListStillConverge() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = try copySnapshot("1.2", to: scratch + "/storage")
            // A list going back (1.2 → 1.0, which no chain can use), and the real lists reversed.
            let history = storage.path + "/RXCacheConfig/HistoryOfVersions/"
            try #"{"from": "1.2", "to": "1.0", "changes": []}"#.write(
                toFile: history + "changes_1.2_1.0.json", atomically: true, encoding: .utf8)
            let base = "https://content-sync.invalid/ExampleStorage/RXCacheConfig/HistoryOfVersions/"
            try StorageEditing.writeUpdateList(
                storage.path,
                [base + "changes_1.2_1.0.json", base + "changes_1.1_1.2.json", base + "changes_1.0_1.1.json"])
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
