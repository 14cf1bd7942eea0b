import Archive
import Foundation
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// The change-list reader reads what a full parse read, from the bytes, one change at a time.
@Suite("Change lists are read from their bytes as a full parse read them", .timeLimit(.minutes(3)))
struct ChangeListReaderTests {
    static let url = URL(string: "https://h.example/s/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json")!
    static let c = "https://h.example/s/RXCacheContent/"
    static let hash = String(repeating: "0123456789abcdef", count: 4)

    static func parse(_ json: String) throws -> ChangeList {
        try ChangeList.parse(
            Data(json.utf8), from: url, layout: StorageLayout(baseURL: URL(string: "https://h.example/s/")!))
    }

    static let changes =
        #"[{"newPath": "\#(c)a.txt", "oldPath": "", "sha256": "\#(hash)", "size": 4}, {"oldPath": "\#(c)b", "newPath": "\#(c)c"}]"#

    @Test(arguments: [
        #"{"changes": \#(changes), "from": "1.0", "to": "1.1"}"#,
        #"{"to": 1.1, "changes": \#(changes), "from": 1.0}"#,
        #"{"from": "1.0", "to": "1.1", "changes": \#(changes), "extra": {"deep": [[{"x": null}]]}}"#,
        "\u{FEFF}" + #" {"from": "0.1", "changes": [], "from": "1.0", "to": "1.1", "changes": \#(changes)} "#,
    ])
    func keysMayComeInAnyOrderAndTheLastOfDuplicatesWins(json: String) throws {
        let list = try Self.parse(json)
        #expect(list.from == v("1.0") && list.to == v("1.1"))
        #expect(list.changes.map(\.description) == ["add a.txt", "move b → c"])
        #expect(list.changes[0].fingerprint == FileFingerprint(size: 4, sha256: Self.hash))
        #expect(list.changes.map(\.index) == [0, 1])
    }

    @Test func escapedKeysAndValuesReadAsTheirText() throws {
        let list = try Self.parse(
            #"{"from": "1.0", "to": "1.1", "changes": [{"old\u0050ath": "", "newPath": "\#(Self.c)d\u00e9j\u00e0.txt", "newPath": "\#(Self.c)sub\/caf\u0065.txt", "sha256": "\#(Self.hash.uppercased())", "size": "4"}]}"#
        )
        #expect(list.changes.map(\.description) == ["add sub/cafe.txt"])
        #expect(list.changes[0].fingerprint == FileFingerprint(size: 4, sha256: Self.hash))
    }

    @Test func aSyntaxErrorAnywhereFailsBeforeAnyChangeIsJudged() {
        // Change #0 is wrong too, but the text is checked whole first, as a full parse did.
        #expect {
            try Self.parse(#"{"from": "1.0", "to": "1.1", "changes": [{"oldPath": 5}, {"oldPath": "", "newPath": ]}"#)
        } throws: { error in
            let error = error as! StorageFormatError
            return error.code == .invalidChangeList
                && error.message.hasPrefix("changes_1.0_1.1.json: invalid JSON at byte ")
                && error.message.hasSuffix("; the storage must publish valid JSON")
        }
    }

