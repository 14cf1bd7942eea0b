import Foundation
import StorageServer
import Testing

/// A file of the mirror the agent may not read (made mode 000 by a careless user or tool) is
/// drift like any other: `verify` lists it once, as unreadable, and `--repair` replaces it. It
/// once failed every verify and full check with exit 5, and nothing repaired it.
@Suite("An unreadable file in the mirror is drift that a repair replaces")
struct UnreadableDriftTests {
    static let example = SyncAgentCLITests.exampleStorage

    @Test(
        .enabled(
            if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
            "root reads a mode-000 file: the agent runs as nobody through setpriv"))
    func anUnreadableFileIsListedAndReplaced() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: Self.example + "/1.2")) { server async throws in
                let mirror = scratch + "/mirror"
                try FileManager.default.createDirectory(atPath: mirror, withIntermediateDirectories: true)
                #expect(chmod(scratch, 0o755) == 0 && chown(mirror, 65534, 65534) == 0)
                let folder = ["--dir", mirror + "/content", "--state", mirror + "/state.sqlite"]
                let synced = try await SyncAgentBinary.runUnprivileged(
                    ["sync", "--base-url", server.baseURL!.absoluteString] + folder, scratch: scratch)
                #expect(synced.status == 0, "\(synced.stderr)")
                let files = try FileManager.default.subpathsOfDirectory(atPath: mirror + "/content").sorted()
                    .filter {
                        !$0.contains("/.") && FileManager.default.isReadableFile(atPath: mirror + "/content/" + $0)
                    }
                    .filter { path in
                        var info = stat()
                        return lstat(mirror + "/content/" + path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG
                    }
                let victim = try #require(files.first)
                let published = try Data(
                    contentsOf: URL(fileURLWithPath: Self.example + "/1.2/RXCacheContent/" + victim))
                #expect(chmod(mirror + "/content/" + victim, 0) == 0)

                let verify = ["verify"] + folder
                let found = try await SyncAgentBinary.runUnprivileged(verify, scratch: scratch)
                #expect(found.status == 7, "\(found.stdout) \(found.stderr)")
                #expect(found.stdout.contains("unreadable file \(victim) (Permission denied)"), "\(found.stdout)")
                #expect(!found.stdout.contains("missing file \(victim)"), "said once: \(found.stdout)")

                let repaired = try await SyncAgentBinary.runUnprivileged(verify + ["--repair"], scratch: scratch)
                #expect(repaired.status == 0, "\(repaired.stdout) \(repaired.stderr)")
                #expect(repaired.stdout.contains("repaired 1 path(s)"), "\(repaired.stdout)")
                var info = stat()
                #expect(stat(mirror + "/content/" + victim, &info) == 0 && info.st_mode & 0o444 == 0o444)
                #expect(try Data(contentsOf: URL(fileURLWithPath: mirror + "/content/" + victim)) == published)
                let again = try await SyncAgentBinary.runUnprivileged(verify, scratch: scratch)
                #expect(again.status == 0, "\(again.stdout) \(again.stderr)")
            }
        }
    }
}
