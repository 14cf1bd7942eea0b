import Foundation
import StorageServer
import Testing

/// A base URL with a password or a token in its user part (`https://alice:S3cret@host/`,
/// `https://TOKEN@host/`), run through the built binary against a loopback server (libcurl sends
/// the user info as Basic auth; the server ignores it). The secret never shows on stdout, stderr,
/// in a log line of any format, in `status`, on `/metrics` or in the state database; the user
/// name does.
@Suite(
    "A base URL's password or token never shows: sync, status, verify, check-config, watch's logs, /metrics, the state database",
    .timeLimit(.minutes(3)))
struct SecretURLCLITests {
    static let password = "S3cretPW-71"
    static let token = "TOKEN-9f3a52"
    static let storage12 = URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.2")

    /// `server`'s base URL with `user` (and `password`) as its user info, plus `path`.
    static func url(_ server: StorageServer, user: String, password: String? = nil, path: String = "") -> String {
        var parts = URLComponents(url: server.baseURL!, resolvingAgainstBaseURL: false)!
        parts.user = user
        parts.password = password
        return parts.url!.absoluteString + path
    }

    /// Every state database file (and its WAL) under `scratch`, as text.
    static func stateBytes(_ scratch: String) -> String {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: scratch)) ?? []
        return names.filter { $0.contains(".sqlite") }.compactMap {
            FileManager.default.contents(atPath: scratch + "/" + $0)
        }
        .map { String(decoding: $0, as: UTF8.self) }.joined()
    }

    static func expectNoSecret(_ text: String, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(
            !text.contains(password) && !text.contains(token), "\(what) shows a secret:\n\(text)",
            sourceLocation: sourceLocation)
    }

    @Test("sync, status (text and JSON), verify and a failed sync show alice:***@ and ***@, never the secret")
    func syncStatusAndVerify() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: Self.storage12) { server in
                let folder = ["--dir", scratch + "/content", "--state", scratch + "/state.sqlite"]
                let base = Self.url(server, user: "alice", password: Self.password)
                let sync = try await SyncAgentBinary.run(
                    ["sync", "--base-url", base, "--verbose"] + folder, scratch: scratch)
                #expect(sync.status == 0, "\(sync.stderr)")
                Self.expectNoSecret(sync.stdout + sync.stderr, "sync --verbose")
                #expect(
                    server.requests().contains { $0.headers["authorization"]?.hasPrefix("Basic ") == true },
                    "the password was sent")

                let text = try await SyncAgentBinary.run(["status"] + folder, scratch: scratch)
                Self.expectNoSecret(text.stdout + text.stderr, "status")
                let json = try await SyncAgentBinary.run(["status", "--json"] + folder, scratch: scratch)
                Self.expectNoSecret(json.stdout + json.stderr, "status --json")
                let object = try #require(
                    try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
                #expect(
                    (object["baseURL"] as? String)?.hasPrefix("http://alice:***@127.0.0.1:") == true, "\(json.stdout)")

                // The recorded URL lacks the password: verify asks for it rather than failing to log in.
                let verify = try await SyncAgentBinary.run(["verify"] + folder, scratch: scratch)
                #expect(
                    verify.status == 6 && verify.stderr.contains("pass --base-url")
                        && verify.stderr.contains("alice:***@"), "\(verify.stderr)")
                Self.expectNoSecret(verify.stderr, "verify")
                let verified = try await SyncAgentBinary.run(["verify", "--base-url", base] + folder, scratch: scratch)
                #expect(verified.status == 0, "\(verified.stderr)")
                Self.expectNoSecret(verified.stdout + verified.stderr, "verify --base-url")

                // A failure quotes the URL: 404 on a token URL, then the error in status.
                let failing = ["--dir", scratch + "/other", "--state", scratch + "/other.sqlite"]
                let failed = try await SyncAgentBinary.run(
                    ["sync", "--base-url", Self.url(server, user: Self.token, path: "missing/")] + failing,
                    scratch: scratch)
                #expect(failed.status == 3 && failed.stderr.contains("***@127.0.0.1"), "\(failed.stderr)")
                Self.expectNoSecret(failed.stdout + failed.stderr, "a failed sync")
                let failedStatus = try await SyncAgentBinary.run(["status", "--json"] + failing, scratch: scratch)
                #expect(failedStatus.stdout.contains("***@127.0.0.1"), "\(failedStatus.stdout)")
                Self.expectNoSecret(failedStatus.stdout, "status --json of a failed sync")
                let failedText = try await SyncAgentBinary.run(["status", "--check"] + failing, scratch: scratch)
                #expect(failedText.status == 9)
                Self.expectNoSecret(failedText.stdout + failedText.stderr, "status --check of a failed sync")

                // A URL the client refuses is quoted redacted too.
                let ftp = try await SyncAgentBinary.run(
                    ["sync", "--base-url", "ftp://alice:\(Self.password)@127.0.0.1/x/", "--dir", scratch + "/ftp"],
                    scratch: scratch)
                #expect(ftp.status == 6 && ftp.stderr.contains("alice:***@"), "\(ftp.stderr)")
                Self.expectNoSecret(ftp.stderr, "a refused base URL")
                Self.expectNoSecret(Self.stateBytes(scratch), "the state database")
            }
        }
    }

    /// A token in the query (GitHub raw's `?token=`) and a --header line without its colon are
    /// never printed: the refusals name the flag, not the secret.
    /// A proxy variable's password that libcurl cannot read as a URL (a space in it ends the
    /// authority for URL rules) is quoted back by libcurl's message: it is masked there, in
    /// `status` and in the state database, as written and as percent-decoded.
    @Test(arguments: [("http_proxy", "PROXY S3cret%21x"), ("ALL_PROXY", "S3cret%21x Y"), ("http_proxy", "S3 c")])
    func aProxyVariablesPasswordNeverShows(variable: String, secret: String) async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: Self.storage12) { server in
                let folder = ["--dir", scratch + "/content", "--state", scratch + "/state.sqlite"]
                let sync = try await SyncAgentBinary.run(
                    ["sync", "--base-url", server.baseURL!.absoluteString] + folder, scratch: scratch,
                    environment: [variable: "http://puser:\(secret)@127.0.0.1:9", "no_proxy": "", "NO_PROXY": ""])
                #expect(sync.status != 0, "\(sync.stdout) \(sync.stderr)")
                let status = try await SyncAgentBinary.run(["status", "--json"] + folder, scratch: scratch)
                for (text, what) in [
                    (sync.stdout + sync.stderr, "sync"), (status.stdout + status.stderr, "status"),
                    (Self.stateBytes(scratch), "the state database"),
                ] {
                    #expect(!text.contains(secret) && !text.contains("S3cret"), "\(what): \(text.prefix(2_000))")
                }
            }
        }
    }

    @Test func aQueryTokenAndAMalformedHeaderAreNeverQuotedBack() async throws {
        try await withScratch { scratch in
            let folder = ["--dir", scratch + "/content", "--state", scratch + "/state.sqlite"]
            let query = try await SyncAgentBinary.run(
                ["sync", "--base-url", "http://127.0.0.1:9/s/?token=\(Self.token)"] + folder, scratch: scratch)
            #expect(query.status == 6 && query.stderr.contains("?token=***"), "\(query.stderr)")
            Self.expectNoSecret(query.stdout + query.stderr, "a base URL with ?token=")
            let status = try await SyncAgentBinary.run(["status", "--json"] + folder, scratch: scratch)
            Self.expectNoSecret(status.stdout + status.stderr, "status after it")
            Self.expectNoSecret(Self.stateBytes(scratch), "the state database")

            let header = try await SyncAgentBinary.run(
                [
                    "sync", "--base-url", "http://127.0.0.1:9/s/", "--header", "Accept: */*", "--header",
                    "Authorization token \(Self.password)",
                ] + folder, scratch: scratch)
            #expect(
                header.status == 6 && header.stderr.contains("--header number 2 has no ':'"), "\(header.stderr)")
            Self.expectNoSecret(header.stdout + header.stderr, "a --header without ':'")
        }
    }

    /// An audit: `cache get -H` values were never registered as secrets, so what an origin
    /// echoed of one (a redirect to `?t=<it>`, here to a closed port) was printed and stored
    /// in the folder's failure rows, and shown to later gets of the origin during its backoff.
    /// Servers escape in either case: both are masked.
    @Test(arguments: [false, true])
    func aCacheGetHeaderValueEchoedBackIsMasked(lowercaseEscapes: Bool) async throws {
        let origin = try ScriptedOrigin { request in
            let value = request.header("x-tenant") ?? request.header("authorization") ?? ""
            var escaped = value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? value
            if lowercaseEscapes { escaped = escaped.replacingOccurrences(of: "%2F", with: "%2f") }
            return ScriptedOrigin.Answer(status: 302, headers: ["Location: http://127.0.0.1:9/x?t=\(escaped)"])
        }
        defer { origin.stop() }
        try await withScratch { scratch in
            let value = "v/" + UUID().uuidString
            let cache = ["--cache", scratch + "/cache"]
            for (number, header) in ["X-Tenant: \(value)", "Authorization: Bearer \(value)"].enumerated() {
                let result = try await SyncAgentBinary.run(
                    ["cache", "get", origin.url("/item\(number)").absoluteString, "-H", header] + cache,
                    scratch: scratch)
                #expect(result.status == 3, "\(result.stderr)")
                // With a credential header the transport follows the redirect itself, and the
                // message names where it led.
                #expect(number == 0 || result.stderr.contains("t=***"), "\(result.stderr)")
                #expect(!(result.stdout + result.stderr).contains(value.dropFirst(2)), "\(result.stderr)")
            }
            // What the folder stored (the failure rows, in the index or its log) holds no part of it.
            for name in ["index.sqlite", "index.sqlite-wal"] {
                let bytes = (try? Data(contentsOf: URL(fileURLWithPath: scratch + "/cache/" + name))) ?? Data()
                #expect(!String(decoding: bytes, as: UTF8.self).contains(value.dropFirst(2)), "\(name)")
            }
        }
    }

    @Test("check-config prints alice:***@, and a refused base-url is quoted redacted")
    func checkConfig() async throws {
        try await withScratch { scratch in
            try Data(
                "storages:\n  docs:\n    base-url: https://alice:\(Self.password)@example.com/s/\n    dir: mirror\n"
                    .utf8
            )
            .write(to: URL(fileURLWithPath: scratch + "/good.yaml"))
            let good = try await SyncAgentBinary.run(["check-config", scratch + "/good.yaml"], scratch: scratch)
            #expect(
                good.status == 0 && good.stdout.contains("docs: https://alice:***@example.com/s/ → "),
                "\(good.stdout)\(good.stderr)")
            Self.expectNoSecret(good.stdout + good.stderr, "check-config")

            try Data("storages:\n  docs:\n    base-url: ftp://\(Self.token)@example.com/s/\n    dir: mirror\n".utf8)
                .write(to: URL(fileURLWithPath: scratch + "/bad.yaml"))
            let bad = try await SyncAgentBinary.run(["check-config", scratch + "/bad.yaml"], scratch: scratch)
            #expect(bad.status == 6 && bad.stderr.contains("'ftp://***@example.com/s/'"), "\(bad.stderr)")
            Self.expectNoSecret(bad.stdout + bad.stderr, "check-config of a bad file")
            let watch = try await SyncAgentBinary.run(["watch", "--config", scratch + "/bad.yaml"], scratch: scratch)
            #expect(watch.status == 6)
            Self.expectNoSecret(watch.stdout + watch.stderr, "watch --config of a bad file")
        }
    }

    @Test("watch --base-url with a token: the starting line shows ***@")
    func watchFlags() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: Self.storage12) { server in
                let base = Self.url(server, user: Self.token)
                let process = try ChildProcess(
                    SyncAgentBinary.path,
                    [
                        "watch", "--base-url", base, "--dir", scratch + "/content",
                        "--state", scratch + "/state.sqlite", "--log-format", "json",
                    ],
                    stderr: scratch + "/watch.log")
                async let exitStatus = process.exitStatus()
                var stopped = false
                defer { if !stopped { process.send(SIGKILL) } }
                let restored = try await WatchConfigTests.waitForLine(scratch, "the restore") {
                    $0["message"]?.hasPrefix("restored 1.2") == true
                }
                #expect(restored["storage"] == "content")
                process.send(SIGTERM)
                #expect(await exitStatus == 0)
                stopped = true
                let lines = WatchConfigTests.lines(scratch)
                let starting = try #require(lines.first { $0["message"] == "starting" })
                #expect(
                    starting["base-url"] == base.replacingOccurrences(of: Self.token, with: "***")
                        && starting["base-url"]?.hasPrefix("http://***@127.0.0.1:") == true,
                    "\(starting)")
                Self.expectNoSecret(
                    (try? String(contentsOfFile: scratch + "/watch.log", encoding: .utf8)) ?? "",
                    "watch --base-url's log")
            }
        }
    }

    @Test(
        "watch's log lines, in each format, and /metrics never show the secret",
        arguments: ["text", "journald", "json"])
    func watchLogsAndMetrics(format: String) async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: Self.storage12) { server in
                let config = """
                    http: 127.0.0.1:0
                    log-format: \(format)
                    storages:
                      good:
                        base-url: \(Self.url(server, user: "alice", password: Self.password))
                        dir: \(scratch)/good
                        state: \(scratch)/good.sqlite
                        interval: 1h
                      bad:
                        base-url: \(Self.url(server, user: Self.token, path: "missing/"))
                        dir: \(scratch)/bad
                        state: \(scratch)/bad.sqlite
                        interval: 1h

                    """
                try Data(config.utf8).write(to: URL(fileURLWithPath: scratch + "/agent.yaml"))
                let process = try ChildProcess(
                    SyncAgentBinary.path, ["watch", "--config", scratch + "/agent.yaml"],
                    stderr: scratch + "/watch.log")
                async let exitStatus = process.exitStatus()
                var stopped = false
                defer { if !stopped { process.send(SIGKILL) } }
                let log = { (try? String(contentsOfFile: scratch + "/watch.log", encoding: .utf8)) ?? "" }
                let endpoint = try await WatchConfigTests.endpoint(scratch, once: ["restored 1.2", "check failed"])
                let (code, metrics) = try await WatchConfigTests.get(endpoint + "/metrics", scratch: scratch)
                #expect(code == 200 && metrics.contains(#"storage="good""#), "\(metrics)")
                Self.expectNoSecret(metrics, "/metrics")

                process.send(SIGTERM)
                #expect(await exitStatus == 0)
                stopped = true
                let text = log()
                #expect(text.contains("restored 1.2") && text.contains("check failed"), "\(text)")
                #expect(
                    text.contains("alice:***@127.0.0.1") && text.contains("***@127.0.0.1"),
                    "the user name shows, the secret does not:\n\(text)")
                Self.expectNoSecret(text, "the \(format) log")
                for name in ["good", "bad"] {
                    let status = try await SyncAgentBinary.run(
                        ["status", "--json", "--dir", "\(scratch)/\(name)", "--state", "\(scratch)/\(name).sqlite"],
                        scratch: scratch)
                    Self.expectNoSecret(status.stdout + status.stderr, "status --json of \(name)")
                }
                Self.expectNoSecret(Self.stateBytes(scratch), "the state databases")
            }
        }
    }
}