    @Test(arguments: [
        (#"[1]"#, "expected a JSON object, found an array"),
        (#"{"to": "1.1", "changes": []}"#, #"required key "from" is missing or not a version"#),
        (#"{"from": [1], "to": "1.1", "changes": []}"#, #"required key "from" is missing or not a version"#),
        (#"{"from": "1.x", "to": "1.1", "changes": []}"#, #""from": '1.x' is not a version"#),
        (#"{"from": "1.1", "to": "1.1", "changes": []}"#, #""from" 1.1 is not below "to" 1.1"#),
        (#"{"from": "1.0", "to": "1.1", "changes": {}}"#, #"required key "changes" is missing or not an array"#),
        (#"{"from": "1.0", "to": "1.1", "changes": [{}, 7]}"#, "change #1 must be an object, found a number"),
        // A remove says so: a missing, mistyped or null newPath beside an oldPath is no remove.
        (
            #"{"from": "1.0", "to": "1.1", "changes": [{"oldPath": "\#(c)a.txt", "NewPath": "\#(c)b.txt"}]}"#,
            #"change #0 has an oldPath but no "newPath" string"#
        ),
        (
            #"{"from": "1.0", "to": "1.1", "changes": [{"oldPath": "\#(c)a.txt", "newPath": null, "rename": true}]}"#,
            #"change #0 has an oldPath but no "newPath" string"#
        ),
        (
            #"{"from": "1.0", "to": "1.1", "changes": [{"newPath": "\#(c)a.txt", "sha256": "\#(String(repeating: "\u{FF10}", count: 64))", "size": 1}]}"#,
            "change #0 has a malformed \"sha256\"/\"size\" pair"
        ),
        (
            #"{"from": "1.0", "to": "1.1", "changes": [{"newPath": "\#(c)a.txt", "sha256": "\#(hash)", "size": -1}]}"#,
            "change #0 has a malformed \"sha256\"/\"size\" pair"
        ),
        (
            #"{"from": "1.0", "to": "1.1", "changes": [{"oldPath": "\#(c)d", "newPath": "\#(c)d", "isDeepFolderRedownload": true, "files": {"a.txt": 5}}]}"#,
            #"change #0 "files" entry 'a.txt' needs a file path and a "sha256"/"size" pair"#
        ),
        (
            #"{"from": "1.0", "to": "1.1", "changes": [{"oldPath": "\#(c)d", "newPath": "\#(c)d", "isDeepFolderRedownload": true, "files": null}]}"#,
            #"change #0 "files" must be an object of relative path → {"sha256", "size"}, found null"#
        ),
        // A file redownloaded onto the content root (or the root onto a file): it deleted the file.
        (
            #"{"from": "1.0", "to": "1.1", "changes": [{"oldPath": "\#(c)docs/a.txt", "newPath": "\#(c)", "redownload": true}]}"#,
            "change #0 names RXCacheContent/ itself"
        ),
        (
            #"{"from": "1.0", "to": "1.1", "changes": [{"oldPath": "\#(c)", "newPath": "\#(c)x", "isDeepFolderRedownload": true}]}"#,
            "change #0 names RXCacheContent/ itself"
        ),
    ])
    func errorsNameTheListTheChangeAndTheFix(json: String, message: String) {
        #expect {
            try Self.parse(json)
        } throws: { error in
            (error as! StorageFormatError).message.hasPrefix("changes_1.0_1.1.json: ")
                && (error as! StorageFormatError).message.contains(message)
        }
    }

    /// The content root redownloaded (its two paths, or one of them) refreshes every file, as a
    /// deep redownload of it does; before, it was read as a file named "" and refreshed nothing.
    @Test(arguments: [(true, true), (true, false), (false, true)])
    func aRedownloadOfTheRootRefreshesEverything(oldPath: Bool, newPath: Bool) throws {
        let json =
            #"{"from": "1.0", "to": "1.1", "changes": [{"oldPath": "\#(oldPath ? Self.c : "")", "newPath": "\#(newPath ? Self.c : "")", "redownload": true}]}"#
        let list = try Self.parse(json)
        #expect(list.changes.map(\.kind) == [.deepRedownload(.root)])
    }

    @Test func aFolderRefreshKeepsItsFilesInTheText() throws {
        let json =
            #"{"from": "1.0", "to": "1.1", "changes": [{"oldPath": "\#(Self.c)site", "newPath": "\#(Self.c)web", "isDeepFolderRedownload": true, "files": {"a.css": {"size": 3, "sha256": "\#(Self.hash)"}, "x/b.css": {"sha256": "\#(Self.hash)", "size": 5, "note": [1]}, "a.css": {"sha256": "\#(Self.hash)", "size": 9}}}]}"#
        let list = try Self.parse(json)
        #expect(list.changes.first?.kind == .redownload(from: p("site"), to: p("web")))
        #expect(
            list.changes.first?.folderFingerprints == [
                p("web/a.css"): FileFingerprint(size: 9, sha256: Self.hash),
                p("web/x/b.css"): FileFingerprint(size: 5, sha256: Self.hash),
            ])
    }
}
