import Foundation
import StorageServer
import Testing

/// `sync-agent publish --upload` with the real rclone, to a local-path remote and to
/// `rclone serve webdav` on loopback; and publish's warnings and `--quiet`.
@Suite(
    "sync-agent publish --upload hands the storage to rclone, status last, deleting nothing", .timeLimit(.minutes(3)))
struct PublishUploadTests {
    static let base = "https://publish.invalid/store/"
    static let example = SyncAgentCLITests.exampleStorage

    /// rclone's configuration for a test: no config file of the machine's, remotes from variables.
    static func rcloneEnvironment(_ scratch: String, _ remotes: [String: String] = [:]) throws -> [String: String] {
        let config = scratch + "/rclone.conf"
        if !FileManager.default.fileExists(atPath: config) { try Data().write(to: URL(fileURLWithPath: config)) }
        return ["RCLONE_CONFIG": config, "RCLONE_CONFIG_LOCALREMOTE_TYPE": "local"].merging(remotes) { _, given in given
        }
    }

    func publish(
        _ version: String, storage: String, scratch: String, content: String? = nil, _ extra: [String] = [],
        environment: [String: String]
    ) async throws -> CommandResult {
        var arguments = [
            "publish", "--storage", storage, "--content", content ?? Self.example + "/\(version)/RXCacheContent",
            "--version", version, "--base-url", Self.base,
        ]
        if version == "1.0" { arguments.append("--init") }
        return try await SyncAgentBinary.run(arguments + extra, scratch: scratch, environment: environment)
    }

