import Foundation
import StorageServer
import Testing
import Transport

/// The transport's lifetime is explicit: `shutdown()` is an async call that fails what runs,
/// refuses what comes after, and returns once libcurl's handles are freed; and a libcurl that
/// refuses an option fails at start-up, naming it, instead of at the first request.
@Suite(.timeLimit(.minutes(3)))
struct CurlTransportLifecycleTests {
    @Test func shutdownFailsARunningTransferAndRefusesLaterOnes() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("stalled.zip", randomBytes(100_000))
            try fixture.serve("next.json", Data("next".utf8))
            server.injectFault(.stall, forPath: "/stalled.zip")
            let transport = try makeTransport { $0.retry = .none }
            let stalled = Task {
                try await transport.download(
                    HTTPRequest(url: server.url(for: "stalled.zip")), to: fixture.outPath("stalled.zip"),
                    options: DownloadOptions())
            }
            try await CurlTransportCancellationTests.waitForFirstRequest(on: server)
            await transport.shutdown()
            guard case .failure(let error as TransportError) = await stalled.result else {
                Issue.record("the running download did not fail")
                return
            }
            #expect(error.code == .cancelled)

            let later = await #expect(throws: TransportError.self) {
                try await transport.data(for: HTTPRequest(url: server.url(for: "next.json")))
            }
            #expect(later?.code == .cancelled)
            #expect(later?.message.contains("shut down") == true)
            #expect(
                !server.requests().contains { $0.path == "/next.json" }, "nothing reaches the server after shutdown")
            // A second shutdown returns at once.
            await transport.shutdown()
        }
    }

    @Test func aTransportThatIsShutDownBeforeUseStillAnswersEveryCaller() async throws {
        let transport = try makeTransport()
        await transport.shutdown()
        let results = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<8 {
                group.addTask {
                    do {
                        _ = try await transport.data(for: HTTPRequest(url: URL(string: "http://127.0.0.1:9/\(index)")!))
                        return false
                    } catch let error as TransportError {
                        return error.code == .cancelled
                    } catch {
                        return false
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results == Array(repeating: true, count: 8))
    }

    @Test func anOptionLibcurlRefusesFailsAtStartUpNamingIt() {
        var configuration = CurlTransport.Configuration()
        // libcurl takes -1 (unlimited) or more redirects and refuses anything below.
        configuration.maxRedirects = -5
        let error = #expect(throws: TransportError.self) { try CurlTransport(configuration: configuration) }
        #expect(error?.message.contains("CURLOPT_MAXREDIRS") == true)
    }
}
