import Foundation
import StorageServer
import Synchronization
import Testing

@testable import Transport

/// Which schemes libcurl may follow a redirect to (`CURLOPT_REDIR_PROTOCOLS_STR`), by the scheme
/// of the request. The loopback tests follow http → http redirects for real; a TLS origin is not
/// available on loopback here, so the https rule is held by this table.
@Suite("A redirect never downgrades https to http")
struct RedirectProtocolTests {
    @Test(arguments: [
        ("https://raw.githubusercontent.com/o/r/main/RXCacheConfig/cacheStatus.json", "https"),
        ("HTTPS://example.com/s/", "https"),
        ("http://127.0.0.1:8080/s/", "http,https"),
        ("http://example.com/s/", "http,https"),
    ])
    func redirectSchemesFollowTheRequestsScheme(url: String, allowed: String) throws {
        #expect(CurlTransfer.redirectProtocols(from: try #require(URL(string: url))) == allowed)
    }

    /// A redirect to another origin (another port here) never takes the request's credential
    /// headers along: not `Authorization` (libcurl drops it itself), and not `X-Api-Key` or
    /// `Private-Token` (libcurl sends those on). Other headers go on, the response is the
    /// target's, with the redirect recorded; a redirect within the origin keeps them all.
    @Test func credentialHeadersStayOnTheirOrigin() async throws {
        let target = try ScriptedOrigin { _ in ScriptedOrigin.Answer(body: Data("there".utf8)) }
        let origin = try ScriptedOrigin { request in
            switch request.path {
            case "/away": ScriptedOrigin.Answer(status: 302, headers: ["Location: \(target.url("/t?x=1"))"])
            case "/near": ScriptedOrigin.Answer(status: 307, headers: ["Location: /here"])
            default: ScriptedOrigin.Answer(body: Data("here".utf8))
            }
        }
        defer {
            origin.stop()
            target.stop()
        }
        let transport = try makeTransport { $0.retry = .none }
        let headers = [
            "X-Api-Key": "KEY-1", "Private-Token": "TOKEN-2", "Authorization": "Bearer AUTH-3", "Accept": "text/plain",
        ]
        let away = try await transport.data(for: HTTPRequest(url: origin.url("/away"), headers: headers))
        #expect(String(decoding: away.body, as: UTF8.self) == "there")
        #expect(away.redirects.map(\.status) == [302])
        let reached = try #require(target.requests.first)
        #expect(reached.path == "/t" && reached.header("accept") == "text/plain")
        for name in ["x-api-key", "private-token", "authorization"] {
            #expect(reached.header(name) == nil, "\(name) went to another origin")
            #expect(origin.requests.first?.header(name) != nil, "\(name) went to its own origin")
        }
        let near = try await transport.data(for: HTTPRequest(url: origin.url("/near"), headers: headers))
        #expect(String(decoding: near.body, as: UTF8.self) == "here")
        #expect(origin.requests.last?.path == "/here" && origin.requests.last?.header("x-api-key") == "KEY-1")
    }

    /// libcurl follows any 3xx but 304 that names a place: a 300, 305 or 306 to another origin
    /// is stopped as a 302 is (an outside audit found X-Api-Key sent on behind a 300).
    @Test(arguments: [300, 305, 306, 399])
    func everyRedirectLibcurlFollowsIsStopped(status: Int) async throws {
        let target = try ScriptedOrigin { _ in ScriptedOrigin.Answer(body: Data("there".utf8)) }
        let origin = try ScriptedOrigin { _ in
            ScriptedOrigin.Answer(status: status, headers: ["Location: \(target.url("/t"))"])
        }
        defer {
            origin.stop()
            target.stop()
        }
        let transport = try makeTransport { $0.retry = .none }
        _ = try? await transport.data(for: HTTPRequest(url: origin.url("/r"), headers: ["X-Api-Key": "KEY-1"]))
        #expect(target.requests.allSatisfy { $0.header("x-api-key") == nil })
    }

