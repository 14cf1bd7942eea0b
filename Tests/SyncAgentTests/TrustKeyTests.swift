import Foundation
import StorageServer
import Testing

/// Keys are told apart: a private key where a public one is expected (or the reverse) is refused
/// with an error that names the file and the right one, before anything is fetched or written.
@Suite("sync-agent tells private and public keys apart", .timeLimit(.minutes(3)))
struct TrustKeyTests {
    static let example = SyncAgentCLITests.exampleStorage

    func keygen(_ scratch: String) async throws -> String {
        let key = scratch + "/publisher.key"
        let result = try await SyncAgentBinary.run(["keygen", "--out", key], scratch: scratch)
        #expect(result.status == 0, "\(result.stderr)")
        return key
    }

    /// `sync` of `scratch/content` from `server`, trusting the key file `key`.
    func sync(_ server: StorageServer, _ scratch: String, trusting key: String) async throws -> CommandResult {
        try await SyncAgentBinary.run(
            [
                "sync", "--base-url", server.baseURL!.absoluteString, "--dir", scratch + "/content",
                "--state", scratch + "/state.sqlite", "--trust-key", key,
            ], scratch: scratch)
    }

    @Test func aPrivateKeyPassedAsTheTrustedKeyIsRefusedAndNamed() async throws {
        try await withScratch { scratch in
            let key = try await keygen(scratch)
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.2")) { server async throws in
                let result = try await sync(server, scratch, trusting: key)
                #expect(result.status == 6, "\(result.stderr)")
                #expect(
                    result.stderr.contains("--trust-key \(key)") && result.stderr.contains("private key"),
                    "\(result.stderr)")
                #expect(result.stderr.contains(".pub"), "the message names the public key file: \(result.stderr)")
                #expect(server.requests().isEmpty, "nothing is fetched")
            }
        }
    }

    @Test func anUnlabelledPrivateKeyWithItsPublicKeyBesideItIsRefusedToo() async throws {
        try await withScratch { scratch in
            let key = try await keygen(scratch)
            // A key file from before the labels: the bare base64 line, mode 0600, with key.pub beside it.
            let bare =
                try String(contentsOfFile: key, encoding: .utf8).split(separator: "\n").last.map(String.init) ?? ""
            try (bare + "\n").write(toFile: key, atomically: false, encoding: .utf8)
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.2")) { server async throws in
                let result = try await sync(server, scratch, trusting: key)
                #expect(result.status == 6, "\(result.stderr)")
                #expect(
                    result.stderr.contains("looks like a private key") && result.stderr.contains("\(key).pub"),
                    "\(result.stderr)")
            }
        }
    }

    @Test func aPublicKeyPassedAsTheSigningKeyIsRefusedAndNothingIsPublished() async throws {
        try await withScratch { scratch in
            let key = try await keygen(scratch)
            let result = try await SyncAgentBinary.run(
                [
                    "publish", "--storage", scratch + "/storage", "--content", Self.example + "/1.0/RXCacheContent",
                    "--version", "1.0", "--base-url", "https://example.invalid/storage/", "--init", "--sign-key",
                    key + ".pub",
                ], scratch: scratch)
            #expect(result.status == 6, "\(result.stderr)")
            #expect(
                result.stderr.contains("--sign-key \(key).pub") && result.stderr.contains("public key"),
                "\(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: scratch + "/storage"))
        }
    }

    /// A key file that is a folder, a FIFO, binary or huge: exit 6 saying which, never a hang on
    /// the FIFO, a whole read of the huge one, or Foundation's "You don't have permission".
    @Test(arguments: [
        ("folder", "is a folder"), ("fifo", "is not a regular file"), ("binary", "is not text"),
        ("huge", "more than a file of this kind holds"),
    ])
    func keyFilesThatAreNoKeysSayWhy(kind: String, phrase: String) async throws {
        try await withScratch { scratch in
            let path = scratch + "/key-" + kind
            switch kind {
            case "folder": try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            case "fifo": #expect(mkfifo(path, 0o600) == 0)
            // Not FF FE: that starts UTF-16 text, named as such (SmallTextFileTests).
            case "binary": try Data([0x00, 0xFF, 0x81, 0xFE, 0x01]).write(to: URL(fileURLWithPath: path))
            default: try Data(repeating: 0x41, count: 1 << 20).write(to: URL(fileURLWithPath: path))
            }
            let publish = try await SyncAgentBinary.run(
                [
                    "publish", "--storage", scratch + "/storage", "--content", Self.example + "/1.0/RXCacheContent",
                    "--version", "1.0", "--base-url", "https://example.invalid/storage/", "--init", "--sign-key", path,
                ], scratch: scratch)
            #expect(publish.status == 6, "\(publish.stderr)")
            #expect(
                publish.stderr.contains("--sign-key \(path) ") && publish.stderr.contains(phrase), "\(publish.stderr)")
            let sync = try await SyncAgentBinary.run(
                ["sync", "--base-url", "http://127.0.0.1:9/", "--dir", scratch + "/d", "--trust-key", path],
                scratch: scratch)
            #expect(sync.status == 6, "\(sync.stderr)")
            #expect(sync.stderr.contains("\(path) ") && sync.stderr.contains(phrase), "\(sync.stderr)")
        }
    }

    @Test func keyFilesAreLabelledAndTheLabelledPairStillSignsAndVerifies() async throws {
        try await withScratch { scratch in
            let key = try await keygen(scratch)
            #expect(try String(contentsOfFile: key, encoding: .utf8).hasPrefix("# content-sync ed25519 private key"))
            #expect(
                try String(contentsOfFile: key + ".pub", encoding: .utf8).hasPrefix(
                    "# content-sync ed25519 public key (key id "))
            let storage = scratch + "/storage"
            let published = try await SyncAgentBinary.run(
                [
                    "publish", "--storage", storage, "--content", Self.example + "/1.0/RXCacheContent",
                    "--version", "1.0", "--base-url", "https://example.invalid/storage/", "--init", "--sign-key", key,
                ], scratch: scratch)
            #expect(published.status == 0, "\(published.stderr)")
            try await withStorageServer(root: URL(fileURLWithPath: storage)) { server async throws in
                let synced = try await sync(server, scratch, trusting: key + ".pub")
                #expect(synced.status == 0, "\(synced.stderr)")
                #expect(FileManager.default.fileExists(atPath: scratch + "/content/README.txt"))
            }
        }
    }

    /// Trust is pinned: after a sync under --trust-key, leaving the flag off is a downgrade that is
    /// refused (exit 4, nothing changes) until `forget-keys`; then an unsigned storage is accepted.
    @Test func leavingTheTrustedKeyOffIsRefusedUntilTheKeyIsForgotten() async throws {
        try await withScratch { scratch in
            let key = try await keygen(scratch)
            let storage = scratch + "/storage"
            func publish(_ version: String, signed: Bool, initialize: Bool = false) async throws {
                var arguments = [
                    "publish", "--storage", storage, "--content", Self.example + "/\(version)/RXCacheContent",
                    "--version", version, "--base-url", "https://example.invalid/storage/",
                ]
                if initialize { arguments.append("--init") }
                if signed { arguments += ["--sign-key", key] }
                let result = try await SyncAgentBinary.run(arguments, scratch: scratch)
                #expect(result.status == 0, "publish \(version): \(result.stderr)")
            }
            try await publish("1.0", signed: true, initialize: true)
            try await withStorageServer(root: URL(fileURLWithPath: storage)) { server async throws in
                let folder = ["--dir", scratch + "/content", "--state", scratch + "/state.sqlite"]
                let sync = ["sync", "--base-url", server.baseURL!.absoluteString] + folder
                let first = try await SyncAgentBinary.run(sync + ["--trust-key", key + ".pub"], scratch: scratch)
                #expect(first.status == 0, "\(first.stderr)")
                let status = try await SyncAgentBinary.run(["status", "--json"] + folder, scratch: scratch)
                let json = try #require(
                    try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [String: Any])
                let pinned = try #require(json["trustedKeyIDs"] as? [String])
                #expect(pinned.count == 1)

                try await publish("1.1", signed: false)
                let downgrade = try await SyncAgentBinary.run(sync, scratch: scratch)
                #expect(downgrade.status == 4, "\(downgrade.stderr)")
                #expect(
                    downgrade.stderr.contains("was synced with trusted signing key(s) \(pinned[0])")
                        && downgrade.stderr.contains("forget-keys"),
                    "\(downgrade.stderr)")
                let still = try await SyncAgentBinary.run(["status", "--json"] + folder, scratch: scratch)
                #expect(
                    still.stdout.contains("\"version\" : \"1.0\"") || still.stdout.contains("\"version\":\"1.0\""),
                    "\(still.stdout)")

                let forget = try await SyncAgentBinary.run(["forget-keys"] + folder, scratch: scratch)
                #expect(forget.status == 0 && forget.stdout.contains(pinned[0]), "\(forget.stdout) \(forget.stderr)")
                let accepted = try await SyncAgentBinary.run(sync, scratch: scratch)
                #expect(accepted.status == 0, "\(accepted.stderr)")
                let after = try await SyncAgentBinary.run(["status", "--json"] + folder, scratch: scratch)
                let afterJSON = try #require(
                    try JSONSerialization.jsonObject(with: Data(after.stdout.utf8)) as? [String: Any])
                #expect(afterJSON["version"] as? String == "1.1")
                #expect((afterJSON["trustedKeyIDs"] as? [String])?.isEmpty == true)
            }
        }
    }

    /// `verify` takes the keys and headers `sync` took: a folder synced under --trust-key is
    /// checked with the same key (a signed storage's status verified), refused without it as a
    /// sync is, and a header reaches the storage.
    @Test func verifyTakesTheKeysAndHeadersSyncTook() async throws {
        try await withScratch { scratch in
            let key = try await keygen(scratch)
            let storage = scratch + "/storage"
            let published = try await SyncAgentBinary.run(
                [
                    "publish", "--storage", storage, "--content", Self.example + "/1.0/RXCacheContent",
                    "--version", "1.0", "--base-url", "https://example.invalid/storage/", "--init", "--sign-key", key,
                ], scratch: scratch)
            #expect(published.status == 0, "\(published.stderr)")
            try await withStorageServer(root: URL(fileURLWithPath: storage)) { server async throws in
                let folder = ["--dir", scratch + "/content", "--state", scratch + "/state.sqlite"]
                let synced = try await sync(server, scratch, trusting: key + ".pub")
                #expect(synced.status == 0, "\(synced.stderr)")

                let without = try await SyncAgentBinary.run(["verify"] + folder, scratch: scratch)
                #expect(without.status == 4, "\(without.stderr)")
                #expect(without.stderr.contains("--trust-key") && without.stderr.contains("forget-keys"))
                #expect(!without.stderr.contains("CacheManager"), "CLI advice only: \(without.stderr)")

                let with = try await SyncAgentBinary.run(
                    ["verify"] + folder + ["--trust-key", key + ".pub", "--header", "X-Audit: verify-1"],
                    scratch: scratch)
                #expect(with.status == 0, "\(with.stderr)")
                #expect(with.stdout.contains("matches 1.0"), "\(with.stdout)")
                #expect(server.requests().contains { $0.header("x-audit") == "verify-1" })

                // A wrong key is a signature failure, not a pass.
                let other = scratch + "/other.key"
                #expect(try await SyncAgentBinary.run(["keygen", "--out", other], scratch: scratch).status == 0)
                let wrong = try await SyncAgentBinary.run(
                    ["verify"] + folder + ["--trust-key", other + ".pub"], scratch: scratch)
                #expect(wrong.status == 4, "\(wrong.stderr)")
            }
        }
    }

    /// `keygen` never replaces either file of a pair, nor follows a link at either name, and
    /// leaves no private key without its public one.
    @Test func keygenReplacesNeitherFileOfAPair() async throws {
        try await withScratch { scratch in
            let key = scratch + "/k"
            try "precious\n".write(toFile: key + ".pub", atomically: false, encoding: .utf8)
            let refused = try await SyncAgentBinary.run(["keygen", "--out", key], scratch: scratch)
            #expect(refused.status == 6, "\(refused.stderr)")
            #expect(refused.stderr.contains("\(key).pub exists"), "\(refused.stderr)")
            #expect(try String(contentsOfFile: key + ".pub", encoding: .utf8) == "precious\n")
            #expect(!FileManager.default.fileExists(atPath: key), "no private key without its public one")

            let linked = scratch + "/l"
            try FileManager.default.createSymbolicLink(atPath: linked, withDestinationPath: scratch + "/elsewhere")
            let throughLink = try await SyncAgentBinary.run(["keygen", "--out", linked], scratch: scratch)
            #expect(throughLink.status == 6, "\(throughLink.stderr)")
            #expect(!FileManager.default.fileExists(atPath: scratch + "/elsewhere"), "the link is not followed")

            let made = try await SyncAgentBinary.run(["keygen", "--out", scratch + "/fresh"], scratch: scratch)
            #expect(made.status == 0, "\(made.stderr)")
            let again = try await SyncAgentBinary.run(["keygen", "--out", scratch + "/fresh"], scratch: scratch)
            #expect(again.status == 6, "\(again.stderr)")
        }
    }
}
