import Foundation
import StorageServer
import Testing
import Transport

@Suite(.timeLimit(.minutes(3)))
struct CurlTransportResumeTests {
    @Test func truncatedDownloadIsResumedWithRangeAndIfRangeAndEndsByteIdentical() async throws {
        try await withServedFixture { server, fixture in
            let contents = randomBytes(2 * 1024 * 1024)
            try fixture.serve("archive.zip", contents)
            server.injectFault(.truncate(afterBytes: 700_000), forPath: "/archive.zip", times: 1)
            let destination = fixture.outPath("archive.zip")

            let response = try await makeTransport().download(
                HTTPRequest(url: server.url(for: "archive.zip")), to: destination, options: DownloadOptions())

            let log = server.requests()
            #expect(log.map(\.status) == [200, 206])
            #expect(log.map(\.bodyBytes) == [700_000, contents.count - 700_000])
            #expect(log.first?.range == nil)
            #expect(log.last?.range == "bytes=700000-")
            #expect(log.last?.ifRange != nil)
            #expect(log.last?.ifRange == response.etag)
            #expect(response.statusCode == 206)
            #expect(response.resumedFrom == 700_000)
            #expect(response.bytesReceived == Int64(contents.count))
            #expect(response.fileSize == Int64(contents.count))
            #expect(fileContents(destination) == contents)
        }
    }

    /// A connection reset mid-body (`ECONNRESET`, not an end of file) is retried from what
    /// arrived, the way a cut body is.
    @Test func aResetMidBodyIsResumedWithRangeAndEndsByteIdentical() async throws {
        try await withServedFixture { server, fixture in
            let contents = randomBytes(2 * 1024 * 1024)
            try fixture.serve("archive.zip", contents)
            server.injectFault(.reset(afterBytes: 700_000), forPath: "/archive.zip", times: 1)
            let destination = fixture.outPath("archive.zip")

            let response = try await makeTransport().download(
                HTTPRequest(url: server.url(for: "archive.zip")), to: destination, options: DownloadOptions())

            let log = server.requests()
            #expect(log.map(\.status) == [200, 206])
            #expect(log.first?.fault == .reset(afterBytes: 700_000))
            // The reset discards what the server had not sent: the resume starts where the
            // client's bytes end, at or before the cut.
            let resumedFrom = try #require(response.resumedFrom)
            #expect(resumedFrom > 0 && resumedFrom <= 700_000)
            #expect(log.last?.range == "bytes=\(resumedFrom)-")
            #expect(fileContents(destination) == contents)
        }
    }

    @Test func partialFileWithMatchingResumeETagFetchesOnlyTheTail() async throws {
        try await withServedFixture { server, fixture in
            let contents = randomBytes(1_500_000)
            try fixture.serve("archive.zip", contents)
            let url = server.url(for: "archive.zip")
            let transport = try makeTransport()
            let etag = try #require(try await transport.data(for: HTTPRequest(url: url, method: "HEAD")).etag)
            server.resetLog()
            let destination = fixture.outPath("archive.zip")
            try contents.prefix(400_000).write(to: URL(fileURLWithPath: destination))
            let progress = Recorder<TransferProgress>()

            let response = try await transport.download(
                HTTPRequest(url: url), to: destination,
                options: DownloadOptions(resumeETag: etag, progress: { progress.append($0) }))

            let log = server.requests()
            #expect(log.map(\.status) == [206])
            #expect(log.first?.range == "bytes=400000-")
            #expect(log.first?.ifRange == etag)
            #expect(log.first?.bodyBytes == 1_100_000)
            #expect(response.statusCode == 206)
            #expect(response.resumedFrom == 400_000)
            #expect(response.bytesReceived == 1_100_000)
            #expect(response.fileSize == 1_500_000)
            #expect(fileContents(destination) == contents)
            // Progress counts the bytes already on disk.
            #expect(progress.all.last == TransferProgress(received: 1_500_000, expected: 1_500_000))
            #expect(progress.all.allSatisfy { $0.received >= 400_000 })
        }
    }

    @Test func staleResumeETagRestartsFromZeroAndRewritesTheFile() async throws {
        try await withServedFixture { server, fixture in
            let old = randomBytes(900_000)
            try fixture.serve("archive.zip", old)
            let url = server.url(for: "archive.zip")
            let transport = try makeTransport()
            let oldETag = try #require(try await transport.data(for: HTTPRequest(url: url, method: "HEAD")).etag)
            let destination = fixture.outPath("archive.zip")
            try old.prefix(600_000).write(to: URL(fileURLWithPath: destination))

            // The storage publishes a new, shorter version: the partial file is longer than it.
            let new = randomBytes(500_000)
            let v2 = fixture.directory.appendingPathComponent("root-v2")
            try FileManager.default.createDirectory(at: v2, withIntermediateDirectories: true)
            try new.write(to: v2.appendingPathComponent("archive.zip"))
            server.setRoot(v2)
            server.resetLog()

            let response = try await transport.download(
                HTTPRequest(url: url), to: destination,
                options: DownloadOptions(resumeETag: oldETag))

            let log = server.requests()
            #expect(log.map(\.status) == [200])
            #expect(log.first?.range == "bytes=600000-")
            #expect(log.first?.ifRange == oldETag)
            #expect(response.statusCode == 200)
            #expect(response.etag != oldETag)
            #expect(response.resumedFrom == 0)
            #expect(response.bytesReceived == 500_000)
            #expect(response.fileSize == 500_000)
            #expect(fileContents(destination) == new)
        }
    }

