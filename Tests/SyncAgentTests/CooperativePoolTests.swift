import Foundation
import StorageServer
import Testing

/// Blocking file work (hashing, linking, deleting trees, repairs) runs on the bounded I/O pool,
/// never on Swift's cooperative threads: with a single cooperative thread
/// (`LIBDISPATCH_COOPERATIVE_POOL_STRICT=1`), a restore, a replay and a repair still complete.
/// A blocking call or a semaphore wait on that one thread would hang the child instead.
@Suite("Updates complete on one cooperative thread", .timeLimit(.minutes(3)))
struct CooperativePoolTests {
    /// Runs `sync-agent` with one cooperative thread; a child that does not finish within
    /// `limit` is killed (and so exits non-zero): a hang fails the test instead of stalling it.
    func runStrict(_ arguments: [String], scratch: String, limit: Duration = .seconds(90)) async throws -> CommandResult
    {
        try await CommandResult.capturing(in: scratch) { out, err in
            let child = try ChildProcess(
                "/usr/bin/env", ["LIBDISPATCH_COOPERATIVE_POOL_STRICT=1", SyncAgentBinary.path] + arguments,
                stdout: out, stderr: err)
            let watchdog = Task {
                try await Task.sleep(for: limit)
                child.send(SIGKILL)
            }
            defer { watchdog.cancel() }
            return await child.exitStatus()
        }
    }

    /// Every file under `root`, relative path to bytes.
    func files(under root: String) throws -> [String: Data] {
        var result: [String: Data] = [:]
        let enumerator = try #require(FileManager.default.enumerator(atPath: root))
        while let relative = enumerator.nextObject() as? String {
            var isFolder: ObjCBool = false
            _ = FileManager.default.fileExists(atPath: root + "/" + relative, isDirectory: &isFolder)
            if !isFolder.boolValue {
                result[relative] = try Data(contentsOf: URL(fileURLWithPath: root + "/" + relative))
            }
        }
        return result
    }

    @Test func aRestoreAReplayAndARepairCompleteOnOneCooperativeThread() async throws {
        try await withScratch { scratch in
            let versions = SyncAgentCLITests.exampleStorage
            try await withStorageServer(root: URL(fileURLWithPath: versions + "/1.0")) { server in
                let dir = scratch + "/content"
                let state = scratch + "/state.sqlite"
                let sync = ["sync", "--base-url", server.baseURL!.absoluteString, "--dir", dir, "--state", state]

                let restored = try await runStrict(sync, scratch: scratch)
                #expect(restored.status == 0, "restore: exit \(restored.status), stderr: \(restored.stderr)")
                #expect(try files(under: dir) == files(under: versions + "/1.0/RXCacheContent"))

                server.setRoot(URL(fileURLWithPath: versions + "/1.4"))
                let replayed = try await runStrict(sync, scratch: scratch)
                #expect(replayed.status == 0, "replay: exit \(replayed.status), stderr: \(replayed.stderr)")
                let published = try files(under: versions + "/1.4/RXCacheContent")
                #expect(try files(under: dir) == published)

                // Damage one file and remove another: verify --repair hashes every byte and fixes both.
                let damaged = try #require(published.keys.sorted().first)
                let removed = try #require(published.keys.sorted().last)
                try Data("damaged".utf8).write(to: URL(fileURLWithPath: dir + "/" + damaged))
                try FileManager.default.removeItem(atPath: dir + "/" + removed)
                let repaired = try await runStrict(
                    [
                        "verify", "--dir", dir, "--state", state, "--base-url", server.baseURL!.absoluteString,
                        "--repair",
                    ], scratch: scratch)
                #expect(repaired.status == 0, "verify --repair: exit \(repaired.status), stderr: \(repaired.stderr)")
                #expect(try files(under: dir) == published)
            }
        }
    }

    /// The item cache too: a fetch (its body staged on the I/O pool), a revalidation, the
    /// commands that read and change the index, with one cooperative thread.
    @Test func theItemCacheCompletesOnOneCooperativeThread() async throws {
        try await CacheCommandTests.withServer { scratch, server, site in
            let body = String(repeating: "0123456789", count: 50_000)
            try body.write(toFile: site + "/big.txt", atomically: true, encoding: .utf8)
            try "small".write(toFile: site + "/small.txt", atomically: true, encoding: .utf8)
            // Over the memory tier's 10 MiB item limit: it moves as its file (checked on the pool).
            let large = String(repeating: "large value ", count: 1_000_000)
            try large.write(toFile: site + "/large.txt", atomically: true, encoding: .utf8)
            let cache = scratch + "/cache"
            for (url, expected) in [
                (server.url(for: "big.txt"), body), (server.url(for: "small.txt"), "small"),
                (server.url(for: "large.txt"), large),
            ] {
                let fetched = try await runStrict(
                    ["cache", "get", url.absoluteString, "--cache", cache, "--ttl", "0", "-o", scratch + "/out"],
                    scratch: scratch)
                #expect(fetched.status == 0, "get: \(fetched.stderr)")
                #expect(try String(contentsOfFile: scratch + "/out", encoding: .utf8) == expected)
                let revalidated = try await runStrict(
                    ["cache", "get", url.absoluteString, "--cache", cache, "--json"], scratch: scratch)
                #expect(
                    revalidated.status == 0 && revalidated.stdout.contains("\"source\" : \"revalidated\""),
                    "\(revalidated.stdout) \(revalidated.stderr)")
            }
            for command in [
                ["ls"], ["stats"], ["rm", server.url(for: "small.txt").absoluteString], ["purge", "--all"],
            ] {
                let result = try await runStrict(["cache"] + command + ["--cache", cache], scratch: scratch)
                #expect(result.status == 0, "\(command): \(result.stderr)")
            }
        }
    }
}
