import Foundation
import ProcessKit
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
            // One line says what was served, as `curl --fail` says it (the exit code alone left
            // a script's log blank).
            #expect(
                notFound.stderr.split(separator: "\n") == ["\(missing): the origin answered 404; its body was written"])
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

            // A negative number is the option's value, not an option: out of range, exit 6.
            let badTTL = try await SyncAgentBinary.run(
                ["cache", "get", url, "--cache", cache, "--ttl", "-5"], scratch: scratch)
            #expect(badTTL.status == 6)
            #expect(badTTL.stderr.contains("--ttl"))
        }
    }

    /// Runs the binary under a small `python3` that reports its peak resident memory (the
    /// children's `ru_maxrss`). Measured from a small parent: at `exec` the kernel starts a
    /// process's peak at the peak of the memory it replaced, so a child of this test process
    /// would inherit the test runner's.
    static func runMeasured(_ arguments: [String], stdout: String, scratch: String) async throws -> (Int32, Int64) {
        let script = """
            import resource, subprocess, sys
            with open(sys.argv[1], "wb") as out:
                code = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.DEVNULL).returncode
            print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
            """
        let report = scratch + "/measured-\(UUID().uuidString)"
        let status = try await ChildProcess.run(
            "/usr/bin/python3", ["-c", script, stdout, SyncAgentBinary.path] + arguments, stdout: report)
        let words = try String(contentsOfFile: report, encoding: .utf8).split(separator: " ")
        guard status == 0, words.count == 2, let code = Int32(words[0]),
            let peak = Int64(words[1].trimmingCharacters(in: .whitespacesAndNewlines))
        else { throw CocoaError(.fileReadCorruptFile) }
        return (code, peak)
    }

    @Test("a large value is written from its file: `cache get`'s peak memory stays well under the value's size")
    func largeValueNeverHeldWhole() async throws {
        try await Self.withServer { scratch, server, site in
            let size = 32 << 20
            var bytes = [UInt8](repeating: 0, count: size)
            var seed: UInt64 = 0x9E37_79B9_7F4A_7C15
            for index in stride(from: 0, to: size, by: 4096) {
                seed = seed &* 6_364_136_223_846_793_005 &+ 1
                bytes[index] = UInt8(truncatingIfNeeded: seed >> 33)
            }
            let body = Data(bytes)
            bytes = []
            try body.write(to: URL(fileURLWithPath: site + "/big.bin"))
            try "small".write(toFile: site + "/small.txt", atomically: true, encoding: .utf8)
            let cache = scratch + "/cache"
            let url = server.url(for: "big.bin").absoluteString
            // What the binary takes for a small value: the base the large one is held to.
            let (smallStatus, base) = try await Self.runMeasured(
                ["cache", "get", server.url(for: "small.txt").absoluteString, "--cache", cache],
                stdout: scratch + "/small.out", scratch: scratch)
            #expect(smallStatus == 0)
            // Fetched, then a disk hit, then to stdout with the head: each within half the value's
            // size of the base (a copy of it in memory would be all of it).
            for (round, arguments) in [
                ["-o", scratch + "/out-1"], ["-o", scratch + "/out-2"], ["--include"],
            ].enumerated() {
                let out = scratch + "/stdout-\(round)"
                let (status, peak) = try await Self.runMeasured(
                    ["cache", "get", url, "--cache", cache] + arguments, stdout: out, scratch: scratch)
                #expect(status == 0)
                #expect(peak > 0)
                #expect(
                    peak < base + Int64(size) / 2,
                    "round \(round): peak RSS \(peak >> 20) MiB for a 32 MiB value, \(base >> 20) MiB for a small one")
                let written =
                    round < 2
                    ? try Data(contentsOf: URL(fileURLWithPath: scratch + "/out-\(round + 1)"))
                    : try Data(contentsOf: URL(fileURLWithPath: out))
                if round < 2 {
                    #expect(written == body)
                } else {
                    let head = try #require(written.range(of: Data("\r\n\r\n".utf8)))
                    #expect(String(decoding: written[..<head.lowerBound], as: UTF8.self).hasPrefix("HTTP/1.1 200 OK"))
                    #expect(written[head.upperBound...] == body[...])
                }
            }
            #expect(server.requestCount(forPath: "/big.bin") == 1)
        }
    }

    @Test(
        "a URL no fetcher reads exits 6 naming the schemes; a file:// that is not a regular file exits 3 saying what it is"
    )
    func unreadableSourcesAreNamed() async throws {
        try await withScratch { scratch in
            let cache = scratch + "/cache"
            for url in ["ftp://127.0.0.1:1/x", "gopher://u:Pw0rd@h/x", "mailto:a@b.c"] {
                let run = try await SyncAgentBinary.run(["cache", "get", url, "--cache", cache], scratch: scratch)
                #expect(run.status == 6, "\(url)")
                #expect(run.stderr.contains("is not an http, https or file URL"), "\(url): \(run.stderr)")
                #expect(!run.stderr.contains("Pw0rd") && !run.stderr.contains("ItemLoader"), "\(run.stderr)")
            }
            #expect(mkfifo(scratch + "/fifo", 0o600) == 0)
            try FileManager.default.createDirectory(atPath: scratch + "/folder", withIntermediateDirectories: false)
            try "plain".write(toFile: scratch + "/plain.txt", atomically: true, encoding: .utf8)
            let socket = scratch + "/socket"
            let bound = try await ChildProcess.run(
                "/usr/bin/python3",
                ["-c", "import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])", socket])
            #expect(bound == 0)
            for (path, words) in [
                (scratch + "/fifo", "is not a regular file"), (scratch + "/folder", "is a folder, not a file"),
                ("/dev/zero", "is not a regular file"), (scratch + "/missing", "does not exist"),
                (socket, "is not a regular file"), (scratch + "/plain.txt/", "is a file, but the URL ends in '/'"),
            ] {
                let run = try await SyncAgentBinary.run(
                    ["cache", "get", "file://" + path, "--cache", cache], scratch: scratch)
                #expect(run.status == 3, "\(path)")
                #expect(run.stdout.isEmpty)
                let shown = path.hasSuffix("/") ? String(path.dropLast()) : path
                #expect(run.stderr.contains("cannot read \(shown): it \(words)"), "\(path): \(run.stderr)")
                #expect(!run.stderr.contains("NSCocoaErrorDomain"), "\(run.stderr)")
            }
            // Another machine's file is not read as this one's.
            let remote = try await SyncAgentBinary.run(
                ["cache", "get", "file://remotehost" + scratch + "/plain.txt", "--cache", cache], scratch: scratch)
            #expect(remote.status == 3 && remote.stdout.isEmpty)
            #expect(remote.stderr.contains("names the host remotehost"), "\(remote.stderr)")
            #expect(
                try await SyncAgentBinary.run(
                    ["cache", "get", "file://localhost" + scratch + "/plain.txt", "--cache", cache], scratch: scratch
                ).stdout == "plain")
            // A /sys file states 4096 bytes and holds fewer: its bytes, not "changed while read".
            let sys = "/sys/kernel/mm/transparent_hugepage/enabled"
            if let expected = try? String(contentsOfFile: sys, encoding: .utf8) {
                let read = try await SyncAgentBinary.run(
                    ["cache", "get", "file://" + sys, "--cache", cache], scratch: scratch)
                #expect(read.status == 0 && read.stdout == expected, "\(read.stderr)")
            }
            // A file that states no size (/proc's) is read to its end, not served empty.
            let proc = try await SyncAgentBinary.run(
                ["cache", "get", "file:///proc/version", "--cache", cache], scratch: scratch)
            #expect(proc.status == 0, "\(proc.stderr)")
            #expect(
                proc.stdout == (try String(contentsOfFile: "/proc/version", encoding: .utf8)) && !proc.stdout.isEmpty)
        }
    }

    @Test("a gzip body whose stream stops early is neither printed nor stored: exit 3; the whole one is")
    func aCompressedBodyCutShortIsNotStored() async throws {
        try await Self.withServer { scratch, server, site in
            var text = ""
            for line in 0..<3_000 { text += "line \(line) \(UInt32.random(in: 0...999_999))\n" }
            try text.write(toFile: site + "/doc.txt", atomically: true, encoding: .utf8)
            let gzip = try await GzipEncoding.compress(Data(text.utf8))
            let cache = scratch + "/cache"
            let url = server.url(for: "doc.txt").absoluteString
            // Whole HTTP framing (the Content-Length counts the short body) around half a stream.
            server.injectFault(
                .status(200, headers: ["Content-Encoding": "gzip"], body: gzip.prefix(gzip.count / 2)),
                forPath: "/doc.txt")

            let cut = try await SyncAgentBinary.run(["cache", "get", url, "--cache", cache], scratch: scratch)
            let offline = try await SyncAgentBinary.run(
                ["cache", "get", url, "--cache", cache, "--offline"], scratch: scratch)
            server.clearFaults()
            server.injectFault(.gzipEncoded, forPath: "/doc.txt")
            // The misfit body backed off this URL (README, "Backoff"): the first wait is 1 s.
            try await Task.sleep(for: .seconds(2.5))
            let whole = try await SyncAgentBinary.run(["cache", "get", url, "--cache", cache], scratch: scratch)

            #expect(cut.status == 3)
            #expect(cut.stdout.isEmpty)
            #expect(cut.stderr.contains("stops before its end"), "\(cut.stderr)")
            #expect(offline.status == 8, "nothing was stored")
            #expect(whole.status == 0, "\(whole.stderr)")
            #expect(whole.stdout == text)
        }
    }

    @Test("an index found damaged after opening is set aside with a warning, and stats says so")
    func damageFoundWhileRunningIsTold() async throws {
        try await Self.withServer { scratch, server, site in
            let cache = scratch + "/cache"
            var urls: [String] = []
            for index in 0..<12 {
                try String(repeating: "value \(index) ", count: 300).write(
                    toFile: site + "/v\(index).txt", atomically: true, encoding: .utf8)
                urls.append(server.url(for: "v\(index).txt").absoluteString)
                #expect(
                    try await SyncAgentBinary.run(["cache", "get", urls[index], "--cache", cache], scratch: scratch)
                        .status == 0)
            }
            // The key index's root page, which only a lookup by key reads: opening does not meet it.
            let root = try await Self.rootPage(
                of: "sqlite_autoindex_item_1", in: cache + "/index.sqlite", scratch: scratch)
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: cache + "/index.sqlite"))
            try handle.seek(toOffset: UInt64((root - 1) * 4096))
            handle.write(Data(repeating: 0xA5, count: 4096))
            try handle.close()

            let offline = try await SyncAgentBinary.run(
                ["cache", "get", urls[3], "--cache", cache, "--offline"], scratch: scratch)
            let stats = try await SyncAgentBinary.run(["cache", "stats", "--cache", cache], scratch: scratch)

            #expect(offline.status == 8, "the damage hid the item: a miss")
            #expect(offline.stderr.contains("turned out damaged while it was read"), "\(offline.stderr)")
            #expect(!offline.stderr.contains("was damaged; it was set aside"), "opening did not meet it")
            #expect(FileManager.default.fileExists(atPath: cache + "/index.sqlite.damaged"))
            #expect(stats.status == 0)
            #expect(stats.stdout.contains("count:   0"))
        }
    }

    /// The root page of the index `name` in the SQLite file at `path`, read by Python's sqlite3.
    static func rootPage(of name: String, in path: String, scratch: String) async throws -> Int {
        let out = scratch + "/rootpage-\(UUID().uuidString)"
        let script =
            "import sqlite3, sys; c = sqlite3.connect('file:' + sys.argv[1] + '?mode=ro', uri=True); "
            + "print(c.execute(\"SELECT rootpage FROM sqlite_master WHERE name = ?\", (sys.argv[2],)).fetchone()[0])"
        let status = try await ChildProcess.run("/usr/bin/python3", ["-c", script, path, name], stdout: out)
        let text = try String(contentsOfFile: out, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        return try #require(status == 0 ? Int(text) : nil, "python3 read no root page for \(name): \(text)")
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