    /// Every file under `root` (relative path → bytes), the publish's work folder left out.
    func files(under root: String) throws -> [String: Data] {
        var result: [String: Data] = [:]
        let enumerator = try #require(FileManager.default.enumerator(atPath: root))
        while let relative = enumerator.nextObject() as? String {
            if relative.hasPrefix(".content-sync-publish") { continue }
            var isFolder: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: root + "/" + relative, isDirectory: &isFolder)
            if !isFolder.boolValue {
                result[relative] = try Data(contentsOf: URL(fileURLWithPath: root + "/" + relative))
            }
        }
        return result
    }

    /// Each file of the local storage is on the remote with the same bytes.
    func expectUploaded(_ storage: String, to remote: String, sourceLocation: SourceLocation = #_sourceLocation) throws
    {
        let local = try files(under: storage)
        let uploaded = try files(under: remote)
        #expect(!local.isEmpty, sourceLocation: sourceLocation)
        for (path, bytes) in local {
            #expect(uploaded[path] == bytes, "\(path) on the remote", sourceLocation: sourceLocation)
        }
    }

    func status(_ storage: String) throws -> Data {
        try Data(contentsOf: URL(fileURLWithPath: storage + "/RXCacheConfig/cacheStatus.json"))
    }

    @Test func anUploadedStorageIsCompleteKeepsWhatOlderVersionsHadAndAClientSyncsFromIt() async throws {
        try await withScratch { scratch in
            let storage = scratch + "/storage"
            let remote = scratch + "/remote"
            let environment = try Self.rcloneEnvironment(scratch)
            let first = try await publish(
                "1.0", storage: storage, scratch: scratch, ["--upload", "localremote:" + remote],
                environment: environment)
            #expect(first.status == 0, "\(first.stderr)")
            #expect(
                first.stdout.contains(
                    "uploaded the content (RXCacheContent/, RXCacheContent.zip, RXCacheConfig/contentManifest.json) to localremote:"
                ))
            #expect(
                first.stdout.split(separator: "\n").last?.hasSuffix("; uploaded to localremote:" + remote) == true,
                "\(first.stdout)")
            try expectUploaded(storage, to: remote)
            let obsolete = try Data(contentsOf: URL(fileURLWithPath: remote + "/RXCacheContent/docs/obsolete.txt"))
            // Something the storage never had, on the remote: an upload copies and deletes nothing.
            try Data("placed by hand".utf8).write(to: URL(fileURLWithPath: remote + "/RXCacheContent/by-hand.txt"))

            try await withStorageServer(root: URL(fileURLWithPath: remote)) { server async throws in
                let sync = [
                    "sync", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/content", "--state",
                    scratch + "/state.sqlite",
                ]
                for version in ["1.1", "1.2"] {
                    let result = try await publish(
                        version, storage: storage, scratch: scratch, ["--upload", "localremote:" + remote],
                        environment: environment)
                    #expect(result.status == 0, "\(result.stderr)")
                    try expectUploaded(storage, to: remote)
                    let synced = try await SyncAgentBinary.run(sync, scratch: scratch)
                    #expect(synced.status == 0, "\(synced.stderr)")
                    #expect(
                        try files(under: scratch + "/content")
                            == files(under: Self.example + "/\(version)/RXCacheContent"), "a client at \(version)")
                }
            }
            // 1.1 removed docs/obsolete.txt; the change list that says so, and the file, stay for
            // clients that are behind.
            #expect(
                try Data(contentsOf: URL(fileURLWithPath: remote + "/RXCacheContent/docs/obsolete.txt")) == obsolete)
            #expect(
                FileManager.default.fileExists(atPath: remote + "/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json")
            )
            #expect(FileManager.default.fileExists(atPath: remote + "/RXCacheContent/by-hand.txt"))
            #expect(!FileManager.default.fileExists(atPath: storage + "/RXCacheContent/docs/obsolete.txt"))
        }
    }

    /// The content step must not take a same-size file for unchanged: plain WebDAV has no hashes
    /// and no modification times, and rclone would then compare sizes only.
    @Test func aWebDAVUploadSendsTheStatusLastAndAFileEditedAtTheSameSize() async throws {
        try await withScratch { scratch in
            let storage = scratch + "/storage"
            let root = scratch + "/dav"
            try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
            let content = scratch + "/content-src"
            try FileManager.default.copyItem(atPath: Self.example + "/1.0/RXCacheContent", toPath: content)
            _ = try Self.rcloneEnvironment(scratch)
            try await withWebDAVServer(root: root, scratch: scratch) { server in
                let environment = try Self.rcloneEnvironment(
                    scratch,
                    [
                        "RCLONE_CONFIG_DAV_TYPE": "webdav", "RCLONE_CONFIG_DAV_URL": server.url,
                        "RCLONE_CONFIG_DAV_VENDOR": "other",
                    ])
                let first = try await publish(
                    "1.0", storage: storage, scratch: scratch, content: content, ["--upload", "dav:store"],
                    environment: environment)
                #expect(first.status == 0, "\(first.stderr)")
                #expect(first.stdout.contains("(the remote has no hashes: every file sent)"), "\(first.stdout)")
                try expectUploaded(storage, to: root + "/store")

                // Same length, other bytes; and a file moved, so 1.1 has a change list.
                let readme = content + "/README.txt"
                var bytes = try Data(contentsOf: URL(fileURLWithPath: readme))
                bytes[0] = bytes[0] == 0x41 ? 0x42 : 0x41
                try bytes.write(to: URL(fileURLWithPath: readme))
                try FileManager.default.moveItem(
                    atPath: content + "/docs/obsolete.txt", toPath: content + "/docs/moved.txt")
                let putsBefore = try server.puts().count
                let second = try await publish(
                    "1.1", storage: storage, scratch: scratch, content: content, ["--upload", "dav:store"],
                    environment: environment)
                #expect(second.status == 0, "\(second.stderr)")
                try expectUploaded(storage, to: root + "/store")
                #expect(try Data(contentsOf: URL(fileURLWithPath: root + "/store/RXCacheContent/README.txt")) == bytes)

                // The server's own log of PUTs: content, then change lists, then the update list, the status last.
                let puts = try server.puts().dropFirst(putsBefore).map { $0 }
                func lastPut(_ matching: (String) -> Bool) -> Int { puts.lastIndex(where: matching) ?? -1 }
                func firstPut(_ matching: (String) -> Bool) -> Int { puts.firstIndex(where: matching) ?? Int.max }
                let isContent = { (path: String) in
                    path.hasPrefix("/store/RXCacheContent") || path == "/store/RXCacheConfig/contentManifest.json"
                }
                let changeLists = { (path: String) in path.hasPrefix("/store/RXCacheConfig/HistoryOfVersions/") }
                #expect(puts.last == "/store/RXCacheConfig/cacheStatus.json", "\(puts)")
                #expect(puts.filter { $0 == "/store/RXCacheConfig/cacheStatus.json" }.count == 1)
                #expect(
                    puts.contains("/store/RXCacheContent/docs/moved.txt") && puts.contains("/store/RXCacheContent.zip"))
                #expect(puts.contains("/store/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json"))
                #expect(lastPut(isContent) < firstPut(changeLists), "\(puts)")
                #expect(
                    lastPut(changeLists) < firstPut { $0 == "/store/RXCacheConfig/listOfURLsToUpdatesByVersion.json" },
                    "\(puts)")
                #expect(
                    lastPut { $0 == "/store/RXCacheConfig/listOfURLsToUpdatesByVersion.json" } < puts.count - 1,
                    "\(puts)")
            }
        }
    }

    @Test func aFailedStepLeavesTheRemoteAtThePreviousStatusAndTheSameCommandFinishesTheUpload() async throws {
        try await withScratch { scratch in
            let storage = scratch + "/storage"
            let remote = scratch + "/remote"
            // One attempt per step: the failure below is certain, and retrying it only takes time.
            let environment = try Self.rcloneEnvironment(scratch).merging([
                "RCLONE_RETRIES": "1", "RCLONE_LOW_LEVEL_RETRIES": "1",
            ]) { _, given in given }
            #expect(try await SyncAgentBinary.run(["keygen", "--out", scratch + "/key"], scratch: scratch).status == 0)
            let signed = try await publish(
                "1.0", storage: storage, scratch: scratch,
                ["--upload", "localremote:" + remote, "--sign-key", scratch + "/key"],
                environment: environment)
            #expect(signed.status == 0, "\(signed.stderr)")
            let oldStatus = try status(remote)
            let oldUpdateList = try Data(
                contentsOf: URL(fileURLWithPath: remote + "/RXCacheConfig/listOfURLsToUpdatesByVersion.json"))
            // A file where the change lists' folder must go: rclone cannot create it.
            let blocker = remote + "/RXCacheConfig/HistoryOfVersions"
            try Data("in the way".utf8).write(to: URL(fileURLWithPath: blocker))

            let failed = try await publish(
                "1.1", storage: storage, scratch: scratch, ["--upload", "localremote:" + remote],
                environment: environment)
            #expect(failed.status == 11, "\(failed.stderr)")
            // What was published here is still said: the upload step that went, the summary, and
            // (1.0 was signed, 1.1 is not) the warning.
            #expect(
                failed.stdout.hasPrefix("uploaded the content") && !failed.stdout.contains("change lists"),
                "\(failed.stdout)")
            #expect(
                failed.stdout.contains("\npublished 1.1 (minimal 1.0) over 1.0:")
                    && !failed.stdout.contains("uploaded to"), "\(failed.stdout)")
            let stderr = failed.stderr.split(separator: "\n", omittingEmptySubsequences: false)
            #expect(
                stderr.count == 3 && stderr[0].hasPrefix("warning: ") && stderr[0].contains("trust downgrade"),
                "\(failed.stderr)")
            let line = stderr.dropFirst().joined(separator: "\n")
            #expect(
                line.hasPrefix(
                    "sync-agent: uploading the change lists (RXCacheConfig/HistoryOfVersions/) failed (step 2 of 4): rclone copy to localremote:"
                ),
                "\(line)")
            #expect(
                line.contains("exited with 1: ") && line.contains("not a directory"),
                "rclone's exit code and last words: \(line)")
            #expect(
                line.contains(
                    "RXCacheConfig/cacheStatus.json was not uploaded, so clients still see the remote's previous version"
                ), "\(line)")
            #expect(
                line.hasSuffix("holds 1.1: run the same publish again to upload it\n")
                    && line.split(separator: "\n").count == 1, "\(line)")
            // The content went first; what names it did not.
            #expect(try status(remote) == oldStatus)
            #expect(
                try Data(contentsOf: URL(fileURLWithPath: remote + "/RXCacheConfig/listOfURLsToUpdatesByVersion.json"))
                    == oldUpdateList)
            #expect(
                try Data(contentsOf: URL(fileURLWithPath: remote + "/RXCacheContent.zip"))
                    == Data(contentsOf: URL(fileURLWithPath: storage + "/RXCacheContent.zip")))
            #expect(try status(storage) != oldStatus, "published here")

            try FileManager.default.removeItem(atPath: blocker)
            let rerun = try await publish(
                "1.1", storage: storage, scratch: scratch, ["--upload", "localremote:" + remote],
                environment: environment)
            #expect(rerun.status == 0, "\(rerun.stderr)")
            #expect(
                rerun.stdout.contains("1.1 (minimal 1.0) is already published with this content: nothing to publish;"),
                "\(rerun.stdout)")
            #expect(rerun.stdout.hasSuffix("; uploaded to localremote:\(remote)\n"), "\(rerun.stdout)")
            try expectUploaded(storage, to: remote)
        }
    }

    @Test func aMissingRcloneOrAnUnknownRemoteIsRefusedBeforeAnythingIsPublished() async throws {
        try await withScratch { scratch in
            let storage = scratch + "/storage"
            let environment = try Self.rcloneEnvironment(scratch)
            #expect(try await publish("1.0", storage: storage, scratch: scratch, environment: environment).status == 0)
            let before = try files(under: storage)

            let missing = try await publish(
                "1.1", storage: storage, scratch: scratch,
                ["--upload", "localremote:" + scratch + "/remote", "--rclone", scratch + "/no-rclone"],
                environment: environment)
            #expect(missing.status == 6, "\(missing.stderr)")
            #expect(
                missing.stderr.hasPrefix("sync-agent: --rclone \(scratch)/no-rclone: No such file or directory")
                    && missing.stderr.contains("apt-get install rclone"),
                "\(missing.stderr)")
            let notOnPath = try await SyncAgentBinary.run(
                [
                    "publish", "--storage", storage, "--content", Self.example + "/1.1/RXCacheContent", "--version",
                    "1.1",
                    "--base-url", Self.base, "--upload", "localremote:x",
                ],
                scratch: scratch, environment: environment.merging(["PATH": scratch]) { _, given in given })
            #expect(
                notOnPath.status == 6
                    && notOnPath.stderr.contains(
                        "there is no 'rclone' on PATH; install it with `apt-get install rclone`"),
                "\(notOnPath.stderr)")

            let unknown = try await publish(
                "1.1", storage: storage, scratch: scratch, ["--upload", "nosuchremote:store"], environment: environment)
            #expect(unknown.status == 11, "\(unknown.stderr)")
            #expect(
                unknown.stderr.contains("rclone cannot use this remote")
                    && unknown.stderr.contains("didn't find section in config file")
                    && unknown.stderr.hasSuffix("nothing was published\n"), "\(unknown.stderr)")
            #expect(try files(under: storage) == before, "nothing was published")
        }
    }

    @Test func republishingASignedStorageUnsignedWarnsAndQuietPrintsNothingElse() async throws {
        try await withScratch { scratch in
            let storage = scratch + "/storage"
            let remote = scratch + "/remote"
            let environment = try Self.rcloneEnvironment(scratch)
            #expect(try await SyncAgentBinary.run(["keygen", "--out", scratch + "/key"], scratch: scratch).status == 0)
            let signed = try await publish(
                "1.0", storage: storage, scratch: scratch, ["--sign-key", scratch + "/key", "--quiet"],
                environment: environment)
            #expect(signed.status == 0 && signed.stdout.isEmpty && signed.stderr.isEmpty, "\(signed)")
            let keyID = try #require(
                String(contentsOfFile: scratch + "/key.pub", encoding: .utf8).firstMatch(of: /key id ([0-9a-f]+)/)?.1)

            let dry = try await publish(
                "1.1", storage: storage, scratch: scratch, ["--dry-run"], environment: environment)
            #expect(dry.status == 0 && dry.stdout.hasPrefix("would publish 1.1"), "\(dry)")
            #expect(
                dry.stderr.hasPrefix(
                    "warning: the previous \(storage)/RXCacheConfig/cacheStatus.json was signed (key id \(keyID)) and 1.1's would not be"
                ), "\(dry.stderr)")

            let unsigned = try await publish(
                "1.1", storage: storage, scratch: scratch, ["--quiet", "--upload", "localremote:" + remote],
                environment: environment)
            #expect(unsigned.status == 0, "\(unsigned.stderr)")
            #expect(unsigned.stdout.isEmpty, "--quiet: no summary and no upload steps: \(unsigned.stdout)")
            #expect(
                unsigned.stderr
                    == "warning: the previous \(storage)/RXCacheConfig/cacheStatus.json was signed (key id \(keyID)) and 1.1's is not: "
                    + "clients that trust a key will refuse 1.1 as a trust downgrade and stay at 1.0. Sign with --sign-key FILE, the private key of "
                    + "\(keyID) (from `sync-agent keygen`); publish the next version signed to bring those clients along\n"
            )
            #expect(try status(remote) == status(storage), "--quiet still uploads")

            // Unsigned after unsigned: nothing to warn about.
            let again = try await publish("1.2", storage: storage, scratch: scratch, environment: environment)
            #expect(again.status == 0 && again.stderr.isEmpty && again.stdout.hasPrefix("published 1.2"), "\(again)")
        }
    }

    /// (A changed base that the status shows plainly: PublishCommandTests.aChangedBaseURLWarns….)
    @Test func aPreviousStatusWhoseURLsShowNoBaseWarns() async throws {
        try await withScratch { scratch in
            let storage = scratch + "/storage"
            let environment = try Self.rcloneEnvironment(scratch)
            #expect(try await publish("1.0", storage: storage, scratch: scratch, environment: environment).status == 0)

            // A status whose URLs do not show its base (not this publisher's layout): the base
            // cannot be compared, so the publish goes on, with a warning.
            let path = storage + "/RXCacheConfig/cacheStatus.json"
            var object = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
            object["urlAtListOfURLsToUpdatesByVersion"] = "https://old.invalid/lists/updates.json"
            object["urlAtZipArchiveOfCacheContent"] = "https://old.invalid/content.zip"
            try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path))
            let moved = try await publish(
                "1.1", storage: storage, scratch: scratch, ["--quiet"], environment: environment)
            #expect(moved.status == 0, "\(moved.stderr)")
            #expect(moved.stdout.isEmpty)
            #expect(
                moved.stderr == "warning: the previous \(path) named URLs outside --base-url \(Self.base) "
                    + "(https://old.invalid/lists/updates.json, https://old.invalid/content.zip): clients will fetch 1.1's update list and archive "
                    + "under \(Self.base) instead. If the storage did not move, --base-url is likely mistyped (another scheme, host, branch or folder)\n"
            )
        }
    }
}