    @Test func partialFileWithoutResumeETagIsDownloadedAgainFromZero() async throws {
        try await withServedFixture { server, fixture in
            let contents = randomBytes(300_000)
            try fixture.serve("a.bin", contents)
            let destination = fixture.outPath("a.bin")
            try contents.prefix(100_000).write(to: URL(fileURLWithPath: destination))

            let response = try await makeTransport().download(
                HTTPRequest(url: server.url(for: "a.bin")), to: destination, options: DownloadOptions())

            #expect(server.requests().map(\.range) == [nil])
            #expect(response.statusCode == 200)
            #expect(response.bytesReceived == 300_000)
            #expect(fileContents(destination) == contents)
        }
    }

    @Test func completePartialFileWithMatchingResumeETagSucceedsWithoutRefetching() async throws {
        // A process killed after the last byte landed but before the file was used leaves a
        // complete "partial" file; the server answers its Range with 416. The whole length kept
        // with the tag says the file is whole (without it, a half file would be believed).
        try await withServedFixture { server, fixture in
            let contents = randomBytes(1_200_000)
            try fixture.serve("archive.zip", contents)
            let url = server.url(for: "archive.zip")
            let transport = try makeTransport()
            let etag = try #require(try await transport.data(for: HTTPRequest(url: url, method: "HEAD")).etag)
            server.resetLog()
            let destination = fixture.outPath("archive.zip")
            try contents.write(to: URL(fileURLWithPath: destination))

            let response = try await transport.download(
                HTTPRequest(url: url), to: destination,
                options: DownloadOptions(resumeETag: etag, resumeLength: 1_200_000))

            #expect(server.requests().map(\.status) == [416])
            #expect(server.requests().first?.range == "bytes=1200000-")
            #expect(response.statusCode == 206)
            #expect(response.fileSize == 1_200_000)
            #expect(response.bytesReceived == 0)
            #expect(response.resumedFrom == 1_200_000)
            #expect(fileContents(destination) == contents)
        }
    }

    @Test func partialFileLongerThanTheFileIsDiscardedSoTheNextDownloadStartsOver() async throws {
        try await withServedFixture { server, fixture in
            let contents = randomBytes(200_000)
            try fixture.serve("a.bin", contents)
            let url = server.url(for: "a.bin")
            let transport = try makeTransport()
            let etag = try #require(try await transport.data(for: HTTPRequest(url: url, method: "HEAD")).etag)
            server.resetLog()
            let destination = fixture.outPath("a.bin")
            try (contents + randomBytes(1_000)).write(to: URL(fileURLWithPath: destination))

            let error = await #expect(throws: TransportError.self) {
                try await transport.download(
                    HTTPRequest(url: url), to: destination,
                    options: DownloadOptions(resumeETag: etag))
            }
            let retried = try await transport.download(
                HTTPRequest(url: url), to: destination,
                options: DownloadOptions(resumeETag: etag))

            #expect(error?.statusCode == 416)
            #expect(server.requests().map(\.status) == [416, 200])
            #expect(server.requests().map(\.range) == ["bytes=201000-", nil])
            #expect(retried.fileSize == 200_000)
            #expect(fileContents(destination) == contents)
        }
    }

    @Test func repeatedTruncationsResumeEachTimeFromWhatIsOnDisk() async throws {
        try await withServedFixture { server, fixture in
            let contents = randomBytes(1_000_000)
            try fixture.serve("a.bin", contents)
            server.injectFault(.truncate(afterBytes: 250_000), forPath: "/a.bin", times: 3)
            let destination = fixture.outPath("a.bin")

            let response = try await makeTransport().download(
                HTTPRequest(url: server.url(for: "a.bin")), to: destination, options: DownloadOptions())

            let log = server.requests()
            #expect(log.map(\.status) == [200, 206, 206, 206])
            #expect(log.map(\.range) == [nil, "bytes=250000-", "bytes=500000-", "bytes=750000-"])
            #expect(response.bytesReceived == 1_000_000)
            #expect(response.resumedFrom == 750_000)
            #expect(fileContents(destination) == contents)
        }
    }
}
