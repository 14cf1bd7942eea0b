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
            Self.expectCancelled(result)
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
            Self.expectCancelled(result)
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

            for result in results { Self.expectCancelled(result) }
            #expect(server.requests().isEmpty)
        }
    }

    /// The race a group closes: with one connection, removing the cancelled stalled transfer
    /// frees it, and libcurl would start the next queued one. Only the stalled transfer's task is
    /// cancelled here, so without its group every queued transfer would be served.
    @Test func aCancelledGroupsQueuedTransfersNeverStartWhenTheConnectionFrees() async throws {
        try await withServedFixture { server, fixture in
            for index in 0..<4 { try fixture.serve("queued-\(index).json", Data("\(index)".utf8)) }
            try fixture.serve("other.json", Data("other".utf8))
            let transport = try Self.oneStalledConnection(server, fixture)
            let group = TransferGroup()
            let stalled = Task {
                try await TransferGroup.$current.withValue(group) {
                    try await Self.downloadStalled(transport, server, fixture)
                }
            }
            try await Self.waitForFirstRequest(on: server)
            let queued = (0..<4).map { index in
                Task {
                    try await TransferGroup.$current.withValue(group) {
                        try await transport.data(for: HTTPRequest(url: server.url(for: "queued-\(index).json")))
                    }
                }
            }
            // A transfer of no group, queued behind the same connection, is not the group's to stop.
            let other = Task { try await transport.data(for: HTTPRequest(url: server.url(for: "other.json"))) }
            try await Task.sleep(for: .milliseconds(200))

            group.cancel()
            stalled.cancel()
            Self.expectCancelled(await stalled.result)
            for task in queued { Self.expectCancelled(await task.result) }
            #expect(try await other.value.body == Data("other".utf8))
            try await Task.sleep(for: .milliseconds(300))
            #expect(server.requests().map(\.path) == ["/stalled.bin", "/other.json"])
        }
    }

    @Test func cancellingAGroupAloneStopsItsRunningAndQueuedTransfersAndItsNextRequests() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("queued.json", Data("queued".utf8))
            let transport = try Self.oneStalledConnection(server, fixture)
            let group = TransferGroup()
            let job = Task {
                try await TransferGroup.$current.withValue(group) {
                    try await withThrowingTaskGroup(of: Void.self) { tasks in
                        tasks.addTask { _ = try await Self.downloadStalled(transport, server, fixture) }
                        tasks.addTask {
                            try await Self.waitForFirstRequest(on: server)
                            _ = try await transport.data(for: HTTPRequest(url: server.url(for: "queued.json")))
                        }
                        try await tasks.waitForAll()
                    }
                }
            }
            try await Self.waitForFirstRequest(on: server)
            try await Task.sleep(for: .milliseconds(200))
            // No task is cancelled: the group's flag alone ends the stalled transfer (its next
            // progress callback) and the queued one (the loop's next turn), well before the stall.
            group.cancel()
            Self.expectCancelled(await job.result)
            // A request made in the cancelled group later fails without reaching the server.
            Self.expectCancelled(
                await Result {
                    try await TransferGroup.$current.withValue(group) {
                        try await transport.data(for: HTTPRequest(url: server.url(for: "queued.json")))
                    }
                })
            #expect(server.requests().map(\.path) == ["/stalled.bin"])
        }
    }
}

extension CurlTransportCancellationTests {
    /// A transport with one connection (one loop), which a download of `stalled.bin` will hold:
    /// the server stalls it, so whatever is asked after it waits in libcurl's queue.
    static func oneStalledConnection(_ server: StorageServer, _ fixture: Fixture) throws -> CurlTransport {
        try fixture.serve("stalled.bin", randomBytes(200_000))
        server.injectFault(.stall, forPath: "/stalled.bin")
        return try makeTransport {
            $0.maxConnectionsPerHost = 1
            $0.ioThreads = 1
        }
    }

    /// The download that holds ``oneStalledConnection(_:_:)``'s connection.
    static func downloadStalled(_ transport: CurlTransport, _ server: StorageServer, _ fixture: Fixture)
        async throws -> HTTPResponse
    {
        try await transport.download(
            HTTPRequest(url: server.url(for: "stalled.bin")), to: fixture.outPath("stalled.bin"),
            options: DownloadOptions())
    }

    /// Records an issue unless `result` is a ``TransportError`` with the code `cancelled`.
    static func expectCancelled<Success>(
        _ result: Result<Success, any Error>, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        guard case .failure(let error as TransportError) = result else {
            Issue.record("expected a cancelled transfer, got \(result)", sourceLocation: sourceLocation)
            return
        }
        #expect(error.code == .cancelled, sourceLocation: sourceLocation)
    }

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
