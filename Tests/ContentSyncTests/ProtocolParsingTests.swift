import Archive
import Foundation
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

@Suite("Status, update list and change lists parse as the protocol says", .timeLimit(.minutes(3)))
struct ProtocolParsingTests {
    static let base = URL(string: "https://h.example/s/")!
    static let statusURL = URL(string: "https://h.example/s/RXCacheConfig/cacheStatus.json")!

    static func status(_ json: String) throws -> CacheStatus {
        var layout = try StorageLayout(baseURL: base)
        return try CacheStatus.parse(Data(json.utf8), from: statusURL, layout: &layout)
    }

    static let validStatus = """
        {"actualCacheVersion": "1.10", "minimalCacheVersion": 1.9,
         "urlAtListOfURLsToUpdatesByVersion": "https://h.example/s/RXCacheConfig/listOfURLsToUpdatesByVersion.json",
         "urlAtZipArchiveOfCacheContent": "https://h.example/s/RXCacheContent.zip",
         "zippedArchiveSizeInMB": "0.27", "unzippedArchiveSizeInMB": 1}
        """

    @Test func statusAcceptsStringsAndNumbers() throws {
        let status = try Self.status(Self.validStatus)
        #expect(status.actualVersion == v("1.10"))
        #expect(status.actualVersion > status.minimalVersion)
        #expect(status.zippedBytes == Int64((0.27 * 1_048_576).rounded(.up)))
        #expect(status.unzippedBytes == 1_048_576)
        #expect(status.archiveURL.absoluteString == "https://h.example/s/RXCacheContent.zip")
    }

    @Test func aVersionWrittenAsABareNumberKeepsItsTrailingZero() throws {
        let status = try Self.status(Self.validStatus.replacingOccurrences(of: "\"1.10\"", with: "1.10"))
        #expect(status.actualVersion > v("1.9"))
    }