    /// A Location is resolved by libcurl's own URL parser, as its redirect step does: its bytes
    /// (header text is Latin-1 here) with spaces and bytes past ASCII escaped, trimmed of what
    /// libcurl trims (the vertical tab and form feed too), against the answering URL. Foundation
    /// read `http:/b.example/x` and a leading vertical tab as the same origin, where libcurl goes
    /// to another: credentials went there (an outside audit).
    @Test(arguments: [
        ("/\u{C3}\u{A9}t\u{C3}\u{A9} x", "http://a.example/%c3%a9t%c3%a9%20x", "http://a.example:80"),
        ("next", "http://a.example/dir/next", "http://a.example:80"),
        ("http:/b.example/x", "http://b.example/x", "http://b.example:80"),
        ("http:///b.example/x", "http://b.example/x", "http://b.example:80"),
        ("\u{0B}http://b.example:81/x", "http://b.example:81/x", "http://b.example:81"),
        ("\u{0C}//b.example/x\u{0C}", "http://b.example/x", "http://b.example:80"),
        ("\thttp:/B.EXAMPLE/x ", "http://b.example/x", "http://b.example:80"),
        ("HTTPS://b.example/x", "https://b.example/x", "https://b.example:443"),
    ])
    func aLocationIsResolvedByLibcurlsOwnParser(location: String, url: String, origin: String) throws {
        let target = try #require(CurlTransfer.redirectTarget(location, from: "http://a.example/dir/page"))
        #expect(target.url.lowercased() == url)
        #expect(target.origin == origin)
    }

    @Test(arguments: ["  ", "\u{0B}", "http://b.example\u{0}/x", "http://[::1/x"])
    func aLocationLibcurlCannotReadIsNoTarget(location: String) {
        #expect(CurlTransfer.redirectTarget(location, from: "http://a.example/") == nil)
    }

    /// Heads that libcurl and the transport read differently (an empty first Location, a bare CR
    /// inside one, a status line amid the header lines): libcurl followed them to the other
    /// origin while the transport saw its own. A request with credential headers is now never
    /// redirected by libcurl, so the target only ever gets what the transport reads, and the
    /// other origin never gets a credential.
    @Test(arguments: [
        ["Location:", "Location: TARGET/t"], ["Location: \u{0B}", "Location: TARGET/t"],
        ["Location: TARGET\r@HOME/same"], ["Location: TARGET/t", "HTTP/1.1 302 x:y", "Location: /same"],
        ["Location: TARGET/t", "HTTP/1.1 302 x:y"],
    ])
    func headsLibcurlReadsOtherwiseCarryNoCredentialsElsewhere(lines: [String]) async throws {
        let target = try ScriptedOrigin { _ in ScriptedOrigin.Answer(body: Data("there".utf8)) }
        let homePort = Mutex(0)
        let home = try ScriptedOrigin { request in
            if request.path == "/same" { return ScriptedOrigin.Answer(body: Data("home".utf8)) }
            let base = target.url("/")
            let port = homePort.withLock { $0 }
            return ScriptedOrigin.Answer(
                status: 302,
                headers: lines.map {
                    $0.replacingOccurrences(of: "TARGET", with: "http://\(base.host!):\(base.port!)")
                        .replacingOccurrences(of: "HOME", with: "127.0.0.1:\(port)")
                })
        }
        homePort.withLock { $0 = home.port }
        defer {
            home.stop()
            target.stop()
        }
        let transport = try makeTransport { $0.retry = .none }
        let request = HTTPRequest(
            url: home.url("/r"), headers: ["X-Api-Key": "KEY-1", "Private-Token": "TOKEN-2", "Authorization": "A"])
        _ = try? await transport.data(for: request)
        #expect(
            target.requests.allSatisfy {
                $0.header("x-api-key") == nil && $0.header("private-token") == nil && $0.header("authorization") == nil
            })
        #expect(home.requests.allSatisfy { $0.header("x-api-key") == "KEY-1" })
    }

    /// A redirect of a request with credential headers to a scheme no redirect may take is
    /// refused as an answer, as libcurl refused it.
    @Test func aRedirectWithCredentialsToAnotherSchemeIsRefused() async throws {
        let origin = try ScriptedOrigin { _ in
            ScriptedOrigin.Answer(status: 302, headers: ["Location: file:///etc/passwd"])
        }
        defer { origin.stop() }
        let transport = try makeTransport { $0.retry = .none }
        await #expect(throws: TransportError.self) {
            _ = try await transport.data(for: HTTPRequest(url: origin.url("/r"), headers: ["X-Api-Key": "KEY-1"]))
        }
    }

    /// The spellings libcurl reads as another origin and Foundation did not: the credential
    /// headers stay behind, and the target is asked without them.
    @Test(arguments: ["http:/HOST/t", "http:///HOST/t", "\u{0B}http://HOST/t", "\u{0C}//HOST/t", "\thttp:/HOST/t"])
    func oddlySpelledRedirectsToAnotherOriginCarryNoCredentials(location: String) async throws {
        let target = try ScriptedOrigin { _ in ScriptedOrigin.Answer(body: Data("there".utf8)) }
        let base = target.url("/")
        let host = "\(try #require(base.host)):\(try #require(base.port))"
        let origin = try ScriptedOrigin { _ in
            ScriptedOrigin.Answer(
                status: 302, headers: ["Location: " + location.replacingOccurrences(of: "HOST", with: host)])
        }
        defer {
            origin.stop()
            target.stop()
        }
        let transport = try makeTransport { $0.retry = .none }
        let response = try? await transport.data(
            for: HTTPRequest(url: origin.url("/r"), headers: ["X-Api-Key": "KEY-1", "Private-Token": "TOKEN-2"]))
        #expect(response.map { String(decoding: $0.body, as: UTF8.self) } == "there")
        #expect(!target.requests.isEmpty)
        #expect(target.requests.allSatisfy { $0.header("x-api-key") == nil && $0.header("private-token") == nil })
    }
}

