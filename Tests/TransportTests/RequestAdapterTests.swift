import Foundation
import StorageServer
import Synchronization
import Testing
import Transport

@Suite(.timeLimit(.minutes(3)))
struct RequestAdapterTests {
    /// Adds a numbered token and a query item, and maps `/private/…` to `/…`, counting its calls.
    static func privateRepositoryAdapter(calls: Recorder<String>) -> ClosureRequestAdapter {
        ClosureRequestAdapter { request in
            calls.append(request.url.path)
            request.headers["Authorization"] = "token t\(calls.all.count)"
            request.queryItems.append(URLQueryItem(name: "ref", value: "main"))
            if request.url.path.hasPrefix("/private/"),
                var parts = URLComponents(url: request.url, resolvingAgainstBaseURL: false)
            {
                parts.path = String(parts.path.dropFirst("/private".count))
                request.url = parts.url ?? request.url
            }
        }
    }

    @Test func adapterAddsAHeaderAndAQueryItemAndRewritesThePath() async throws {
        try await withServedFixture { server, fixture in
            let contents = randomBytes(5_000)
            try fixture.serve("x.json", contents)
            let calls = Recorder<String>()
            let transport = try makeTransport { $0.adapter = Self.privateRepositoryAdapter(calls: calls) }

            let response = try await transport.data(for: HTTPRequest(url: server.url(for: "private/x.json")))

            #expect(response.body == contents)
            #expect(response.url.path == "/x.json")
            #expect(response.url.query == "ref=main")
            #expect(calls.all == ["/private/x.json"])
            let log = server.requests()
            #expect(log.map(\.path) == ["/x.json"])
            #expect(log.first?.header("Authorization") == "token t1")
        }
    }

    @Test func adapterRunsAgainBeforeEachRetry() async throws {
        try await withServedFixture { server, fixture in
            let contents = randomBytes(5_000)
            try fixture.serve("x.json", contents)
            server.injectFault(.status(503), forPath: "/x.json", times: 2)
            let calls = Recorder<String>()
            let transport = try makeTransport { $0.adapter = Self.privateRepositoryAdapter(calls: calls) }

            let response = try await transport.data(for: HTTPRequest(url: server.url(for: "private/x.json")))

            #expect(response.body == contents)
            // Each attempt starts from the caller's request: no doubled query items or prefixes.
            #expect(calls.all == ["/private/x.json", "/private/x.json", "/private/x.json"])
            #expect(response.url.query == "ref=main")
            let log = server.requests()
            #expect(log.map(\.status) == [503, 503, 200])
            #expect(log.map(\.path) == ["/x.json", "/x.json", "/x.json"])
            #expect(log.map { $0.header("Authorization") } == ["token t1", "token t2", "token t3"])
        }
    }

    @Test func adapterAppliesToDownloadsAndTheirResumedAttempts() async throws {
        try await withServedFixture { server, fixture in
            let contents = randomBytes(800_000)
            try fixture.serve("archive.zip", contents)
            server.injectFault(.truncate(afterBytes: 100_000), forPath: "/archive.zip", times: 1)
            let calls = Recorder<String>()
            let transport = try makeTransport { $0.adapter = Self.privateRepositoryAdapter(calls: calls) }
            let destination = fixture.outPath("archive.zip")

            let response = try await transport.download(
                HTTPRequest(url: server.url(for: "private/archive.zip")),
                to: destination, options: DownloadOptions())

            #expect(fileContents(destination) == contents)
            #expect(response.bytesReceived == 800_000)
            #expect(calls.all.count == 2)
            let log = server.requests()
            #expect(log.map(\.status) == [200, 206])
            #expect(log.map { $0.header("Authorization") } == ["token t1", "token t2"])
            #expect(log.last?.range == "bytes=100000-")
        }
    }

