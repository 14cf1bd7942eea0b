import Foundation
import StorageServer
import Synchronization
import Testing

/// `sync-agent cache get` as HTTP's caching rules have it, as the built binary, against an origin
/// that sends header lines byte for byte: request headers, `--include`, `--json`'s status,
/// headers and age, and the exit codes of served error statuses.
@Suite("sync-agent cache get speaks HTTP caching")
struct CacheHTTPCLITests {
    typealias Answer = ScriptedOrigin.Answer

    final class Script: Sendable {
        let answers = Mutex<[String: Answer]>([:])
        func set(_ path: String, _ answer: Answer) { answers.withLock { $0[path] = answer } }
    }

    static func withOrigin(_ body: (String, ScriptedOrigin, Script) async throws -> Void) async throws {
        let script = Script()
        let origin = try ScriptedOrigin { request in
            script.answers.withLock { $0[request.path] } ?? Answer(status: 404, body: Data("none".utf8))
        }
        defer { origin.stop() }
        try await withScratch { scratch in try await body(scratch, origin, script) }
    }

    func get(_ url: URL, _ scratch: String, _ extra: [String] = []) async throws -> CommandResult {
        try await SyncAgentBinary.run(
            ["cache", "get", url.absoluteString, "--cache", scratch + "/cache"] + extra, scratch: scratch)
    }