/// Answers whose fault is the server's or the proxy's say so, with a fix that fits.
@Suite("Refusals name who refused and the fix")
struct RefusalMessageTests {
    @Test func aHeaderLineTooLargeForLibcurlIsNamedNotCalledOutOfMemory() async throws {
        let origin = try ScriptedOrigin { _ in
            ScriptedOrigin.Answer(headers: ["X-Big: " + String(repeating: "b", count: 200_000)], body: Data("x".utf8))
        }
        defer { origin.stop() }
        let transport = try makeTransport { $0.retry = .none }
        await #expect {
            _ = try await transport.data(for: HTTPRequest(url: origin.url("/big")))
        } throws: { error in
            let message = (error as? TransportError)?.message ?? ""
            return message.contains("header line larger than libcurl takes") && !message.contains("Out of memory")
        }
    }

    @Test(arguments: [(401, "give credentials"), (403, "give credentials"), (407, "the proxy refused access")])
    func accessRefusalsNameTheirFix(status: Int, fix: String) {
        let error = TransportError.status(status, url: URL(string: "https://h.example/a")!, retryAfter: nil)
        #expect(error.message.contains(fix), "\(error.message)")
    }
}

/// A status HTTP does not define is no answer at all, for data and every-status requests alike.
@Suite("A status outside 100 to 599 is refused")
struct UndefinedStatusTests {
    @Test(arguments: [false, true])
    func aStatusHTTPDoesNotDefineIsRefused(everyStatus: Bool) async throws {
        let origin = try ScriptedOrigin { _ in ScriptedOrigin.Answer(status: 999, body: Data("odd".utf8)) }
        defer { origin.stop() }
        let transport = try makeTransport { $0.retry = .none }
        var request = HTTPRequest(url: origin.url("/odd"))
        request.returnsEveryStatus = everyStatus
        await #expect {
            _ = try await transport.data(for: request)
        } throws: { error in
            let error = error as? TransportError
            return error?.code == .invalidResponse && error?.message.contains("not one HTTP defines") == true
        }
    }
}

/// A proxy variable libcurl would ignore (a control character in its URL, escaped or not) is
/// refused by name, its value never quoted; a proxy variable without one is taken.
@Suite("A proxy variable libcurl would ignore is refused")
struct ProxyVariableTests {
    @Test(arguments: [
        ("http_proxy", "http://user:PASS%0aWORD@127.0.0.1:9", true),
        ("ALL_PROXY", "http://user:PASS\rWORD@127.0.0.1:9", true),
        ("HTTPS_PROXY", "http://user:PASS%00@127.0.0.1:9", true),
        ("http_proxy", "http://user:PASS%20WORD@127.0.0.1:9", false),
        ("no_proxy", "a%0ab", false),
    ])
    func proxyVariables(name: String, value: String, refused: Bool) {
        do {
            try CurlTransport.checkProxyVariables([name: value])
            #expect(!refused)
        } catch {
            #expect(refused)
            #expect(error.message.contains(name) && !error.message.contains("PASS"), "\(error.message)")
        }
    }
}