    @Test func adapterErrorIsThrownAndNothingIsSent() async throws {
        struct MissingToken: Error {}
        try await withServedFixture { server, fixture in
            try fixture.serve("x.json", Data("x".utf8))
            let transport = try makeTransport { $0.adapter = ClosureRequestAdapter { _ in throw MissingToken() } }

            await #expect(throws: MissingToken.self) {
                try await transport.data(for: HTTPRequest(url: server.url(for: "x.json")))
            }
            #expect(server.requests().isEmpty)
        }
    }

    @Test func adapterCannotTurnARequestIntoAFileRead() async throws {
        let transport = try makeTransport {
            $0.adapter = ClosureRequestAdapter { $0.url = URL(fileURLWithPath: "/etc/hostname") }
        }

        let error = await #expect(throws: TransportError.self) {
            try await transport.data(for: HTTPRequest(url: URL(string: "http://127.0.0.1:9/x")!))
        }

        #expect(error?.code == .invalidRequest)
    }
}

/// A ``Transport`` that serves from a dictionary, as an app that fetches bytes itself would, and
/// keeps the requests it was handed.
struct DictionaryTransport: Transport {
    let files: [URL: Data]
    let seen = Recorder<HTTPRequest>()

    func data(for request: HTTPRequest) async throws -> HTTPResponse {
        seen.append(request)
        let url = request.resolvedURL
        guard let body = files[url] else {
            throw TransportError(
                code: .httpStatus, message: "\(url.absoluteString) is not in the dictionary",
                url: url, statusCode: 404)
        }
        return HTTPResponse(statusCode: 200, body: body, url: url, bytesReceived: Int64(body.count))
    }

    func download(_ request: HTTPRequest, to path: String, options: DownloadOptions) async throws -> HTTPResponse {
        var response = try await data(for: request)
        guard FileManager.default.createFile(atPath: path, contents: response.body) else {
            throw TransportError(code: .fileSystem, message: "cannot write \(path)", url: request.url)
        }
        response.fileSize = Int64(response.body.count)
        response.body = Data()
        return response
    }
}

@Suite(.timeLimit(.minutes(3)))
struct AdaptingTransportTests {
    @Test func customTransportWrappedInAnAdapterSeesTheAdaptedRequests() async throws {
        let base = try #require(URL(string: "https://storage.example/private/v1/index.json"))
        let adapted = try #require(URL(string: "https://storage.example/v1/index.json?ref=main"))
        let archive = try #require(URL(string: "https://storage.example/v1/archive.zip?ref=main"))
        let index = Data(#"{"version":"1"}"#.utf8)
        let zip = randomBytes(64_000)
        let inner = DictionaryTransport(files: [adapted: index, archive: zip])
        let calls = Recorder<String>()
        let transport = AdaptingTransport(
            base: inner, adapter: RequestAdapterTests.privateRepositoryAdapter(calls: calls))

        let response = try await transport.data(for: HTTPRequest(url: base))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "TransportTests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let destination = directory.appendingPathComponent("archive.zip").path
        let downloaded = try await transport.download(
            HTTPRequest(url: URL(string: "https://storage.example/private/v1/archive.zip")!),
            to: destination, options: DownloadOptions())

        #expect(response.body == index)
        #expect(response.url == adapted)
        #expect(downloaded.fileSize == 64_000)
        #expect(fileContents(destination) == zip)
        #expect(calls.all == ["/private/v1/index.json", "/private/v1/archive.zip"])
        let seen = inner.seen.all
        #expect(seen.map(\.resolvedURL) == [adapted, archive])
        #expect(seen.map { $0.headers["Authorization"] } == ["token t1", "token t2"])
    }

    @Test func customTransportErrorsPassThroughTheAdapterUnchanged() async throws {
        let inner = DictionaryTransport(files: [:])
        let transport = AdaptingTransport(base: inner, adapter: ClosureRequestAdapter { $0.headers["X-App"] = "1" })
        let url = try #require(URL(string: "https://storage.example/missing.json"))

        let error = await #expect(throws: TransportError.self) {
            try await transport.data(for: HTTPRequest(url: url))
        }

        #expect(error?.statusCode == 404)
        #expect(error?.url == url)
        #expect(inner.seen.all.map { $0.headers["X-App"] } == ["1"])
    }
}
