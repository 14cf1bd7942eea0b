import Foundation
import StorageServer
import Testing

/// `sync-agent cache` against a real loopback server and a real cache folder, run as the built
/// binary: the contract of the issue (exit codes, the stale warning, one request for 8 processes).
@Suite("sync-agent cache: get, ls, rm, purge, stats")
struct CacheCommandTests {
    static func withServer<T>(_ body: (String, StorageServer, String) async throws -> T) async throws -> T {
        try await withScratch { scratch in
            let site = scratch + "/site"
            try FileManager.default.createDirectory(atPath: site, withIntermediateDirectories: true)
            let server = StorageServer(root: URL(fileURLWithPath: site))
            _ = try await server.start()
            do {
                let result = try await body(scratch, server, site)
                await server.stop()
                return result
            } catch {
                await server.stop()
                throw error
            }
        }
    }

    @Test("8 processes getting one URL into one folder make 1 request and all write the bytes")
    func eightProcessesOneRequest() async throws {
        try await Self.withServer { scratch, server, site in
            let body = String(repeating: "0123456789", count: 5000)
            try body.write(toFile: site + "/shared.txt", atomically: true, encoding: .utf8)
            server.injectFault(.delay(seconds: 0.5), forPath: "/shared.txt", times: 1)
            let url = server.url(for: "shared.txt").absoluteString
            let results = try await withThrowingTaskGroup(of: CommandResult.self) { group in
                for index in 0..<8 {
                    group.addTask {
                        try await SyncAgentBinary.run(
                            ["cache", "get", url, "--cache", scratch + "/cache", "-o", scratch + "/out\(index)"],
                            scratch: scratch)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            for result in results { #expect(result.status == 0, "\(result.stderr)") }
            for index in 0..<8 {
                #expect((try? String(contentsOfFile: scratch + "/out\(index)", encoding: .utf8)) == body)
            }
            #expect(server.requestCount(forPath: "/shared.txt") == 1)
            let stats = try await SyncAgentBinary.run(
                ["cache", "stats", "--cache", scratch + "/cache", "--json"], scratch: scratch)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any])
            #expect(object["count"] as? Int == 1)
            #expect(object["bytes"] as? Int == 50_000)
        }
    }

    @Test(
        "exit codes: 3 for a network failure with nothing stored, 8 for an offline miss, 0 and one warning for stale data"
    )
    func exitCodesAndStaleWarning() async throws {
        try await Self.withServer { scratch, server, site in
            try "v1".write(toFile: site + "/a.txt", atomically: true, encoding: .utf8)
            let cache = scratch + "/cache"
            let url = server.url(for: "a.txt").absoluteString
            let offlineMiss = try await SyncAgentBinary.run(
                ["cache", "get", url, "--cache", cache, "--offline"], scratch: scratch)
            #expect(offlineMiss.status == 8)
            #expect(offlineMiss.stderr.contains(url))
            #expect(server.requestCount(forPath: "/a.txt") == 0)

            let first = try await SyncAgentBinary.run(
                ["cache", "get", url, "--cache", cache, "--ttl", "0"], scratch: scratch)
            #expect(first.status == 0)
            #expect(first.stdout == "v1")
            #expect(first.stderr.isEmpty)

            server.injectFault(.status(503), forPath: "/a.txt")
            let stale = try await SyncAgentBinary.run(["cache", "get", url, "--cache", cache], scratch: scratch)
            #expect(stale.status == 0)
            #expect(stale.stdout == "v1")
            #expect(stale.stderr.split(separator: "\n").count == 1)
            #expect(stale.stderr.hasPrefix("warning: \(url): serving stale data"))

            // A 404 is the origin's answer: served (and cached, RFC 9110 §15.1) with exit 22.
            let missing = server.url(for: "missing.txt").absoluteString
            let notFound = try await SyncAgentBinary.run(["cache", "get", missing, "--cache", cache], scratch: scratch)
            #expect(notFound.status == 22)
            #expect(notFound.stderr.isEmpty)
            #expect(server.requestCount(forPath: "/missing.txt") == 1)
            let again = try await SyncAgentBinary.run(
                ["cache", "get", missing, "--cache", cache, "--json"], scratch: scratch)
            #expect(again.status == 22)
            #expect(again.stdout.contains("\"status\" : 404"))
            #expect(server.requestCount(forPath: "/missing.txt") == 1)

            // No answer at all, and nothing stored: exit 3.
            let closed = try ScriptedOrigin { _ in ScriptedOrigin.Answer() }
            let refusedURL = closed.url("/nothing.txt").absoluteString
            closed.stop()
            let failed = try await SyncAgentBinary.run(
                ["cache", "get", refusedURL, "--cache", cache], scratch: scratch)
            #expect(failed.status == 3)
            #expect(failed.stdout.isEmpty)
            #expect(failed.stderr.contains("nothing.txt"))

            let badTTL = try await SyncAgentBinary.run(
                ["cache", "get", url, "--cache", cache, "--ttl", "-5"], scratch: scratch)
            #expect(badTTL.status == 64)
        }
    }

    @Test("--no-store writes the bytes and keeps nothing; --param joins the key and the query")
    func noStoreAndParameters() async throws {
        try await Self.withServer { scratch, server, site in
            try "p".write(toFile: site + "/p.txt", atomically: true, encoding: .utf8)
            let cache = scratch + "/cache"
            let url = server.url(for: "p.txt").absoluteString
            let noStore = try await SyncAgentBinary.run(
                ["cache", "get", url, "--cache", cache, "--no-store"], scratch: scratch)
            #expect(noStore.stdout == "p")
            #expect(try await SyncAgentBinary.run(["cache", "ls", "--cache", cache], scratch: scratch).stdout.isEmpty)

            _ = try await SyncAgentBinary.run(
                ["cache", "get", url, "--cache", cache, "--param", "b=2", "--param", "a=1"], scratch: scratch)
            #expect(server.requests().last?.path == "/p.txt")
            let listed = try await SyncAgentBinary.run(["cache", "ls", "--cache", cache], scratch: scratch)
            #expect(listed.stdout.contains(url + "?a=1&b=2"))
            // The same parameters in another order are the same item: no request.
            let again = try await SyncAgentBinary.run(
                ["cache", "get", url + "?b=2", "--cache", cache, "--param", "a=1", "--offline"], scratch: scratch)
            #expect(again.status == 0)
            #expect(server.requestCount(forPath: "/p.txt") == 2)
        }
    }

    @Test("ls --prefix/--expired/--json, rm by URL and by prefix, purge --expired and --all, --max-size")
    func listRemovePurge() async throws {
        try await Self.withServer { scratch, server, site in
            for name in ["a", "b", "c"] {
                try String(repeating: name, count: 1000).write(
                    toFile: site + "/\(name).txt", atomically: true, encoding: .utf8)
            }
            try FileManager.default.createDirectory(atPath: site + "/sub", withIntermediateDirectories: true)
            try "d".write(toFile: site + "/sub/d.txt", atomically: true, encoding: .utf8)
            let cache = scratch + "/cache"
            for name in ["a", "b"] {
                _ = try await SyncAgentBinary.run(
                    ["cache", "get", server.url(for: "\(name).txt").absoluteString, "--cache", cache], scratch: scratch)
            }
            _ = try await SyncAgentBinary.run(
                [
                    "cache", "get", server.url(for: "c.txt").absoluteString, "--cache", cache, "--expires",
                    "2000-01-01T00:00:00Z",
                ], scratch: scratch)
            _ = try await SyncAgentBinary.run(
                ["cache", "get", server.url(for: "sub/d.txt").absoluteString, "--cache", cache], scratch: scratch)

            let expired = try await SyncAgentBinary.run(
                ["cache", "ls", "--cache", cache, "--expired", "--json"], scratch: scratch)
            let objects = try #require(
                try JSONSerialization.jsonObject(with: Data(expired.stdout.utf8)) as? [[String: Any]])
            #expect(objects.compactMap { $0["url"] as? String } == [server.url(for: "c.txt").absoluteString])
            #expect(objects.first?["expired"] as? Bool == true)

            let prefix = server.url(for: "sub/").absoluteString
            #expect(
                try await SyncAgentBinary.run(["cache", "ls", "--cache", cache, "--prefix", prefix], scratch: scratch)
                    .stdout.split(separator: "\n").count == 1)
            #expect(
                try await SyncAgentBinary.run(["cache", "rm", "--cache", cache, "--prefix", prefix], scratch: scratch)
                    .stdout == "removed 1 item\n")
            #expect(
                try await SyncAgentBinary.run(
                    ["cache", "rm", server.url(for: "a.txt").absoluteString, "--cache", cache], scratch: scratch
                ).stdout == "removed 1 item\n")
            #expect(
                try await SyncAgentBinary.run(["cache", "purge", "--cache", cache, "--expired"], scratch: scratch)
                    .stdout == "removed 1 item\n")
            let stats = try await SyncAgentBinary.run(["cache", "stats", "--cache", cache], scratch: scratch)
            #expect(stats.stdout.contains("count:   1"))
            #expect(stats.stdout.contains("bytes:   1000"))

            // A smaller limit: evicts down to it. The limit is the folder's footprint: 134,656
            // bytes leave 3,584 for rows beside the index, log, shared memory and folder
            // (131,072 at this size), room for one fetched 1,000-byte value (about 2,300 with
            // its row, response record and index entries), not two.
            _ = try await SyncAgentBinary.run(
                ["cache", "get", server.url(for: "a.txt").absoluteString, "--cache", cache, "--max-size", "134656"],
                scratch: scratch)
            // The folder keeps the limit: stats without --max-size shows it.
            let limited = try await SyncAgentBinary.run(
                ["cache", "stats", "--cache", cache, "--json"], scratch: scratch)
            let limits = try #require(
                try JSONSerialization.jsonObject(with: Data(limited.stdout.utf8)) as? [String: Any])
            #expect(limits["bytes"] as? Int == 1000)
            #expect(limits["limit"] as? Int == 134_656)
            #expect(
                try await SyncAgentBinary.run(["cache", "purge", "--cache", cache, "--all"], scratch: scratch).stdout
                    == "removed 1 item\n")

            for subcommand in ["get", "ls", "rm", "purge", "stats"] {
                let help = try await SyncAgentBinary.run(["cache", subcommand, "--help"], scratch: scratch)
                #expect(help.status == 0)
                #expect(help.stdout.contains("--cache"))
                #expect(help.stdout.contains("--max-size"))
            }
        }
    }
}
