import Foundation
import Logging
import StorageServer
import Testing

@testable import Transport

@Suite(.timeLimit(.minutes(3)))
struct CurlTransportRetryTests {
    @Test func twoServiceUnavailableAnswersThenSuccessIsRetriedToSuccess() async throws {
        try await withServedFixture { server, fixture in
            let contents = randomBytes(4_000)
            try fixture.serve("index.json", contents)
            server.injectFault(.status(503), forPath: "/index.json", times: 2)

            let response = try await makeTransport().data(for: HTTPRequest(url: server.url(for: "index.json")))

            #expect(response.body == contents)
            #expect(server.requests().map(\.status) == [503, 503, 200])
        }
    }

    @Test func retriesStopAfterMaxAttemptsWithTheLastStatus() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("index.json", Data("{}".utf8))
            server.injectFault(.status(502), forPath: "/index.json")

            let error = await #expect(throws: TransportError.self) {
                try await makeTransport().data(for: HTTPRequest(url: server.url(for: "index.json")))
            }

            #expect(error?.statusCode == 502)
            #expect(server.requests().map(\.status) == [502, 502, 502, 502])
        }
    }

    @Test func tooManyRequestsWaitsForRetryAfterThenSucceeds() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("index.json", Data("ok".utf8))
            server.injectFault(.tooManyRequests(retryAfter: 1), forPath: "/index.json", times: 1)
            let log = CapturedLog()
            let transport = try makeTransport { $0.logger = log.logger }

            let response = try await transport.data(for: HTTPRequest(url: server.url(for: "index.json")))

            #expect(response.body == Data("ok".utf8))
            #expect(server.requests().map(\.status) == [429, 200])
            // The quick policy would wait at most 50 ms; the wait chosen is the server's second.
            let delays = log.entries.compactMap { $0.metadata["transport.delay_ms"].flatMap { Int("\($0)") } }
            #expect(delays.count == 1)
            #expect(delays.allSatisfy { $0 >= 1_000 })
        }
    }

    @Test func noRetryPolicyFailsOnTheFirstServiceUnavailable() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("index.json", Data("{}".utf8))
            server.injectFault(.status(503), forPath: "/index.json", times: 1)
            let transport = try makeTransport { $0.retry = .none }

            let error = await #expect(throws: TransportError.self) {
                try await transport.data(for: HTTPRequest(url: server.url(for: "index.json")))
            }

            #expect(error?.code == .httpStatus)
            #expect(error?.statusCode == 503)
            #expect(error?.isTransient == true)
            #expect(server.requests().map(\.status) == [503])
        }
    }

    @Test func retryAfterLongerThanMaxRetryAfterFailsWithoutWaiting() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("index.json", Data("{}".utf8))
            server.injectFault(.tooManyRequests(retryAfter: 600), forPath: "/index.json", times: 1)
            let transport = try makeTransport { $0.retry.maxRetryAfter = .seconds(5) }
            let start = ContinuousClock.now

            let error = await #expect(throws: TransportError.self) {
                try await transport.data(for: HTTPRequest(url: server.url(for: "index.json")))
            }

            #expect(start.duration(to: .now) < .seconds(30), "gave up instead of waiting 600 s")
            #expect(error?.statusCode == 429)
            #expect(error?.retryAfter == 600)
            #expect(error?.message.contains("rate-limiting") == true)
            #expect(server.requests().map(\.status) == [429])
        }
    }

    /// A `Retry-After` past any duration a process can hold (`1e300`, `1e16` seconds, a date
    /// thousands of years ahead) is a wait past `maxRetryAfter`: the request fails with the
    /// server's status, and the process does not trap converting it.
    @Test(arguments: ["1e300", "10000000000000000", "Fri, 31 Dec 9999 23:59:59 GMT"])
    func aRetryAfterPastAnyDurationFailsWithoutATrap(_ value: String) async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("index.json", Data("{}".utf8))
            server.injectFault(
                .status(503, headers: ["Retry-After": value]), forPath: "/index.json", times: 1)
            let transport = try makeTransport { _ in }
            let error = await #expect(throws: TransportError.self) {
                try await transport.data(for: HTTPRequest(url: server.url(for: "index.json")))
            }
            #expect(error?.statusCode == 503)
            #expect(server.requests().map(\.status) == [503])
        }
    }

    /// Timeouts configured as long as a `Duration` goes ("never"): the transport sets them to
    /// libcurl's largest, and a request works.
    @Test func timeoutsAsLongAsADurationGoesAreTheLargestLibcurlTakes() async throws {
        #expect(Duration.seconds(Int64.max).milliseconds == .max)
        #expect(Duration.seconds(Int64.min).milliseconds == .min)
        #expect(Duration.milliseconds(1_500).milliseconds == 1_500)
        try await withServedFixture { server, fixture in
            try fixture.serve("index.json", Data("{}".utf8))
            let transport = try makeTransport {
                $0.connectTimeout = .seconds(Int64.max)
                $0.stallTimeout = .seconds(Int64.max)
                $0.dataTimeout = .seconds(Int64.max)
            }
            let response = try await transport.data(for: HTTPRequest(url: server.url(for: "index.json")))
            #expect(response.statusCode == 200)
        }
    }

    @Test func clientErrorsAreNotRetried() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("index.json", Data("{}".utf8))
            server.injectFault(.status(403), forPath: "/index.json", times: 1)

            let error = await #expect(throws: TransportError.self) {
                try await makeTransport().data(for: HTTPRequest(url: server.url(for: "index.json")))
            }

            #expect(error?.statusCode == 403)
            #expect(error?.message.contains("give credentials") == true)
            #expect(server.requests().map(\.status) == [403])
        }
    }

    @Test func stalledDownloadTimesOutAndTheRetryResumesAfterTheBytesOnDisk() async throws {
        // libcurl averages speed over a few seconds; a 1-byte stall drops under 1 byte/s soonest.
        var configuration = StorageServer.Configuration()
        configuration.stallAfterBytes = 1
        try await withServedFixture(configuration: configuration) { server, fixture in
            let contents = randomBytes(400_000)
            try fixture.serve("a.bin", contents)
            server.injectFault(.stall, forPath: "/a.bin", times: 1)
            // Long enough for the first byte to land on disk on a loaded machine (the whole suite
            // runs in parallel, and the server shares the test process's cooperative pool): the
            // retry must find it there to resume after it. 3 s was missed once with `make chaos`
            // building beside `make test`.
            let transport = try makeTransport { $0.stallTimeout = .seconds(10) }
            let destination = fixture.outPath("a.bin")

            let response = try await transport.download(
                HTTPRequest(url: server.url(for: "a.bin")), to: destination,
                options: DownloadOptions())

            let log = server.requests()
            #expect(log.map(\.status) == [200, 206])
            #expect(log.last?.range == "bytes=1-")
            #expect(response.resumedFrom == 1)
            #expect(response.bytesReceived == 400_000)
            #expect(fileContents(destination) == contents)
        }
    }

    @Test func bodyTrickledFarBelowTheMinimumRateFailsAsATimeoutLikeAStall() async throws {
        try await withServedFixture { server, fixture in
            // 2 bytes a second never goes silent: only a rate rule ends it (200 bytes would take 100 s).
            try fixture.serve("a.bin", randomBytes(200))
            server.injectFault(.trickle(bytesPerSecond: 2), forPath: "/a.bin")
            let transport = try makeTransport {
                $0.retry = .none
                $0.stallTimeout = .seconds(2)
            }
            let destination = fixture.outPath("a.bin")

            let error = await #expect(throws: TransportError.self) {
                try await transport.download(
                    HTTPRequest(url: server.url(for: "a.bin")), to: destination,
                    options: DownloadOptions())
            }

            #expect(error?.code == .timeout)
            #expect(error?.curlCode == 28) // CURLE_OPERATION_TIMEDOUT
            #expect(error?.isTransient == true)
            #expect(fileContents(destination).count < 200)
        }
    }

    /// The body is paced by a `ScriptedOrigin`, on threads of its own: `StorageServer`'s trickle
    /// runs on the task pool the other tests share, and a test holding that pool for longer than
    /// the rate window (14 s once, on 2 cores) silenced it and failed this test for no fault of
    /// the transport.
    @Test func bodyAboveTheMinimumRateIsNotCutOff() async throws {
        try await withServedFixture { _, fixture in
            // 8 s at 8 times the minimum: two whole rate windows, with room for a loaded machine.
            let contents = randomBytes(64_000)
            let origin = try ScriptedOrigin { _ in .init(body: contents, bytesPerSecond: 8_000) }
            defer { origin.stop() }
            let transport = try makeTransport {
                $0.retry = .none
                $0.stallTimeout = .seconds(4)
                $0.minimumRate = 1_000
            }
            let destination = fixture.outPath("a.bin")

            let response = try await transport.download(
                HTTPRequest(url: origin.url("/a.bin")), to: destination, options: DownloadOptions())

            #expect(response.statusCode == 200)
            #expect(fileContents(destination) == contents)
            #expect(origin.requestCount(forPath: "/a.bin") == 1)
        }
    }

    /// A burst every few seconds keeps libcurl's own speed check (its last few seconds) above
    /// the minimum, while each whole window gets less than its share: 6,000 bytes every 7.5 s is
    /// 800 bytes/s, under a 1,000 bytes/s minimum over 8 s windows. The window rule ends it.
    @Test func burstsThatAverageUnderTheMinimumOverAWindowAreCutOff() async throws {
        try await withServedFixture { _, fixture in
            let contents = randomBytes(120_000)
            let origin = try ScriptedOrigin { _ in .init(body: contents, bytesPerSecond: 6_000, chunkInterval: 7.5) }
            defer { origin.stop() }
            let transport = try makeTransport {
                $0.retry = .none
                $0.stallTimeout = .seconds(8)
                $0.minimumRate = 1_000
            }
            let error = await #expect(throws: TransportError.self) {
                try await transport.download(
                    HTTPRequest(url: origin.url("/bursts.bin")), to: fixture.outPath("b.bin"),
                    options: DownloadOptions())
            }
            #expect(error?.code == .timeout)
            #expect(error?.message.contains("under the minimum of 1000 bytes/s") == true, "\(error?.message ?? "")")
        }
    }

    @Test func requestTimeoutEndsAStalledRequestAsATimeout() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("a.json", randomBytes(10_000))
            server.injectFault(.stall, forPath: "/a.json")
            let transport = try makeTransport { $0.retry = .none }

            let error = await #expect(throws: TransportError.self) {
                try await transport.data(for: HTTPRequest(url: server.url(for: "a.json"), timeout: .seconds(1)))
            }

            #expect(error?.code == .timeout)
            #expect(error?.curlCode == 28) // CURLE_OPERATION_TIMEDOUT
            #expect(error?.isTransient == true)
            // Not retried. (Under load the time limit may run out before the server logs the request.)
            #expect(server.requests().count <= 1)
        }
    }

    @Test func connectionRefusedIsANetworkErrorWithItsCurlCode() async throws {
        // A port that was just listening and is now closed refuses connections.
        let url = try await withServedFixture { server, _ in server.url(for: "gone.json") }
        let transport = try makeTransport { $0.retry = .none }

        let error = await #expect(throws: TransportError.self) {
            try await transport.data(for: HTTPRequest(url: url))
        }

        #expect(error?.code == .network)
        #expect(error?.curlCode == 7) // CURLE_COULDNT_CONNECT
        #expect(error?.isTransient == true)
        #expect(error?.message.contains(url.absoluteString) == true)
    }
}

/// A swift-log handler that keeps every entry, to read what the transport decided.
final class CapturedLog: Sendable {
    struct Entry: Sendable {
        var message: String
        var metadata: Logger.Metadata
    }

    private let recorder = Recorder<Entry>()

    var entries: [Entry] { recorder.all }

    var logger: Logger {
        let recorder = self.recorder
        var logger = Logger(label: "transport-tests") { _ in Handler(recorder: recorder) }
        logger.logLevel = .trace
        return logger
    }

    private struct Handler: LogHandler {
        let recorder: Recorder<Entry>
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            var merged = metadata
            merged.merge(event.metadata ?? [:]) { $1 }
            recorder.append(Entry(message: "\(event.message)", metadata: merged))
        }
    }
}
