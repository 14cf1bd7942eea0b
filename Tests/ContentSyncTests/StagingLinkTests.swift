import CLinux
import Foundation
import StorageServer
import Testing
import Transport

@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

/// Links planted at the files an update writes again by name (a partial download and its
/// entity-tag sidecar): the writes never go through them, the update succeeds, and whatever the
/// links point at is left as it was. A staging folder another user made is refused.
@Suite("links planted in the staging area")
struct StagingLinkTests {
    /// What to plant at a name: a symlink to an existing outside file, a dangling symlink, or a
    /// hard link to an outside file.
    enum Plant: String, CaseIterable, Sendable {
        case symlinkToFile, danglingSymlink, hardLink

        func plant(at path: String, outside: String) throws {
            switch self {
            case .symlinkToFile:
                try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: outside + "/victim")
            case .danglingSymlink:
                try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: outside + "/created")
            case .hardLink:
                try FileManager.default.linkItem(atPath: outside + "/victim", toPath: path)
            }
        }
    }

    @Test(
        "a restore with links at archive.zip.part and its .etag writes nothing through them", arguments: Plant.allCases)
    func restoreIgnoresPlantedLinks(plant: Plant) async throws {
        try await withSyncHarness(serving: "1.2") { harness in
            let outside = harness.root + "/outside"
            try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
            try Data("precious data\n".utf8).write(to: URL(fileURLWithPath: outside + "/victim"))
            let staging = StagingArea(contentDirectory: harness.content)
            try FileManager.default.createDirectory(atPath: staging.root, withIntermediateDirectories: true)
            try plant.plant(at: staging.archive, outside: outside)
            if plant != .hardLink {
                try FileManager.default.createSymbolicLink(
                    atPath: staging.archive + ".etag", withDestinationPath: outside + "/etag-target")
            }
            let report = try await harness.sync()
            #expect(report.toVersion.text == "1.2")
            #expect(try harness.tree() == ExampleStorageFixture.manifest("1.2"))
            #expect(try String(contentsOfFile: outside + "/victim", encoding: .utf8) == "precious data\n")
            #expect(Set(try FileManager.default.contentsOfDirectory(atPath: outside)) == ["victim"])
        }
    }

    @Test(
        "a download to a partial file with a link planted at it or its .etag starts over and writes nothing outside",
        arguments: Plant.allCases)
    func partialDownloadIgnoresPlantedLinks(plant: Plant) async throws {
        try await withTemporaryDirectory { root in
            let storage = root + "/storage"
            try FileManager.default.createDirectory(atPath: storage, withIntermediateDirectories: true)
            let body = Data((0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
            try body.write(to: URL(fileURLWithPath: storage + "/big.bin"))
            let outside = root + "/outside"
            try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
            try Data("precious data\n".utf8).write(to: URL(fileURLWithPath: outside + "/victim"))
            try FileManager.default.createDirectory(atPath: root + "/partial", withIntermediateDirectories: true)
            let partial = root + "/partial/big.part"
            try plant.plant(at: partial, outside: outside)
            try FileManager.default.createSymbolicLink(
                atPath: partial + ".etag", withDestinationPath: outside + "/victim")
            try await withStorageServer(root: URL(fileURLWithPath: storage)) { server in
                let downloader = VerifiedDownloader(
                    transport: try CurlTransport(), fingerprints: FingerprintCache())
                _ = try await downloader.download(
                    server.url(for: "big.bin"), to: partial,
                    expected: FileFingerprint(size: Int64(body.count), sha256: SHA256Hex.of(body)), what: "big.bin")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: partial)) == body)
            #expect(FileSystem.status(of: partial).map { $0.st_mode & S_IFMT == S_IFREG && $0.st_nlink == 1 } == true)
            #expect(try String(contentsOfFile: outside + "/victim", encoding: .utf8) == "precious data\n")
            #expect(Set(try FileManager.default.contentsOfDirectory(atPath: outside)) == ["victim"])
        }
    }

    /// The entity-tag sidecar of a resumable download: kept for an unencoded body, dropped (an
    /// older one too) for a content-encoded one, whose tag names bytes the file does not hold.
    @Test(
        "a resumable download keeps its entity tag only for an unencoded body",
        arguments: [
            (nil as String?, true), ("identity", true), (" , identity", true), ("gzip", false),
            ("GZIP, identity", false), ("identity, br", false),
        ])
    func theEntityTagSidecarIsKeptOnlyForAnUnencodedBody(encoding: String?, kept: Bool) async throws {
        try await withTemporaryDirectory { root in
            let partial = root + "/big.part"
            try Data("\"older\"".utf8).write(to: URL(fileURLWithPath: partial + ".etag"))
            let downloader = VerifiedDownloader(transport: try CurlTransport(), fingerprints: FingerprintCache())
            let options = downloader.resumableOptions(partialPath: partial, resumableFrom: 0)
            var headers = ["etag": "\"new\"", "content-length": "10"]
            headers["content-encoding"] = encoding
            let responseStarts = try #require(options.onResponseStart)
            responseStarts(200, headers)
            let sidecar = try? String(contentsOfFile: partial + ".etag", encoding: .utf8)
            // The tag, then the whole length its answer declared.
            #expect(sidecar == (kept ? "\"new\"\n10\n" : nil), "\(encoding ?? "no Content-Encoding")")
            // A later run reads both back.
            let again = downloader.resumableOptions(partialPath: partial, resumableFrom: 0)
            #expect(again.resumeETag == (kept ? "\"new\"" : nil))
            #expect(again.resumeLength == (kept ? 10 : nil))
        }
    }

    /// A link, a file or a FIFO at `partial/` is the engine's to remove, never to follow: it
    /// once failed every replay with "File exists" until a reset (an outside audit).
    @Test(arguments: ["symlink", "file", "fifo"])
    func aWrongKindAtPartialIsReplacedByTheFolder(kind: String) throws {
        let root = NSTemporaryDirectory() + "staging-partial-\(getpid())-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        let outside = root + "/outside"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try Data("precious".utf8).write(to: URL(fileURLWithPath: outside + "/victim"))
        let staging = StagingArea(contentDirectory: root + "/mirror")
        try FileManager.default.createDirectory(atPath: staging.root, withIntermediateDirectories: true)
        switch kind {
        case "symlink":
            try FileManager.default.createSymbolicLink(atPath: staging.partial, withDestinationPath: outside)
        case "file": try Data("x".utf8).write(to: URL(fileURLWithPath: staging.partial))
        default: #expect(mkfifo(staging.partial, 0o644) == 0)
        }
        try staging.prepare()
        #expect(FileSystem.status(of: staging.partial).map { $0.st_mode & S_IFMT == S_IFDIR } == true)
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside) == ["victim"])
        #expect(try String(contentsOfFile: outside + "/victim", encoding: .utf8) == "precious")
    }

    @Test("a staging folder that another user made is refused, naming it and the fix")
    func aStagingFolderOfAnotherUserIsRefused() async throws {
        guard geteuid() == 0 else { return } // only root can give a folder away
        try await withSyncHarness(serving: "1.2") { harness in
            let staging = StagingArea(contentDirectory: harness.content)
            try FileManager.default.createDirectory(atPath: staging.root, withIntermediateDirectories: true)
            #expect(chown(staging.root, 65534, 65534) == 0)
            let error = await #expect(throws: SyncError.self) { try await harness.sync() }
            #expect(error?.code == .configuration)
            #expect(
                error?.message.contains("belongs to another user (uid 65534); remove it") == true,
                "\(error?.message ?? "")")
            #expect(!FileManager.default.fileExists(atPath: harness.content))
            try FileManager.default.removeItem(atPath: staging.root)
            #expect(try await harness.sync().toVersion.text == "1.2")
        }
    }
}
