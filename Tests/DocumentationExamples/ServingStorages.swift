import Foundation
import StorageServer
import Testing
import Transport

/// The StorageServer guide's examples (Sources/StorageServer/StorageServer.docc), compiled and run.
@Suite("StorageServer's documented examples work", .timeLimit(.minutes(3)))
struct ServingStoragesExamples {
    /// Two versions of a tiny storage, each in its own folder.
    func versions(in scratch: String) throws -> (v1: URL, v2: URL) {
        for (version, text) in [("v1", "one"), ("v2", "two")] {
            try FileManager.default.createDirectory(atPath: scratch + "/\(version)", withIntermediateDirectories: true)
            try Data("{\"text\": \"\(text)\"}".utf8).write(to: URL(fileURLWithPath: scratch + "/\(version)/index.json"))
        }
        return (URL(fileURLWithPath: scratch + "/v1"), URL(fileURLWithPath: scratch + "/v2"))
    }

    /// The client under test in the guide: fetches one URL.
    struct Client {
        let transport: CurlTransport
        var seen: [String] = []

        mutating func sync(from url: URL) async throws {
            seen.append(String(decoding: try await transport.data(for: HTTPRequest(url: url)).body, as: UTF8.self))
        }
    }

    @Test func publishVersionsInATest() async throws {
        let scratch = NSTemporaryDirectory() + "docs-examples-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let (v1, v2) = try versions(in: scratch)
        var client = Client(transport: try CurlTransport())
        // snippet:begin publish-versions
        try await withStorageServer(root: v1) { server in
            let index = server.url(for: "index.json")
            try await client.sync(from: index) // sees v1
            server.setRoot(v2)
            try await client.sync(from: index) // sees v2, with new ETags
            #expect(server.requests().map(\.status) == [200, 200])
        }
        // snippet:end publish-versions
        #expect(client.seen == ["{\"text\": \"one\"}", "{\"text\": \"two\"}"])
        await client.transport.shutdown()
    }

    @Test func makeTheHostMisbehave() async throws {
        let scratch = NSTemporaryDirectory() + "docs-examples-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let (v1, _) = try versions(in: scratch)
        try FileManager.default.createDirectory(atPath: v1.path + "/v2", withIntermediateDirectories: true)
        try Data(count: 2_000).write(to: v1.appendingPathComponent("v2/a.zip"))
        try await withStorageServer(root: v1) { server in
            // snippet:begin faults
            server.injectFault(.status(503), forPath: "/v2/a.zip", times: 2) // then normal service
            server.injectFault(.tooManyRequests(retryAfter: 1), forPath: "/index.json", times: 1)
            server.injectFault(.truncate(afterBytes: 1_000), forPath: "/v2/a.zip") // curl error 18
            server.injectFault(.reset(afterBytes: 1_000), forPath: "/v2/a.zip") // a TCP reset: curl error 56
            server.injectFault(.stall, where: { $0.hasSuffix(".zip") }) // headers, a few bytes, silence
            server.injectFault(.delay(seconds: 2), forPath: "/index.json")
            server.injectFault(.redirect(to: "/mirror/a.zip"), forPath: "/v2/a.zip")
            server.clearFaults()
            // snippet:end faults
            // snippet:begin answer-faults
            server.injectFault(.trickle(bytesPerSecond: 2), forPath: "/v2/a.zip") // alive but useless
            server.injectFault(.wholeBodyAsPartialContent, forPath: "/v2/a.zip") // 206 bytes 0-… to anything
            server.injectFault(.shiftedRange(startShift: -100, endShift: 0), forPath: "/a.zip") // 206 for other bytes
            server.injectFault(.gzipEncoded, forPath: "/v2/blob.bin") // Content-Encoding: gzip, like S3
            // chunked, with a wrong Content-Length
            server.injectFault(.misstatedLength(claimed: 10), forPath: "/v2/a.zip")
            server.injectFault(.duplicateContentLength(second: 10), forPath: "/v2/a.zip") // two Content-Length lines
            server.injectFault(.status(304), forPath: "/v2/a.zip") // 304 to anything
            // snippet:end answer-faults
            // Rules apply in the order given (the trickle above would win); alone, a 304 to a
            // plain GET is refused by the transport.
            server.clearFaults()
            server.injectFault(.status(304), forPath: "/v2/a.zip")
            let transport = try CurlTransport()
            let error = await #expect(throws: TransportError.self) {
                try await transport.data(for: HTTPRequest(url: server.url(for: "v2/a.zip")))
            }
            #expect(error?.message.contains("304") == true, "\(String(describing: error))")
            await transport.shutdown()
        }
    }

    @Test func serveFromACommand() async throws {
        let scratch = NSTemporaryDirectory() + "docs-examples-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let (v1, _) = try versions(in: scratch)
        let dir = v1.path
        let port: UInt16 = 0
        // snippet:begin serve-command
        let server = StorageServer(root: URL(fileURLWithPath: dir), configuration: .init(port: port))
        let serving = Task { try await server.run { url in print(url.absoluteString) } } // serves until cancelled
        // snippet:end serve-command
        while server.baseURL == nil { try await Task.sleep(for: .milliseconds(10)) }
        let transport = try CurlTransport()
        let body = try await transport.data(for: HTTPRequest(url: server.url(for: "index.json"))).body
        #expect(body == Data("{\"text\": \"one\"}".utf8))
        await transport.shutdown()
        serving.cancel()
        _ = await serving.result
    }
}
