import Archive
import Foundation
import StorageServer
import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

@Suite("Hostile storages are refused and nothing outside the folder is touched", .timeLimit(.minutes(3)))
struct HostileStorageTests {
    /// Runs a sync from `from` against a copy of `version` damaged by `damage`, and checks that
    /// it fails with `code`, that the content is still `from` (or absent), and that nothing but
    /// the client's own files appeared in the client folder's parent.
    ///
    /// The damaged storage's integrity data is resealed (see ``StorageEditing/reseal(_:)``):
    /// the publisher itself is hostile, so these defenses must hold without hash mismatches.
    func expectRefused(
        from: String?, damaged version: String, code: SyncError.Code, mentioning text: String,
        _ damage: (String) throws -> Void
    ) async throws {
        try await withTemporaryDirectory { scratch in
            let storage = try copySnapshot(version, to: scratch + "/storage")
            try damage(storage.path)
            try StorageEditing.reseal(storage.path)
            try await withSyncHarness(serving: from ?? version) { harness in
                if from != nil { try await harness.sync() }
                harness.server.setRoot(storage)
                let before = allPaths(under: harness.root)
                await #expect {
                    try await harness.sync()
                } throws: { error in
                    let error = error as! SyncError
                    return error.code == code && error.message.contains(text)
                }
                if let from {
                    try harness.expectTree(is: from)
                } else {
                    #expect(!FileManager.default.fileExists(atPath: harness.content))
                }
                // Only the state database and the staging area may be new.
                let added = allPaths(under: harness.root).subtracting(before).filter {
                    !$0.hasPrefix("client/.content.content-sync") && !$0.hasPrefix("client/state.sqlite")
                }
                #expect(added.isEmpty, "written outside the content folder: \(added.sorted())")
                #expect(!FileManager.default.fileExists(atPath: scratch + "/evil.txt"))
                #expect(!FileManager.default.fileExists(atPath: harness.root + "/evil.txt"))
            }
        }
    }

    static let contentPrefix = "https://content-sync.invalid/ExampleStorage/RXCacheContent/"

    @Test(arguments: [
        "../../evil.txt", "%2e%2e/%2e%2e/evil.txt", "docs/..%2f..%2f..%2fevil.txt", "a%5C..%5Cevil.txt", "a%00.txt",
    ])
    func traversalInAChangePathIsRefused(escape: String) async throws {
        try await expectRefused(from: "1.0", damaged: "1.1", code: .unsafePath, mentioning: "changes_1.0_1.1.json") {
            storage in
            try rewrite(storage + "/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json") { text in
                text.replacingOccurrences(of: Self.contentPrefix + "docs/faq.md", with: Self.contentPrefix + escape)
            }
        }
    }

    @Test func aChangeNamingAnotherHostIsRefused() async throws {
        try await expectRefused(
            from: "1.0", damaged: "1.1", code: .unsafePath, mentioning: "not under the storage's RXCacheContent/"
        ) { storage in
            try rewrite(storage + "/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json") { text in
                text.replacingOccurrences(
                    of: Self.contentPrefix + "docs/faq.md", with: "https://evil.invalid/RXCacheContent/evil.txt")
            }
        }
    }

    func replaceArchive(in storage: String, declaredUnzippedMB: String? = nil, _ build: (ZipWriter) throws -> Void)
        throws
    {
        let path = storage + "/RXCacheContent.zip"
        try FileManager.default.removeItem(atPath: path)
        let writer = try ZipWriter(path: path)
        try build(writer)
        try writer.close()
        if let declaredUnzippedMB {
            try StorageEditing.editStatus(storage) { $0["unzippedArchiveSizeInMB"] = declaredUnzippedMB }
        }
    }

    @Test(arguments: ["RXCacheContent/../../evil.txt", "../evil.txt", "/tmp/evil.txt"])
    func aZipSlipEntryIsRefusedBeforeAnythingIsWritten(name: String) async throws {
        try await expectRefused(from: nil, damaged: "1.0", code: .unsafePath, mentioning: "RXCacheContent.zip") {
            storage in
            try replaceArchive(in: storage) { zip in
                try zip.addFile("RXCacheContent/ok.txt", contents: Array("fine".utf8))
                try zip.addRawEntry(name: name, contents: Array("gotcha".utf8), unixMode: 0o100644)
            }
        }
    }

    @Test func aSymlinkEntryIsRefused() async throws {
        try await expectRefused(from: nil, damaged: "1.0", code: .archive, mentioning: "link") { storage in
            try replaceArchive(in: storage) { zip in
                try zip.addFile("RXCacheContent/ok.txt", contents: Array("fine".utf8))
                try zip.addRawEntry(
                    name: "RXCacheContent/passwd", contents: Array("/etc/passwd".utf8), unixMode: 0o120777)
            }
        }
    }

    @Test func aZipBombAgainstItsDeclaredSizeIsRefused() async throws {
        try await expectRefused(from: nil, damaged: "1.0", code: .archive, mentioning: "RXCacheContent.zip") {
            storage in
            try replaceArchive(in: storage, declaredUnzippedMB: "0.5") { zip in
                try zip.addFile("RXCacheContent/zeros.bin", contents: [UInt8](repeating: 0, count: 24 << 20))
            }
        }
    }

    @Test func aRestoreWithMoreDeclaredThanTheDiskHoldsIsRefusedBeforeDownloading() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = try copySnapshot("1.0", to: scratch + "/storage")
            try StorageEditing.editStatus(storage.path) { $0["unzippedArchiveSizeInMB"] = "900000000" }
            try await withSyncHarness(storageRoot: storage) { harness in
                await #expect {
                    try await harness.sync()
                } throws: { error in
                    let error = error as! SyncError
                    return error.code == .insufficientSpace && error.message.contains("free")
                }
                #expect(
                    !harness.server.requests().contains { $0.path == "/RXCacheContent.zip" }, "nothing was downloaded")
                #expect(!FileManager.default.fileExists(atPath: harness.content))
            }
        }
    }

    @Test func aRolledBackStatusIsRefusedAndTheNewerContentKept() async throws {
        try await withSyncHarness(serving: "1.4") { harness in
            try await harness.sync()
            harness.serve("1.2")
            await #expect {
                try await harness.sync()
            } throws: { error in
                "\(error)".contains("roll back")
            }
            try harness.expectTree(is: "1.4")
        }
    }

    /// A redownload of the whole content (`RXCacheContent/` as both paths, `redownload: true`,
    /// not deep) refreshes every file, as the spec says of a folder's: each file of the version
    /// is fetched again. Read as a file named "", it fetched nothing and warned.
    @Test func aRedownloadOfTheWholeContentFetchesEveryFile() async throws {
        try await withTemporaryDirectory { scratch in
            let storage = try copySnapshot("1.1", to: scratch + "/storage")
            try rewrite(storage.path + "/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json") { text in
                text.replacingOccurrences(
                    of: #""changes" : ["#,
                    with:
                        #""changes" : [{"oldPath": "\#(Self.contentPrefix)", "newPath": "\#(Self.contentPrefix)", "redownload": true},"#
                )
            }
            try StorageEditing.reseal(storage.path)
            try await withSyncHarness(serving: "1.0") { harness in
                try await harness.sync()
                harness.server.setRoot(storage)
                let before = harness.contentDownloads().count
                let report = try await harness.sync()
                #expect(report.toVersion == (try CacheVersion("1.1")))
                #expect(report.warnings.isEmpty, "\(report.warnings)")
                try harness.expectTree(is: "1.1")
                let fetched = Set(harness.contentDownloads().dropFirst(before))
                let files = Set(ExampleStorageFixture.manifest("1.1").files.keys)
                #expect(fetched == files, "\(fetched.sorted()) of \(files.count)")
            }
        }
    }
}