    @Test(arguments: [
        ("\"actualCacheVersion\": \"1.10\"", "\"actualCacheVersion\": \"one\"", "actualCacheVersion"),
        ("\"zippedArchiveSizeInMB\": \"0.27\"", "\"zippedArchiveSizeInMB\": \"big\"", "zippedArchiveSizeInMB"),
        ("\"minimalCacheVersion\": 1.9", "\"minimalCacheVersion\": \"2.0\"", "above actualCacheVersion"),
        ("\"minimalCacheVersion\": 1.9,", "", "minimalCacheVersion"),
        (
            "\"urlAtZipArchiveOfCacheContent\": \"https://h.example/s/RXCacheContent.zip\"",
            "\"urlAtZipArchiveOfCacheContent\": \"ftp://x/y.zip\"", "urlAtZipArchiveOfCacheContent"
        ),
    ])
    func badStatusFilesNameTheKeyAtFault(find: String, replace: String, mentioned: String) {
        let broken = Self.validStatus.replacingOccurrences(of: find, with: replace)
        #expect {
            try Self.status(broken)
        } throws: { error in
            let error = error as! StorageFormatError
            return error.code == .invalidStatus && error.message.contains(mentioned)
                && error.message.contains("cacheStatus.json")
        }
    }

    @Test func aStatusThatIsNotAnObjectIsRefused() {
        #expect {
            try Self.status("[1, 2]")
        } throws: { error in
            (error as! StorageFormatError).message.contains("expected a JSON object, found an array")
        }
    }

    @Test func theMisspelledKeyOfTheOriginalDocumentationIsAccepted() throws {
        let status = try Self.status(
            Self.validStatus.replacingOccurrences(of: "actualCacheVersion", with: "actucalCacheVersion"))
        #expect(status.actualVersion.text == "1.10")
    }

    @Test func updateListReadsVersionsFromFileNames() throws {
        let layout = try StorageLayout(baseURL: Self.base)
        let json =
            #"{"updatesByVersions": ["https://h.example/s/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json", "custom.json"]}"#
        let list = try UpdateList.parse(
            Data(json.utf8), from: URL(string: "https://h.example/s/RXCacheConfig/list.json")!, layout: layout)
        #expect(list.entries.count == 2)
        #expect(list.entries[0].namedFrom == v("1.0"))
        #expect(list.entries[0].namedTo == v("1.1"))
        #expect(list.entries[1].namedFrom == nil)
        #expect(list.entries[1].url.absoluteString == "https://h.example/s/RXCacheConfig/custom.json")
    }

    /// Which update lists close a cycle: a name whose versions go back. `nil`: accepted;
    /// otherwise a part of the refusal.
    @Test(
        arguments: [
            (["changes_1.0_1.1.json", "changes_1.1_1.2.json"], nil),
            // Jump lists, unnamed lists anywhere, a second mention, lists out of order (judged on a
            // replay's candidates, below).
            (["changes_1.0_1.1.json", "changes_1.1_1.2.json", "changes_1.0_1.2.json", "custom.json"], nil),
            (["custom.json", "changes_1.0_1.1.json", "changes_1.0_1.1.json?x=1", "changes_1.1_1.2.json"], nil),
            (["changes_1.1_1.2.json", "changes_1.0_1.1.json"], nil),
            (
                ["changes_1.0_1.1.json", "changes_1.1_1.0.json"],
                "entry #1, changes_1.1_1.0.json, goes from 1.1 back to 1.0"
            ),
            (["changes_1.1_1.1.json"], "entry #0, changes_1.1_1.1.json, goes from 1.1 back to 1.1"),
            // A backward list counts even where no chain would take it.
            (
                ["changes_1.0_1.1.json", "changes_0.5_0.4.json"],
                "entry #1, changes_0.5_0.4.json, goes from 0.5 back to 0.4"
            ),
            (["changes_1.2_1.0.json", "changes_1.2_1.0.json"], "entry #0"),
        ] as [([String], String?)])
    func updateListVersionsNeverGoBack(names: [String], refusal: String?) throws {
        if let refusal {
            #expect {
                try Self.updateList(names)
            } throws: { error in
                let error = error as! StorageFormatError
                return error.code == .invalidUpdateList && error.message.contains(refusal)
                    && error.message.hasPrefix("https://h.example/s/RXCacheConfig/list.json: ")
            }
        } else {
            #expect(try Self.updateList(names).entries.count == names.count)
        }
    }

    /// The update list `https://h.example/s/RXCacheConfig/list.json` naming the change lists
    /// `names` (file names under `HistoryOfVersions/`), in that order.
    static func updateList(_ names: [String]) throws -> UpdateList {
        let json =
            "{\"updatesByVersions\": ["
            + names.map { "\"https://h.example/s/RXCacheConfig/HistoryOfVersions/\($0)\"" }.joined(separator: ",")
            + "]}"
        return try UpdateList.parse(
            Data(json.utf8), from: URL(string: "https://h.example/s/RXCacheConfig/list.json")!,
            layout: try StorageLayout(baseURL: base))
    }

    /// Lists a replay from 1.0 to 1.10 may take must be in publication order; an entry that
    /// cannot continue the chain is skipped wherever it stands. `nil`: in order; otherwise the
    /// later and the earlier list of the first pair out of order.
    @Test(
        arguments: [
            (["changes_1.0_1.1.json", "changes_1.1_1.2.json", "changes_1.2_1.3.json"], nil),
            // Entries that do not continue the chain (older than 1.0, or past 1.10), anywhere.
            (
                [
                    "changes_1.0_1.1.json", "changes_2.5_2.6.json", "changes_1.1_1.2.json", "changes_0.9_1.0.json",
                    "changes_1.2_1.3.json",
                ], nil
            ),
            // Jump lists published with their version, and unnamed lists.
            (
                [
                    "changes_1.0_1.1.json", "changes_1.1_1.2.json", "changes_1.0_1.2.json", "x.json",
                    "changes_1.2_1.3.json",
                ], nil
            ),
            (
                ["changes_1.1_1.2.json", "changes_1.0_1.1.json", "changes_1.2_1.3.json"],
                ["changes_1.0_1.1.json", "changes_1.1_1.2.json"]
            ),
            (
                ["changes_1.0_1.1.json", "changes_1.2_1.3.json", "x.json", "changes_1.1_1.2.json"],
                ["changes_1.1_1.2.json", "changes_1.2_1.3.json"]
            ),
            // Versions compare as versions, not text.
            (["changes_1.0_1.10.json", "changes_1.0_1.9.json"], ["changes_1.0_1.9.json", "changes_1.0_1.10.json"]),
        ] as [([String], [String]?)])
    func listsAReplayMayTakeMustBeInPublicationOrder(names: [String], outOfOrder: [String]?) throws {
        let candidates = UpdateChain.candidates(try Self.updateList(names), local: v("1.0"), actual: v("1.10"))
        let pair = UpdateChain.firstOutOfOrder(candidates)
        #expect(pair.map { [$0.later.url.lastPathComponent, $0.earlier.url.lastPathComponent] } == outOfOrder)
    }

    /// The one change of a list holding `body`; nil when it changes nothing.
    static func change(_ body: String) throws -> Change? {
        let layout = try StorageLayout(baseURL: base)
        let json = #"{"from": "1.0", "to": "1.1", "changes": [\#(body)]}"#
        return try ChangeList.parse(
            Data(json.utf8),
            from: URL(string: "https://h.example/s/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json")!,
            layout: layout
        ).changes.first
    }

    static let c = "https://h.example/s/RXCacheContent/"

    @Test(arguments: [
        (#"{"oldPath": "", "newPath": "\#(c)a/b.txt", "redownload": false, "rename": false}"#, "add a/b.txt"),
        (#"{"oldPath": "", "newPath": "\#(c)folder"}"#, "add folder"),
        (#"{"oldPath": "\#(c)x.txt", "newPath": ""}"#, "remove x.txt"),
        (#"{"oldPath": "\#(c)x.txt", "newPath": "\#(c)y.txt", "rename": true}"#, "rename x.txt → y.txt"),
        (#"{"oldPath": "\#(c)x.txt", "newPath": "\#(c)d/x.txt", "rename": false}"#, "move x.txt → d/x.txt"),
        (#"{"oldPath": "\#(c)x.txt", "newPath": "\#(c)x.txt", "redownload": true}"#, "redownload x.txt"),
        (
            #"{"oldPath": "\#(c)x.txt", "newPath": "\#(c)d/y.txt", "redownload": "true", "rename": true}"#,
            "redownload x.txt → d/y.txt"
        ),
        (
            #"{"oldPath": "\#(c)docs", "newPath": "\#(c)docs", "redownload": true, "isDeepFolderRedownload": true}"#,
            "redownload folder docs"
        ),
        (
            #"{"oldPath": "\#(c)a", "newPath": "\#(c)b", "redownload": true, "isDeepFolderRedownload": true}"#,
            "redownload a → b"
        ),
    ])
    func changesAreClassifiedByTheirFields(body: String, expected: String) throws {
        #expect(try Self.change(body)?.description == expected)
    }

    @Test(arguments: [
        #"{"oldPath": "", "newPath": ""}"#,
        #"{"oldPath": "https://h.example/s/RXCacheContent/x.txt", "newPath": "https://h.example/s/RXCacheContent/x.txt"}"#,
    ])
    func changesThatChangeNothingAreDropped(body: String) throws {
        #expect(try Self.change(body) == nil)
    }

    @Test(arguments: [
        (
            #"{"oldPath": "", "newPath": "https://h.example/s/RXCacheContent/../../etc/cron.d/x"}"#,
            StorageFormatError.Code.unsafePath
        ),
        (#"{"oldPath": "", "newPath": "https://h.example/s/RXCacheContent/%2e%2e/x.txt"}"#, .unsafePath),
        (#"{"oldPath": "https://h.example/s/RXCacheContent", "newPath": ""}"#, .unsafePath),
        (#"{"oldPath": "", "newPath": "https://elsewhere.example/RXCacheContent/x.txt"}"#, .unsafePath),
        (
            #"{"oldPath": "https://h.example/s/RXCacheContent/a", "newPath": "https://h.example/s/RXCacheContent/a/b"}"#,
            .invalidChangeList
        ),
        (#"{"oldPath": 5, "newPath": ""}"#, .invalidChangeList),
        (
            #"{"oldPath": "", "newPath": "https://h.example/s/RXCacheContent/x.txt", "redownload": "maybe"}"#,
            .invalidChangeList
        ),
        (#"["not an object"]"#, .invalidChangeList),
        (
            #"{"oldPath": "\#(c)d", "newPath": "\#(c)d", "isDeepFolderRedownload": true, "files": {"../x.txt": {"sha256": "\#(String(repeating: "a", count: 64))", "size": 1}}}"#,
            .unsafePath
        ),
        (
            #"{"oldPath": "\#(c)d", "newPath": "\#(c)d", "isDeepFolderRedownload": true, "files": {"x.txt": {"size": 1}}}"#,
            .invalidChangeList
        ),
        (
            #"{"oldPath": "\#(c)d", "newPath": "\#(c)d", "isDeepFolderRedownload": true, "files": ["x.txt"]}"#,
            .invalidChangeList
        ),
        (#"{"oldPath": "\#(c)a.txt", "newPath": "", "files": {}}"#, .invalidChangeList),
    ])
    func unsafeOrMalformedChangesAreRefused(body: String, code: StorageFormatError.Code) {
        #expect {
            try Self.change(body)
        } throws: { error in
            (error as! StorageFormatError).code == code && (error as! StorageFormatError).message.contains("change #0")
        }
    }

    @Test func aFolderRedownloadNamesTheBytesOfEachFileItDownloads() throws {
        let hash = String(repeating: "b", count: 64)
        let change = try #require(
            try Self.change(
                #"{"oldPath": "\#(Self.c)site", "newPath": "\#(Self.c)site", "redownload": true, "isDeepFolderRedownload": true, "files": {"a.css": {"sha256": "\#(hash)", "size": 3}, "print/p.css": {"sha256": "\#(hash.uppercased())", "size": "7"}}}"#
            ))
        #expect(change.kind == .deepRedownload(try SafeRelativePath(validating: "site")))
        #expect(
            change.folderFingerprints == [
                try SafeRelativePath(validating: "site/a.css"): FileFingerprint(size: 3, sha256: hash),
                try SafeRelativePath(validating: "site/print/p.css"): FileFingerprint(size: 7, sha256: hash),
            ])
    }

    @Test func aChangeListWhoseToIsNotAboveFromIsRefused() throws {
        let layout = try StorageLayout(baseURL: Self.base)
        let json = #"{"from": "1.2", "to": "1.1", "changes": []}"#
        #expect(throws: StorageFormatError.self) {
            try ChangeList.parse(Data(json.utf8), from: URL(string: "https://h.example/s/c.json")!, layout: layout)
        }
    }

    @Test(arguments: [
        ("a.txt", false), ("folder", true), ("a.b/c", true), ("archive.tar.gz", false), (".hidden", true),
        ("name.", true),
    ])
    func theFolderRuleLooksForAnExtension(path: String, isFolder: Bool) throws {
        #expect(Change.namesFolder(try SafeRelativePath(validating: path)) == isFolder)
    }
}
