import Foundation
import StorageServer
import Testing
import Transport

@Suite(.timeLimit(.minutes(3)))
struct CurlTransportCancellationTests {
    @Test func cancellingAStalledDownloadThrowsCancelledPromptlyAndTheTransportKeepsWorking() async throws {
        try await withServedFixture { server, fixture in
            let contents = randomBytes(1_000_000)
            try fixture.serve("stalled.zip", contents)
            try fixture.serve("next.json", Data("next".utf8))
            server.injectFault(.stall, forPath: "/stalled.zip")
            let transport = try makeTransport()
            let url = server.url(for: "stalled.zip")
            let destination = fixture.outPath("stalled.zip")

            let download = Task {
                try await transport.download(HTTPRequest(url: url), to: destination, options: DownloadOptions())
            }
            try await Self.waitForFirstRequest(on: server)
            try await Task.sleep(for: .milliseconds(200))
            let start = ContinuousClock.now
            download.cancel()
            let result = await download.result

            // The stall would hold the connection for 60 s and the stall timeout is 30 s.
            #expect(start.duration(to: .now) < .seconds(20)) // well under the 30 s stall timeout
            guard case .failure(let error as TransportError) = result else {
                Issue.record("expected a TransportError, got \(result)")
                return
            }
            #expect(error.code == .cancelled)
            #expect(error.url == url)
            #expect(server.requests().map(\.path) == ["/stalled.zip"])

            let next = try await transport.data(for: HTTPRequest(url: server.url(for: "next.json")))
            #expect(next.body == Data("next".utf8))
            server.clearFaults()
            let again = try await transport.download(HTTPRequest(url: url), to: destination, options: DownloadOptions())
            #expect(again.statusCode == 200)
            #expect(fileContents(destination) == contents)
        }
    }

    @Test func cancellingAStalledDataRequestThrowsCancelled() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("slow.json", randomBytes(10_000))
            server.injectFault(.stall, forPath: "/slow.json")
            let transport = try makeTransport()
            let url = server.url(for: "slow.json")

            let request = Task { try await transport.data(for: HTTPRequest(url: url)) }
            try await Self.waitForFirstRequest(on: server)
            try await Task.sleep(for: .milliseconds(200))
            let start = ContinuousClock.now
            request.cancel()
            let result = await request.result

            #expect(start.duration(to: .now) < .seconds(20)) // well under the 30 s stall timeout
            guard case .failure(let error as TransportError) = result else {
                Issue.record("expected a TransportError, got \(result)")
                return
            }
            #expect(error.code == .cancelled)
            #expect(server.requests().count == 1)
        }
    }

    @Test func cancellingDuringARetryWaitThrowsCancelledWithoutAnotherAttempt() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("index.json", Data("{}".utf8))
            server.injectFault(.tooManyRequests(retryAfter: 30), forPath: "/index.json", times: 1)
            let transport = try makeTransport()
            let url = server.url(for: "index.json")

            let request = Task { try await transport.data(for: HTTPRequest(url: url)) }
            // Once the 429 is in the log, the transport is sleeping before its retry.
            try await Self.waitForFirstRequest(on: server)
            try await Task.sleep(for: .milliseconds(100))
            let start = ContinuousClock.now
            request.cancel()
            let result = await request.result

            #expect(start.duration(to: .now) < .seconds(20)) // well under the 30 s stall timeout
            guard case .failure(let error as TransportError) = result else {
                Issue.record("expected a TransportError, got \(result)")
                return
            }
            #expect(error.code == .cancelled)
            #expect(server.requests().map(\.status) == [429])
        }
    }

    @Test func requestInAnAlreadyCancelledTaskThrowsCancelledWithoutSendingAnything() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("index.json", Data("{}".utf8))
            let transport = try makeTransport()
            let url = server.url(for: "index.json")
            let destination = fixture.outPath("index.json")

            let results = await Task {
                withUnsafeCurrentTask { $0?.cancel() }
                let data = await Result { try await transport.data(for: HTTPRequest(url: url)) }
                let download = await Result {
                    try await transport.download(HTTPRequest(url: url), to: destination, options: DownloadOptions())
                }
                return [data, download]
            }.value

            for result in results {
                guard case .failure(let error as TransportError) = result else {
                    Issue.record("expected a TransportError, got \(result)")
                    continue
                }
                #expect(error.code == .cancelled)
            }
            #expect(server.requests().isEmpty)
        }
    }
}

extension CurlTransportCancellationTests {
    /// Returns once the server has answered a request, so a cancellation lands mid-transfer.
    static func waitForFirstRequest(on server: StorageServer) async throws {
        while server.requests().isEmpty {
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}

extension Result where Failure == any Error {
    /// The outcome of an async throwing call.
    init(catching body: () async throws -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
    }
}
