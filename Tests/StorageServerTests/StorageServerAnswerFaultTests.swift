import Foundation
import Testing

@testable import StorageServer

/// Faults that answer with a well-formed response that does not answer the request: the client's
/// checks of what it is sent are tested against these, so each must do exactly what it says.
@Suite(.timeLimit(.minutes(3)))
struct StorageServerAnswerFaultTests {
    @Test func trickleFaultSendsTheWholeBodyAFewBytesAtATime() async throws {
        try await withServedFixture(prepare: { try $0.write("a.txt", "abcdefg") }) { server, fixture in
            server.injectFault(.trickle(bytesPerSecond: 4), forPath: "/a.txt", times: 1)
            let result = try await curl(server.url(for: "a.txt"), in: fixture.scratch)
            #expect(result.exitCode == 0)
            #expect(result.status == 200)
            #expect(result.headers["content-length"] == "7")
            #expect(result.body == Data("abcdefg".utf8))
            #expect(server.requests().last?.fault == .trickle(bytesPerSecond: 4))
            #expect(server.requests().last?.bodyBytes == 7)
        }
    }

    @Test func trickleFaultHoldsBackAllButAFewBytesFromAClientThatGivesUp() async throws {
        let contents = randomBytes(10_000)
        try await withServedFixture(prepare: { try $0.write("a.bin", contents) }) { server, fixture in
            server.injectFault(.trickle(bytesPerSecond: 10), forPath: "/a.bin", times: 1)
            // One 10-byte chunk a second: at most 40 bytes can arrive in 3 s, however fast the
            // machine. (A loaded machine may deliver fewer, even none: only the bound is checked.)
            let result = try await curl(server.url(for: "a.bin"), ["--max-time", "3"], in: fixture.scratch)
            #expect(result.exitCode == 28)
            #expect(result.body.count <= 40)
            #expect(contents.starts(with: result.body))
        }
    }

    @Test func wholeBodyAsPartialContentAnswersEveryGetWithTheWholeFileAs206() async throws {
        let contents = randomBytes(100)
        try await withServedFixture(prepare: { try $0.write("a.bin", contents) }) { server, fixture in
            server.injectFault(.wholeBodyAsPartialContent, forPath: "/a.bin")
            let plain = try await curl(server.url(for: "a.bin"), in: fixture.scratch)
            let ranged = try await curl(
                server.url(for: "a.bin"), ["--header", "Range: bytes=60-"], in: fixture.scratch)
            for result in [plain, ranged] {
                #expect(result.exitCode == 0)
                #expect(result.status == 206)
                #expect(result.headers["content-range"] == "bytes 0-99/100")
                #expect(result.body == contents)
            }
            #expect(server.requests().map(\.bodyBytes) == [100, 100])
        }
    }

    @Test func shiftedRangeMovesTheAnsweredRangeAndDescribesItTruthfully() async throws {
        let contents = randomBytes(100)
        try await withServedFixture(prepare: { try $0.write("a.bin", contents) }) { server, fixture in
            let url = server.url(for: "a.bin")
            server.injectFault(.shiftedRange(startShift: -20, endShift: 0), forPath: "/a.bin", times: 1)
            let earlier = try await curl(url, ["--header", "Range: bytes=50-"], in: fixture.scratch)
            #expect(earlier.status == 206)
            #expect(earlier.headers["content-range"] == "bytes 30-99/100")
            #expect(earlier.body == contents[30..<100])

            server.injectFault(.shiftedRange(startShift: 0, endShift: -10), forPath: "/a.bin", times: 1)
            let short = try await curl(url, ["--header", "Range: bytes=50-"], in: fixture.scratch)
            #expect(short.status == 206)
            #expect(short.headers["content-range"] == "bytes 50-89/100")
            #expect(short.body == contents[50..<90])

            server.injectFault(.shiftedRange(startShift: -20, endShift: 0), forPath: "/a.bin", times: 1)
            let unranged = try await curl(url, in: fixture.scratch)
            #expect(unranged.status == 200)
            #expect(unranged.body == contents)
        }
    }

    @Test func gzipEncodedServesRealGzipBytesWhateverTheClientAccepts() async throws {
        let contents = Data(String(repeating: "compressible line of text\n", count: 400).utf8)
        try await withServedFixture(prepare: { try $0.write("a.txt", contents) }) { server, fixture in
            server.injectFault(.gzipEncoded, forPath: "/a.txt")
            let url = server.url(for: "a.txt")
            let plain = try await curl(url, in: fixture.scratch)
            let decoded = try await curl(url, ["--compressed"], in: fixture.scratch)
            let identityOnly = try await curl(url, ["--header", "Accept-Encoding: identity"], in: fixture.scratch)

            #expect(plain.status == 200)
            #expect(plain.headers["content-encoding"] == "gzip")
            #expect(plain.body.count < contents.count)
            #expect(plain.body.prefix(2) == Data([0x1F, 0x8B]))
            #expect(plain.headers["content-length"] == String(plain.body.count))
            #expect(plain.headers["etag"]?.hasSuffix("-gzip\"") == true)
            #expect(identityOnly.body == plain.body)
            #expect(decoded.exitCode == 0)
            #expect(decoded.body == contents)

            // A range is a range of the compressed bytes, still marked gzip.
            let ranged = try await curl(url, ["--header", "Range: bytes=10-"], in: fixture.scratch)
            #expect(ranged.status == 206)
            #expect(ranged.headers["content-encoding"] == "gzip")
            #expect(ranged.headers["content-range"] == "bytes 10-\(plain.body.count - 1)/\(plain.body.count)")
            #expect(ranged.body == plain.body.dropFirst(10))

            // Conditional requests compare against the compressed representation's tag.
            let etag = try #require(plain.headers["etag"])
            let cached = try await curl(url, ["--header", "If-None-Match: \(etag)"], in: fixture.scratch)
            #expect(cached.status == 304)
        }
    }

    @Test func misstatedLengthSendsTheWholeBodyChunkedBesideAWrongContentLength() async throws {
        let contents = randomBytes(5_000)
        try await withServedFixture(prepare: { try $0.write("a.bin", contents) }) { server, fixture in
            server.injectFault(.misstatedLength(claimed: 1_000), forPath: "/a.bin", times: 1)
            let result = try await curl(server.url(for: "a.bin"), in: fixture.scratch)
            #expect(result.status == 200)
            #expect(result.headers["transfer-encoding"] == "chunked")
            #expect(result.headers["content-length"] == "1000")
            // curl follows the chunks (RFC 9112 §6.3): the body is whole, the header wrong.
            #expect(result.body == contents)
        }
    }

    @Test func duplicateContentLengthSendsTwoDisagreeingLines() async throws {
        let contents = randomBytes(5_000)
        try await withServedFixture(prepare: { try $0.write("a.bin", contents) }) { server, fixture in
            server.injectFault(.duplicateContentLength(second: 1_000), forPath: "/a.bin", times: 1)
            let result = try await curl(server.url(for: "a.bin"), ["--verbose"], in: fixture.scratch)
            #expect(result.status == 200)
            #expect(result.stderr.contains("< Content-Length: 5000"))
            #expect(result.stderr.contains("< Content-Length: 1000"))
            // curl believes the last line and stops there: what the client under test must refuse.
            #expect(result.body == contents.prefix(1_000))
        }
    }
}
