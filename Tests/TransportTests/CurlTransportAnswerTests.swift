import Foundation
import StorageServer
import Testing
import Transport

/// A response is accepted only when it answers the request that was made: these serve well-formed
/// answers to other requests and check that none of them reaches the caller or the file.
@Suite(.timeLimit(.minutes(3)))
struct CurlTransportAnswerTests {
    // MARK: - 206 without Range

    @Test func partialContentToADownloadWithoutRangeIsRefusedBeforeAnyByteIsWritten() async throws {
        try await withServedFixture { server, fixture in
            let contents = randomBytes(1_000)
            try fixture.serve("a.bin", contents)
            // The first 100 bytes, labelled as such: installed as the file, it would be truncated.
            server.injectFault(
                .status(206, headers: ["Content-Range": "bytes 0-99/1000"], body: contents.prefix(100)),
                forPath: "/a.bin")
            let url = server.url(for: "a.bin")
            let destination = fixture.outPath("a.bin")

            let error = await #expect(throws: TransportError.self) {
                try await makeTransport { $0.retry = .none }.download(
                    HTTPRequest(url: url), to: destination,
                    options: DownloadOptions())
            }

            #expect(error?.code == .invalidResponse)
            #expect(
                error?.message.contains(
                    "GET \(url.absoluteString) answered 206 Partial Content to a request without Range") == true)
            #expect(error?.message.contains("the server or a proxy") == true)
            #expect(error?.isTransient == true)
            #expect(fileContents(destination).isEmpty)
            #expect(server.requests().map(\.range) == [nil])
        }
    }

    @Test func partialContentToADataRequestWithoutRangeIsRefusedAndTheRetryGetsTheWholeBody() async throws {
        try await withServedFixture { server, fixture in
            let contents = randomBytes(1_000)
            try fixture.serve("index.json", contents)
            server.injectFault(.wholeBodyAsPartialContent, forPath: "/index.json", times: 1)

            let response = try await makeTransport().data(for: HTTPRequest(url: server.url(for: "index.json")))

            #expect(response.statusCode == 200)
            #expect(response.body == contents)
            #expect(server.requests().map(\.status) == [206, 200])
        }
    }

    // MARK: - 304 to an unconditional request

    @Test func notModifiedToAnUnconditionalDataRequestIsRefusedNotReturnedAsAnEmptyBody() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("status.json", Data("{}".utf8))
            server.injectFault(.status(304), forPath: "/status.json")
            let url = server.url(for: "status.json")

            let error = await #expect(throws: TransportError.self) {
                try await makeTransport { $0.retry = .none }.data(for: HTTPRequest(url: url))
            }

            #expect(error?.code == .invalidResponse)
            #expect(error?.statusCode == 304)
            #expect(error?.message.contains(url.absoluteString) == true)
            #expect(
                error?.message.contains("304 Not Modified to a request without If-None-Match or If-Modified-Since")
                    == true)
        }
    }

    @Test func notModifiedToAnUnconditionalDownloadIsRefusedAndRetried() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("a.bin", randomBytes(1_000))
            server.injectFault(.status(304), forPath: "/a.bin")
            let destination = fixture.outPath("a.bin")

            let error = await #expect(throws: TransportError.self) {
                try await makeTransport().download(
                    HTTPRequest(url: server.url(for: "a.bin")), to: destination,
                    options: DownloadOptions())
            }

            #expect(error?.code == .invalidResponse)
            // Refused answers are retried: another cache node may answer properly.
            #expect(server.requests().map(\.status) == [304, 304, 304, 304])
        }
    }

    @Test func notModifiedIsAcceptedForAConditionHoweverItsHeaderIsSpelledOrWhoeverAddedIt() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("status.json", Data("{}".utf8))
            let url = server.url(for: "status.json")
            let etag = try #require(try await makeTransport().data(for: HTTPRequest(url: url)).etag)
            let lowerCase = try await makeTransport().data(for: HTTPRequest(url: url, headers: ["if-none-match": etag]))
            let adapted = try await makeTransport {
                $0.adapter = ClosureRequestAdapter { $0.headers["IF-NONE-MATCH"] = etag }
            }.data(for: HTTPRequest(url: url))

            #expect(lowerCase.statusCode == 304)
            #expect(adapted.statusCode == 304)
            #expect(server.requests().map(\.status) == [200, 304, 304])
        }
    }

    @Test func noContentAnswersADataRequestWithNoFile() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("status.json", Data("{}".utf8))
            server.injectFault(.status(204), forPath: "/status.json")

            let error = await #expect(throws: TransportError.self) {
                try await makeTransport { $0.retry = .none }.data(for: HTTPRequest(url: server.url(for: "status.json")))
            }

            #expect(error?.code == .invalidResponse)
            #expect(error?.message.contains("204 No Content, which carries no file") == true)
        }
    }

    // MARK: - Resumes answered with other bytes

    /// A partial file of the first 400 000 bytes and the entity tag that makes it resumable.
    private func partialDownload(_ server: StorageServer, _ fixture: Fixture, size: Int = 1_000_000)
        async throws -> (contents: Data, destination: String, etag: String)
    {
        let contents = randomBytes(size)
        try fixture.serve("a.bin", contents)
        let url = server.url(for: "a.bin")
        let etag = try #require(try await makeTransport().data(for: HTTPRequest(url: url, method: "HEAD")).etag)
        server.resetLog()
        let destination = fixture.outPath("a.bin")
        try contents.prefix(400_000).write(to: URL(fileURLWithPath: destination))
        return (contents, destination, etag)
    }

    @Test(arguments: [Fault.wholeBodyAsPartialContent, .shiftedRange(startShift: -1_000, endShift: 0)])
    func resumeAnsweredFromAnotherStartLeavesTheFileNoLongerAndTheNextAttemptFetchesItWhole(_ fault: Fault) async throws
    {
        try await withServedFixture { server, fixture in
            let (contents, destination, etag) = try await partialDownload(server, fixture)
            server.injectFault(fault, forPath: "/a.bin", times: 1)
            let url = server.url(for: "a.bin")
            let transport = try makeTransport { $0.retry = .none }

            let error = await #expect(throws: TransportError.self) {
                try await transport.download(
                    HTTPRequest(url: url), to: destination, options: DownloadOptions(resumeETag: etag))
            }
            let afterRefusal = fileContents(destination).count
            // The caller still holds the tag (the engine keeps it beside the partial file).
            let retried = try await transport.download(
                HTTPRequest(url: url), to: destination,
                options: DownloadOptions(resumeETag: etag))

            #expect(error?.code == .invalidResponse)
            #expect(error?.message.contains("Range: bytes=400000-") == true)
            #expect(
                error?.message.contains("Content-Range: bytes \(fault == .wholeBodyAsPartialContent ? 0 : 399_000)-")
                    == true)
            #expect(afterRefusal == 0, "the partial bytes the server would not continue are dropped")
            #expect(server.requests().map(\.range) == ["bytes=400000-", nil])
            #expect(retried.statusCode == 200)
            #expect(retried.resumedFrom == 0)
            #expect(fileContents(destination) == contents)
        }
    }

    @Test func resumeAnsweredWithARangeThatStopsShortIsRefusedAndRetriedAsAPlainGet() async throws {
        try await withServedFixture { server, fixture in
            let (contents, destination, etag) = try await partialDownload(server, fixture)
            server.injectFault(.shiftedRange(startShift: 0, endShift: -1_000), forPath: "/a.bin", times: 1)

            let response = try await makeTransport().download(
                HTTPRequest(url: server.url(for: "a.bin")), to: destination,
                options: DownloadOptions(resumeETag: etag))

            let log = server.requests()
            #expect(log.map(\.status) == [206, 200])
            #expect(log.map(\.range) == ["bytes=400000-", nil])
            #expect(log.map(\.ifRange) == [etag, nil])
            #expect(response.statusCode == 200)
            #expect(response.fileSize == 1_000_000)
            #expect(fileContents(destination) == contents)
        }
    }

    @Test func twoHundredAnsweringAnIfRangeResumeRestartsTheFileFromZero() async throws {
        try await withServedFixture { server, fixture in
            let (contents, destination, _) = try await partialDownload(server, fixture)

            // A tag the server does not know: If-Range fails and the whole file comes with 200.
            let response = try await makeTransport().download(
                HTTPRequest(url: server.url(for: "a.bin")), to: destination,
                options: DownloadOptions(resumeETag: "\"elsewhere\""))

            #expect(server.requests().map(\.status) == [200])
            #expect(response.resumedFrom == 0)
            #expect(fileContents(destination) == contents)
        }
    }

    @Test func rangeNotSatisfiableForAnotherEntityDoesNotPassTheOldBytesOffAsComplete() async throws {
        try await withServedFixture { server, fixture in
            let old = randomBytes(300_000)
            try fixture.serve("a.bin", old)
            let url = server.url(for: "a.bin")
            let transport = try makeTransport { $0.retry = .none }
            let oldETag = try #require(try await transport.data(for: HTTPRequest(url: url, method: "HEAD")).etag)
            let destination = fixture.outPath("a.bin")
            try old.write(to: URL(fileURLWithPath: destination))
            // A new version of the same size, behind a server that ignores If-Range.
            let new = randomBytes(300_000)
            try fixture.serve("a.bin", new)
            server.injectFault(
                .status(416, headers: ["Content-Range": "bytes */300000", "ETag": "\"new\""]),
                forPath: "/a.bin", times: 1)

            let error = await #expect(throws: TransportError.self) {
                try await transport.download(
                    HTTPRequest(url: url), to: destination, options: DownloadOptions(resumeETag: oldETag))
            }
            _ = try await transport.download(
                HTTPRequest(url: url), to: destination, options: DownloadOptions(resumeETag: oldETag))

            #expect(error?.statusCode == 416)
            #expect(fileContents(destination) == new)
        }
    }

    @Test func resumeWhoseContentRangeRunsPastTheDeclaredSizeIsRefusedBeforeAppending() async throws {
        try await withServedFixture { server, fixture in
            let (contents, destination, etag) = try await partialDownload(server, fixture)

            let error = await #expect(throws: TransportError.self) {
                try await makeTransport().download(
                    HTTPRequest(url: server.url(for: "a.bin")), to: destination,
                    options: DownloadOptions(resumeETag: etag, maxBytes: 900_000))
            }

            #expect(error?.code == .tooLarge)
            #expect(error?.message.contains("900000") == true)
            // Not one byte of the over-long answer was appended. (Counted, not compared as Data: a
            // failing comparison of megabytes makes Swift Testing diff them for minutes.)
            let kept = fileContents(destination)
            #expect(kept.count == 400_000 && contents.starts(with: kept))
            #expect(server.requests().map(\.status) == [206])
        }
    }

    @Test func redirectToAnotherSchemeIsNotFollowed() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("a.bin", randomBytes(1_000))
            server.injectFault(.redirect(to: "ftp://127.0.0.1/a.bin"), forPath: "/a.bin")
            let destination = fixture.outPath("a.bin")

            let error = await #expect(throws: TransportError.self) {
                try await makeTransport { $0.retry = .none }.download(
                    HTTPRequest(url: server.url(for: "a.bin")),
                    to: destination, options: DownloadOptions())
            }

            #expect(error?.curlCode == 1) // CURLE_UNSUPPORTED_PROTOCOL: refused by CURLOPT_REDIR_PROTOCOLS_STR
            #expect(fileContents(destination).isEmpty)
            #expect(server.requests().map(\.status) == [302])
        }
    }

    // MARK: - Content-Length

    @Test func contentLengthThatDisagreesWithTheChunkedBodyIsRefused() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("a.bin", randomBytes(5_000))
            server.injectFault(.misstatedLength(claimed: 1_000), forPath: "/a.bin")
            let url = server.url(for: "a.bin")
            let destination = fixture.outPath("a.bin")

            let error = await #expect(throws: TransportError.self) {
                try await makeTransport { $0.retry = .none }.download(
                    HTTPRequest(url: url), to: destination,
                    options: DownloadOptions())
            }

            #expect(error?.code == .invalidResponse)
            #expect(error?.message.contains("sent 5000 body bytes under Content-Length: 1000") == true)
            #expect(fileContents(destination).isEmpty)
        }
    }

    @Test func twoDisagreeingContentLengthsAreRefusedWhereLibcurlWouldTruncateToTheLast() async throws {
        try await withServedFixture { server, fixture in
            let contents = randomBytes(5_000)
            try fixture.serve("a.bin", contents)
            server.injectFault(.duplicateContentLength(second: 1_000), forPath: "/a.bin", times: 2)
            let url = server.url(for: "a.bin")
            let transport = try makeTransport { $0.retry = .none }
            let destination = fixture.outPath("a.bin")

            let downloadError = await #expect(throws: TransportError.self) {
                try await transport.download(HTTPRequest(url: url), to: destination, options: DownloadOptions())
            }
            let dataError = await #expect(throws: TransportError.self) {
                try await transport.data(for: HTTPRequest(url: url))
            }

            for error in [downloadError, dataError] {
                #expect(error?.code == .invalidResponse)
                #expect(
                    error?.message.contains("Content-Length \"5000\" and \"1000\", which is not one length") == true)
            }
            #expect(fileContents(destination).isEmpty)
        }
    }

    @Test func bodyOverMaxBytesByItsContentLengthIsRefusedBeforeAnyByteIsWritten() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("a.bin", randomBytes(500_000))
            let destination = fixture.outPath("a.bin")

            let error = await #expect(throws: TransportError.self) {
                try await makeTransport().download(
                    HTTPRequest(url: server.url(for: "a.bin")), to: destination,
                    options: DownloadOptions(maxBytes: 100_000))
            }

            #expect(error?.code == .tooLarge)
            #expect(error?.message.contains("100000") == true)
            #expect(fileContents(destination).isEmpty)
        }
    }

    // MARK: - Content encodings

    /// Text that gzip shrinks, with random lines so that equal bytes mean a real copy.
    private func compressibleText() -> Data {
        var text = ""
        for _ in 0..<2_000 { text += "line \(UInt32.random(in: 0...999_999)) of the published document\n" }
        return Data(text.utf8)
    }

    @Test func gzipEncodedBodyIsDecodedToTheOriginalBytesForDataAndDownload() async throws {
        try await withServedFixture { server, fixture in
            let contents = compressibleText()
            try fixture.serve("doc.txt", contents)
            server.injectFault(.gzipEncoded, forPath: "/doc.txt")
            let url = server.url(for: "doc.txt")
            let transport = try makeTransport()
            let destination = fixture.outPath("doc.txt")

            let data = try await transport.data(for: HTTPRequest(url: url))
            // The declared size is the decoded one: that is what the limit holds.
            let download = try await transport.download(
                HTTPRequest(url: url), to: destination,
                options: DownloadOptions(maxBytes: Int64(contents.count)))

            #expect(data.body == contents)
            #expect(data.headers["content-encoding"] == "gzip")
            #expect(fileContents(destination) == contents)
            #expect(download.fileSize == Int64(contents.count))
            let sent = server.requests().map(\.bodyBytes)
            #expect(sent.count == 2)
            #expect(sent.allSatisfy { $0 < contents.count / 2 }, "the wire carried gzip: \(sent)")
            #expect(server.requests().allSatisfy { $0.header("accept-encoding")?.contains("gzip") == true })
        }
    }

    @Test func maxBytesHoldsTheDecodedBodyNotTheCompressedOne() async throws {
        try await withServedFixture { server, fixture in
            let contents = compressibleText()
            try fixture.serve("doc.txt", contents)
            server.injectFault(.gzipEncoded, forPath: "/doc.txt")

            let error = await #expect(throws: TransportError.self) {
                try await makeTransport().download(
                    HTTPRequest(url: server.url(for: "doc.txt")), to: fixture.outPath("doc.txt"),
                    options: DownloadOptions(maxBytes: Int64(contents.count - 1)))
            }

            #expect(error?.code == .tooLarge)
        }
    }

    @Test func encodedPartialContentIsRefusedAndTheRetryFetchesAndDecodesTheWholeBody() async throws {
        try await withServedFixture { server, fixture in
            let contents = compressibleText()
            try fixture.serve("doc.txt", contents)
            server.injectFault(.gzipEncoded, forPath: "/doc.txt")
            let url = server.url(for: "doc.txt")
            let transport = try makeTransport()
            let gzipETag = try #require(try await transport.data(for: HTTPRequest(url: url, method: "HEAD")).etag)
            server.resetLog()
            let destination = fixture.outPath("doc.txt")
            // Decoded bytes from an earlier attempt: a range of the gzip bytes cannot follow them.
            try contents.prefix(20).write(to: URL(fileURLWithPath: destination))

            let response = try await transport.download(
                HTTPRequest(url: url), to: destination,
                options: DownloadOptions(resumeETag: gzipETag))

            #expect(server.requests().map(\.status) == [206, 200])
            #expect(server.requests().map(\.range) == ["bytes=20-", nil])
            #expect(response.resumedFrom == 0)
            #expect(fileContents(destination) == contents)
        }
    }

    @Test func encodedPartialContentRefusalNamesTheEncoding() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("doc.txt", compressibleText())
            server.injectFault(.gzipEncoded, forPath: "/doc.txt")
            let url = server.url(for: "doc.txt")

            let error = await #expect(throws: TransportError.self) {
                try await makeTransport { $0.retry = .none }.data(
                    for: HTTPRequest(url: url, headers: ["Range": "bytes=10-"]))
            }

            #expect(error?.code == .invalidResponse)
            #expect(
                error?.message.contains("Range: bytes=10- with 206 Partial Content in Content-Encoding: gzip") == true)
        }
    }

    @Test func anEncodingThisClientCannotDecodeFailsAsAnInvalidResponseNamingIt() async throws {
        try await withServedFixture { server, fixture in
            server.injectFault(
                .status(200, headers: ["Content-Encoding": "xz"], body: randomBytes(500)), forPath: "/a.bin")
            let destination = fixture.outPath("a.bin")

            let error = await #expect(throws: TransportError.self) {
                try await makeTransport { $0.retry = .none }.download(
                    HTTPRequest(url: server.url(for: "a.bin")),
                    to: destination, options: DownloadOptions())
            }

            #expect(error?.code == .invalidResponse)
            #expect(error?.message.contains("Content-Encoding: xz") == true)
            #expect(fileContents(destination).isEmpty)
        }
    }

    // MARK: - Ranges the caller asks for

    @Test func aRangeTheCallerAsksForIsAcceptedWhenTheAnswerMatchesIt() async throws {
        try await withServedFixture { server, fixture in
            let contents = randomBytes(1_000)
            try fixture.serve("a.bin", contents)
            let transport = try makeTransport {
                $0.adapter = ClosureRequestAdapter { $0.headers["range"] = "bytes=100-199" }
            }

            let response = try await transport.data(for: HTTPRequest(url: server.url(for: "a.bin")))

            #expect(response.statusCode == 206)
            #expect(response.body == contents[100..<200])
        }
    }
}