    /// What a credential fetched (an `Authorization` header, a URL's password) is that
    /// credential's: another one, or none, asks the origin; `ls` tells the entries apart
    /// without a secret; `rm URL` removes them all and says how many.
    @Test func whatACredentialFetchedIsThatCredentials() async throws {
        try await Self.withOrigin { scratch, origin, script in
            let url = origin.url("/me")
            var withPassword = URLComponents(url: url, resolvingAgainstBaseURL: false)!
            withPassword.user = "erin"
            withPassword.password = "erin-S3CRET"
            script.set("/me", Answer(headers: ["Cache-Control: max-age=600"], body: Data("private".utf8)))
            #expect(try await get(url, scratch, ["-H", "Authorization: Bearer alice-S3CRET"]).stdout == "private")
            script.set("/me", Answer(status: 404, headers: ["Cache-Control: max-age=600"], body: Data("who?".utf8)))
            for (index, extra) in [["-H", "Authorization: Bearer bob-S3CRET"], ["-H", "Cookie: id=carol-S3CRET"], []]
                .enumerated()
            {
                let other = try await get(url, scratch, extra)
                #expect(other.status == 22 && other.stdout == "who?", "\(extra): \(other.stdout)")
                #expect(origin.requestCount(forPath: "/me") == index + 2)
            }
            #expect(try await get(withPassword.url!, scratch).stdout == "who?")
            #expect(origin.requestCount(forPath: "/me") == 5)
            // Each again: from the cache.
            #expect(try await get(url, scratch, ["-H", "Authorization: Bearer alice-S3CRET"]).stdout == "private")
            #expect(try await get(url, scratch).stdout == "who?")
            #expect(origin.requestCount(forPath: "/me") == 5)
            let listed = try await SyncAgentBinary.run(
                ["cache", "ls", "--cache", scratch + "/cache"], scratch: scratch)
            let lines = listed.stdout.split(separator: "\n")
            #expect(lines.count == 5, "\(listed.stdout)")
            #expect(lines.filter { $0.contains("(for the credential sha256-") }.count == 4, "\(listed.stdout)")
            #expect(!listed.stdout.contains("S3CRET") && !listed.stderr.contains("S3CRET"))
            let removed = try await SyncAgentBinary.run(
                ["cache", "rm", url.absoluteString, "--cache", scratch + "/cache"], scratch: scratch)
            #expect(removed.status == 0 && removed.stdout.contains("removed 4 items"), "\(removed.stdout)")
            let left = try await SyncAgentBinary.run(["cache", "ls", "--cache", scratch + "/cache"], scratch: scratch)
            #expect(
                left.stdout.split(separator: "\n").count == 1 && left.stdout.contains("erin:***@"), "\(left.stdout)")
        }
    }

    /// `--account`: a refreshed token of the account is served what the old one fetched; the
    /// listing marks the account's entry; an empty name is refused with exit 6.
    @Test func anAccountKeepsItsEntryAcrossTokens() async throws {
        try await Self.withOrigin { scratch, origin, script in
            let url = origin.url("/feed")
            script.set("/feed", Answer(headers: ["Cache-Control: max-age=600"], body: Data("alice's".utf8)))
            let first = try await get(url, scratch, ["-H", "Authorization: Bearer one-S3CRET", "--account", "alice"])
            #expect(first.status == 0 && first.stdout == "alice's", "\(first.stderr)")
            script.set("/feed", Answer(status: 404, headers: ["Cache-Control: max-age=600"], body: Data("who?".utf8)))
            let refreshed = try await get(
                url, scratch, ["-H", "Authorization: Bearer two-S3CRET", "--account", "alice"])
            #expect(refreshed.stdout == "alice's", "\(refreshed.stderr)")
            #expect(origin.requestCount(forPath: "/feed") == 1)
            #expect(try await get(url, scratch, ["-H", "Authorization: Bearer two-S3CRET"]).stdout == "who?")
            #expect(try await get(url, scratch, ["--account", "bob"]).stdout == "who?")
            #expect(origin.requestCount(forPath: "/feed") == 3)
            let listed = try await SyncAgentBinary.run(
                ["cache", "ls", "--cache", scratch + "/cache"], scratch: scratch)
            #expect(listed.stdout.components(separatedBy: "(for the account sha256-").count == 3, "\(listed.stdout)")
            #expect(listed.stdout.components(separatedBy: "(for the credential sha256-").count == 2, "\(listed.stdout)")
            #expect(!listed.stdout.contains("alice") && !listed.stdout.contains("S3CRET"), "\(listed.stdout)")
            let empty = try await get(url, scratch, ["--account", ""])
            #expect(empty.status == 6 && empty.stderr.contains("--account is empty"), "\(empty.stderr)")
        }
    }

    @Test("--header goes to the origin and selects the Vary variant; its Cache-Control is honoured")
    func requestHeaders() async throws {
        try await Self.withOrigin { scratch, origin, script in
            let url = origin.url("/v")
            script.set(
                "/v", Answer(headers: ["Cache-Control: max-age=600", "Vary: Accept-Language"], body: Data("en".utf8)))
            let english = try await get(url, scratch, ["--header", "Accept-Language: en"])
            #expect(english.status == 0 && english.stdout == "en")
            #expect(origin.requests.last?.header("accept-language") == "en")
            script.set(
                "/v", Answer(headers: ["Cache-Control: max-age=600", "Vary: Accept-Language"], body: Data("fr".utf8)))
            #expect(try await get(url, scratch, ["-H", "Accept-Language: fr"]).stdout == "fr")
            #expect(try await get(url, scratch, ["-H", "Accept-Language: en"]).stdout == "en")
            #expect(origin.requestCount(forPath: "/v") == 2)
            // The request's no-cache asks again.
            #expect(
                try await get(url, scratch, ["-H", "Accept-Language: en", "-H", "Cache-Control: no-cache"]).stdout
                    == "fr")
            #expect(origin.requestCount(forPath: "/v") == 3)
            // only-if-cached with nothing stored: exit 8, no request.
            let miss = try await get(origin.url("/nothing"), scratch, ["-H", "Cache-Control: only-if-cached"])
            #expect(miss.status == 8)
            #expect(origin.requestCount(forPath: "/nothing") == 0)
            // A header that is not one: exit 6, the value never shown.
            let bad = try await get(url, scratch, ["-H", "Authorization Bearer s3cr3t"])
            #expect(bad.status == 6)
            #expect(!bad.stderr.contains("s3cr3t"))
            // The transport's one rule, as `sync --header` has it: no framing header, no control
            // character (a vertical tab went out raw from `sync`, and `Content-Length` from here).
            for header in ["X-Api-Key: s3cr3t\u{0B}x", "Content-Length: 5", "Host: s3cr3t.example"] {
                let refused = try await get(url, scratch, ["-H", header])
                #expect(refused.status == 6, "\(header)")
                #expect(!refused.stderr.contains("s3cr3t"))
            }
        }
    }

    @Test("--include writes the status line and headers before the body; --json has status, headers, source and age")
    func includeAndJSON() async throws {
        try await Self.withOrigin { scratch, origin, script in
            let url = origin.url("/i")
            script.set(
                "/i",
                Answer(
                    headers: ["Cache-Control: max-age=600", "Content-Type: text/plain", "X-Thing: 1", "X-Thing: 2"],
                    body: Data("body".utf8)))
            let included = try await get(url, scratch, ["--include"])
            #expect(included.status == 0)
            #expect(included.stdout.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(included.stdout.contains("x-thing: 1\r\nx-thing: 2\r\n"))
            #expect(included.stdout.contains("\r\nage: 0\r\n"))
            #expect(included.stdout.hasSuffix("\r\n\r\nbody"))
            let json = try await get(url, scratch, ["--json"])
            let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
            #expect(object["status"] as? Int == 200)
            #expect(object["source"] as? String == "disk")
            #expect((object["headers"] as? [String: String])?["x-thing"] == "1, 2")
            #expect((object["age"] as? Int).map { $0 >= 0 && $0 < 60 } == true)
            #expect(origin.requestCount(forPath: "/i") == 1)
        }
    }

    @Test("a served 4xx exits 22 and a served 5xx 23, their body written; a 404 is cached")
    func errorStatuses() async throws {
        try await Self.withOrigin { scratch, origin, script in
            script.set("/gone", Answer(status: 410, body: Data("gone".utf8)))
            script.set("/broken", Answer(status: 500, body: Data("oops".utf8)))
            let gone = try await get(origin.url("/gone"), scratch, ["-o", scratch + "/gone.out"])
            #expect(gone.status == 22)
            // One line on stderr says what was served (outside audit: the exit code alone).
            #expect(gone.stderr.contains("the origin answered 410; its body was written"), "\(gone.stderr)")
            #expect((try? String(contentsOfFile: scratch + "/gone.out", encoding: .utf8)) == "gone")
            #expect(try await get(origin.url("/gone"), scratch).status == 22)
            #expect(origin.requestCount(forPath: "/gone") == 1)
            let broken = try await get(origin.url("/broken"), scratch)
            #expect(broken.status == 23)
            #expect(broken.stdout == "oops")
            // Within the URL's backoff the answer is the same status, from the record (no body);
            // past it (a slow machine), from the origin again.
            let backedOff = try await get(origin.url("/broken"), scratch)
            #expect(backedOff.status == 23)
            #expect(backedOff.stderr.contains("answered HTTP 500") || backedOff.stdout == "oops")
        }
    }

    @Test("with the origin down a stale copy comes back at once, and the backoff spares the origin")
    func downOrigin() async throws {
        try await Self.withOrigin { scratch, origin, script in
            script.set("/d", Answer(headers: ["Cache-Control: max-age=1"], body: Data("kept".utf8)))
            #expect(try await get(origin.url("/d"), scratch).stdout == "kept")
            try await Task.sleep(for: .milliseconds(1100))
            script.set("/d", Answer(status: 503))
            let started = ContinuousClock.now
            for _ in 0..<4 {
                let stale = try await get(origin.url("/d"), scratch)
                #expect(stale.status == 0 && stale.stdout == "kept")
                #expect(stale.stderr.hasPrefix("warning: "))
            }
            // The first call met the 503; after it the backoff (1 s, then 2 s, then 4 s) lets one
            // request through at the earliest 1, 3 and 7 s after the first failure, which came
            // after `started`. So within the time the calls took (processes are slow on a busy
            // machine: each may find its period over), at most this many reached the origin.
            let took = ContinuousClock.now - started
            let elapsed = Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18
            var allowed = 1
            var wait = 1.0
            var due = wait
            while due <= elapsed {
                allowed += 1
                wait *= 2
                due += wait
            }
            #expect(
                origin.requestCount(forPath: "/d") - 1 <= allowed,
                "\(origin.requestCount(forPath: "/d") - 1) requests in \(elapsed) s")
        }
    }
}

extension CacheHTTPCLITests {
    @Test("inside stale-while-revalidate the stale copy is written at once and the refresh is stored before exit")
    func staleWhileRevalidate() async throws {
        try await Self.withOrigin { scratch, origin, script in
            let url = origin.url("/swr")
            script.set(
                "/swr", Answer(headers: ["Cache-Control: max-age=1, stale-while-revalidate=60"], body: Data("old".utf8))
            )
            #expect(try await get(url, scratch).stdout == "old")
            try await Task.sleep(for: .milliseconds(1100))
            script.set("/swr", Answer(headers: ["Cache-Control: max-age=600"], body: Data("new".utf8)))
            let stale = try await get(url, scratch, ["--json"])
            #expect(stale.stdout.contains("\"source\" : \"stale\""))
            #expect(origin.requestCount(forPath: "/swr") == 2)
            // The refresh the stale answer started was stored: the next get needs no request.
            let fresh = try await get(url, scratch)
            #expect(fresh.stdout == "new")
            #expect(origin.requestCount(forPath: "/swr") == 2)
        }
    }
}