/// Runs `body` with `rclone serve webdav` serving `root`, and stops the server afterwards.
func withWebDAVServer<T>(root: String, scratch: String, _ body: (WebDAVServer) async throws -> T) async throws -> T {
    let server = try await WebDAVServer(root: root, scratch: scratch)
    do {
        let result = try await body(server)
        await server.stop()
        return result
    } catch {
        await server.stop()
        throw error
    }
}

/// `rclone serve webdav` on a loopback port of its choosing, logging every request.
final class WebDAVServer: Sendable {
    let process: ChildProcess
    let log: String
    /// `http://127.0.0.1:PORT/`.
    let url: String

    init(root: String, scratch: String) async throws {
        let rclone = try #require(
            ["/usr/bin/rclone", "/usr/local/bin/rclone"].first { FileManager.default.isExecutableFile(atPath: $0) },
            "rclone is not installed (make test installs it: apt-get install rclone)")
        log = scratch + "/webdav.log"
        process = try ChildProcess(
            rclone, ["serve", "webdav", root, "--addr", "127.0.0.1:0", "-v", "--config", scratch + "/rclone.conf"],
            stderr: log)
        for _ in 0..<500 {
            if let text = try? String(contentsOfFile: log, encoding: .utf8),
                let match = text.firstMatch(of: /started on (http:\/\/127\.0\.0\.1:[0-9]+\/)/)
            {
                url = String(match.1)
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        process.send(SIGKILL)
        _ = await process.exitStatus()
        throw CocoaError(.fileReadUnknown)
    }

    /// The paths PUT so far, in the order the server received them.
    func puts() throws -> [String] {
        try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").compactMap { line in
            line.firstMatch(of: #/INFO  : (/.*): PUT from /#).map { String($0.1) }
        }
    }

    /// Stops the server and waits for it.
    func stop() async {
        process.send(SIGTERM)
        _ = await process.exitStatus()
    }
}
