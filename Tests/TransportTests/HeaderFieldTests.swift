import Foundation
import StorageServer
import Testing
import Transport

/// RFC 9110 §5.3: field lines of one name combine into one list; the lines stay available.
@Suite struct HeaderFieldTests {
    @Test(
        "combining field lines (RFC 9110 §5.3)",
        arguments: [
            // (lines, name, combined value)
            (
                [("cache-control", "no-store"), ("cache-control", "max-age=3600")], "cache-control",
                "no-store, max-age=3600"
            ),
            ([("age", "7200"), ("age", "0")], "age", "7200, 0"),
            ([("vary", "Accept"), ("vary", "Accept-Language")], "vary", "Accept, Accept-Language"),
            ([("etag", "\"a\""), ("etag", "\"b\"")], "etag", "\"a\", \"b\""),
            // An empty line adds no list element (§5.6.1).
            ([("cache-control", ""), ("cache-control", "no-cache")], "cache-control", "no-cache"),
            ([("cache-control", "no-cache"), ("cache-control", "")], "cache-control", "no-cache"),
            // Set-Cookie cannot be combined (RFC 6265 §3): the last line stands.
            ([("set-cookie", "a=1"), ("set-cookie", "b=2")], "set-cookie", "b=2"),
        ])
    func combining(lines: [(String, String)], name: String, combined: String) {
        let fields = lines.map { HTTPHeaderField(name: $0.0, value: $0.1) }
        #expect(HTTPHeaderField.combined(fields)[name] == combined)
    }

    @Test(
        "a Content-Encoding value's codings (RFC 9110 §8.4): in order, lower-cased, without identity",
        arguments: [
            (nil, []),
            ("", []),
            (" \t", []),
            ("identity", []),
            ("gzip", ["gzip"]),
            ("GZip", ["gzip"]),
            (" x-gzip\t", ["x-gzip"]),
            ("identity, gzip", ["gzip"]),
            ("deflate, gzip", ["deflate", "gzip"]),
            ("gzip,,br", ["gzip", "br"]),
            (", IDENTITY ,", []),
        ] as [(String?, [String])])
    func contentCodings(value: String?, codings: [String]) {
        #expect(HTTPHeaderField.contentCodings(value) == codings)
    }

    @Test("a name is lower-cased")
    func lowerCased() {
        #expect(HTTPHeaderField(name: "Cache-Control", value: "x").name == "cache-control")
    }

    @Test("a response keeps every line and combines each name, over a real socket")
    func overTheWire() async throws {
        let origin = try ScriptedOrigin { _ in
            ScriptedOrigin.Answer(
                headers: [
                    "Cache-Control: no-store", "Cache-Control: max-age=3600", "Age: 7200", "Age: 0",
                    "Vary: Accept", "vary: Accept-Language", "ETag: \"a\"", "ETag: \"b\"",
                    "Set-Cookie: a=1", "Set-Cookie: b=2",
                ], body: Data("x".utf8))
        }
        defer { origin.stop() }
        let transport = try makeTransport()
        defer { Task { await transport.shutdown() } }
        for download in [false, true] {
            let response: HTTPResponse
            if download {
                let fixture = FileManager.default.temporaryDirectory.appendingPathComponent("hf-\(UUID().uuidString)")
                defer { try? FileManager.default.removeItem(at: fixture) }
                response = try await transport.download(
                    HTTPRequest(url: origin.url("/x")), to: fixture.path, options: DownloadOptions())
            } else {
                response = try await transport.data(for: HTTPRequest(url: origin.url("/x")))
            }
            #expect(response.headers["cache-control"] == "no-store, max-age=3600")
            #expect(response.headers["age"] == "7200, 0")
            #expect(response.headers["vary"] == "Accept, Accept-Language")
            #expect(response.headers["etag"] == "\"a\", \"b\"")
            #expect(response.headers["set-cookie"] == "b=2")
            let cookies = response.headerFields.filter { $0.name == "set-cookie" }.map(\.value)
            #expect(cookies == ["a=1", "b=2"])
            #expect(response.headerFields.filter { $0.name == "cache-control" }.count == 2)
        }
    }

    @Test("a request that takes every status gets a 404's body, a 204, and a 503 after its retries")
    func everyStatus() async throws {
        let statuses = ["/missing": 404, "/empty": 204, "/failing": 503, "/gone": 410]
        let origin = try ScriptedOrigin { request in
            let status = statuses[request.path] ?? 200
            return ScriptedOrigin.Answer(
                status: status, headers: ["Cache-Control: max-age=60"], body: Data("page \(status)".utf8))
        }
        defer { origin.stop() }
        let transport = try makeTransport()
        defer { Task { await transport.shutdown() } }
        for (path, status) in statuses {
            var request = HTTPRequest(url: origin.url(path))
            request.returnsEveryStatus = true
            let response = try await transport.data(for: request)
            #expect(response.statusCode == status)
            #expect(response.body == (status == 204 ? Data() : Data("page \(status)".utf8)))
            #expect(response.headers["cache-control"] == "max-age=60")
        }
        // The 503 is transient: retried (the quick policy's four attempts), then returned.
        #expect(origin.requestCount(forPath: "/failing") == 4)
        // Without the flag a 404 is still an error.
        await #expect(throws: TransportError.self) {
            _ = try await transport.data(for: HTTPRequest(url: origin.url("/missing")))
        }
    }

    @Test("a per-request retry policy wins over the transport's; a refused connection is tried once when told")
    func perRequestRetry() async throws {
        let origin = try ScriptedOrigin { _ in ScriptedOrigin.Answer(status: 503) }
        let attempts = Recorder<String>()
        let transport = try makeTransport { configuration in
            configuration.adapter = ClosureRequestAdapter { request in attempts.append(request.url.path) }
        }
        defer { Task { await transport.shutdown() } }
        var request = HTTPRequest(url: origin.url("/once"))
        request.retry = RetryPolicy.none
        await #expect(throws: TransportError.self) { _ = try await transport.data(for: request) }
        #expect(origin.requestCount(forPath: "/once") == 1)

        origin.stop()
        var refused = HTTPRequest(url: origin.url("/refused"))
        var policy = RetryPolicy.quick
        policy.retriesFailedConnections = false
        refused.retry = policy
        let error = await #expect(throws: TransportError.self) { _ = try await transport.data(for: refused) }
        #expect(error?.failedToConnect == true)
        #expect(attempts.all.filter { $0 == "/refused" }.count == 1)
        // The transport's own policy retries it.
        await #expect(throws: TransportError.self) {
            _ = try await transport.data(for: HTTPRequest(url: origin.url("/retried")))
        }
        #expect(attempts.all.filter { $0 == "/retried" }.count == 4)
    }
}
