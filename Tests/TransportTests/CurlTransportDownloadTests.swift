import Foundation
import StorageServer
import Testing
import Transport

@Suite(.timeLimit(.minutes(3)))
struct CurlTransportDownloadTests {
    @Test func downloadStreamsAMultiMegabyteFileToDiskByteForByte() async throws {
        try await withServedFixture { server, fixture in
            let contents = randomBytes(5 * 1024 * 1024 + 123)
            try fixture.serve("v1/archive.zip", contents)
            let destination = fixture.outPath("archive.zip")
            let progress = Recorder<TransferProgress>()
            let starts = Recorder<Int>()
            var options = DownloadOptions(progress: { progress.append($0) })
            options.onResponseStart = { status, headers in
                starts.append(status)
                if headers["etag"] == nil { starts.append(-1) }
            }

            let response = try await makeTransport().download(
                HTTPRequest(url: server.url(for: "v1/archive.zip")), to: destination, options: options)

            #expect(response.statusCode == 200)
            #expect(response.body.isEmpty)
            #expect(response.fileSize == Int64(contents.count))
            #expect(response.bytesReceived == Int64(contents.count))
            #expect(response.resumedFrom == 0)
            #expect(fileContents(destination) == contents)
            #expect(starts.all == [200])
            let reports = progress.all
            #expect(reports.last == TransferProgress(received: Int64(contents.count), expected: Int64(contents.count)))
            #expect(zip(reports, reports.dropFirst()).allSatisfy { $0.received <= $1.received })
            #expect(server.requests().map(\.status) == [200])
            #expect(server.requests().first?.range == nil)
        }
    }

    @Test func downloadWithoutResumeETagReplacesALongerExistingFile() async throws {
        try await withServedFixture { server, fixture in
            let contents = randomBytes(10_000)
            try fixture.serve("a.bin", contents)
            let destination = fixture.outPath("a.bin")
            try randomBytes(50_000).write(to: URL(fileURLWithPath: destination))

            let response = try await makeTransport().download(
                HTTPRequest(url: server.url(for: "a.bin")), to: destination, options: DownloadOptions())

            #expect(fileContents(destination) == contents)
            #expect(response.fileSize == 10_000)
            #expect(server.requests().first?.range == nil)
        }
    }

    /// An overwrite writes over the file's own bytes (same inode, never emptied first) and cuts
    /// the file at the body's end, also after an attempt that broke off part-way, and for a
    /// gzip-encoded body (the file gets the decoded bytes).
    @Test(arguments: ["plain", "retried", "gzip"])
    func overwriteReusesTheFileAndCutsItToTheBody(how: String) async throws {
        try await withServedFixture { server, fixture in
            let contents = randomBytes(10_000)
            try fixture.serve("a.bin", contents)
            if how == "retried" { server.injectFault(.truncate(afterBytes: 4_000), forPath: "/a.bin", times: 1) }
            if how == "gzip" { server.injectFault(.gzipEncoded, forPath: "/a.bin") }
            let destination = fixture.outPath("a.bin")
            try randomBytes(50_000).write(to: URL(fileURLWithPath: destination))
            let descriptor = open(destination, O_RDWR | O_CLOEXEC)
            try #require(descriptor >= 0)
            defer { close(descriptor) }
            var before = stat()
            #expect(fstat(descriptor, &before) == 0)
            var options = DownloadOptions()
            options.overwrite = true

            let response = try await makeTransport().download(
                HTTPRequest(url: server.url(for: "a.bin")), into: descriptor, options: options)

            #expect(response.statusCode == 200)
            #expect(fileContents(destination) == contents)
            var after = stat()
            #expect(fstat(descriptor, &after) == 0)
            #expect(after.st_ino == before.st_ino && after.st_size == 10_000)
            #expect(server.requests().allSatisfy { $0.range == nil }, "an overwrite never resumes")
            if how == "retried" { #expect(server.requests().count == 2) }
        }
    }

    /// A file that holds bytes and cannot be emptied (here: open read-only) fails the download
    /// at once, naming the file, before any request: its bytes would be taken for the body's start.
    @Test func aFileThatCannotBeEmptiedFailsTheDownloadBeforeAnyRequest() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("a.bin", randomBytes(10_000))
            let destination = fixture.outPath("a.bin")
            let old = randomBytes(50_000)
            try old.write(to: URL(fileURLWithPath: destination))
            let descriptor = open(destination, O_RDONLY | O_CLOEXEC)
            try #require(descriptor >= 0)
            defer { close(descriptor) }

            await #expect {
                try await makeTransport().download(
                    HTTPRequest(url: server.url(for: "a.bin")), into: descriptor, options: DownloadOptions())
            } throws: { error in
                let error = error as? TransportError
                return error?.code == .fileSystem && error?.isTransient == false
                    && error?.message.hasPrefix(
                        "emptying an unnamed file (descriptor \(descriptor)) for a fresh download: ")
                        == true
            }
            #expect(server.requests().isEmpty)
            #expect(fileContents(destination) == old)
        }
    }

    @Test func errorPageBodyNeverReachesTheFile() async throws {
        try await withServedFixture { server, fixture in
            let contents = randomBytes(20_000)
            try fixture.serve("a.bin", contents)
            server.injectFault(.status(503, body: Data("try again later".utf8)), forPath: "/a.bin", times: 1)
            let destination = fixture.outPath("a.bin")

            let response = try await makeTransport().download(
                HTTPRequest(url: server.url(for: "a.bin")), to: destination, options: DownloadOptions())

            #expect(fileContents(destination) == contents)
            #expect(response.bytesReceived == 20_000)
            #expect(server.requests().map(\.status) == [503, 200])
        }
    }

    @Test func redirectedDownloadLandsTheTargetBytes() async throws {
        try await withServedFixture { server, fixture in
            let contents = randomBytes(300_000)
            try fixture.serve("cdn/archive.zip", contents)
            server.injectFault(.redirect(to: "/cdn/archive.zip", status: 307), forPath: "/archive.zip")
            let destination = fixture.outPath("archive.zip")

            let response = try await makeTransport().download(
                HTTPRequest(url: server.url(for: "archive.zip")), to: destination, options: DownloadOptions())

            #expect(response.url == server.url(for: "cdn/archive.zip"))
            #expect(fileContents(destination) == contents)
            #expect(server.requests().map(\.status) == [307, 200])
        }
    }

    @Test func bodyLargerThanMaxBytesThrowsTooLargeWithoutRetrying() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("archive.zip", randomBytes(500_000))
            let url = server.url(for: "archive.zip")
            let transport = try makeTransport()

            let error = await #expect(throws: TransportError.self) {
                try await transport.download(
                    HTTPRequest(url: url), to: fixture.outPath("a.zip"),
                    options: DownloadOptions(maxBytes: 499_999))
            }
            let exact = try await transport.download(
                HTTPRequest(url: url), to: fixture.outPath("b.zip"),
                options: DownloadOptions(maxBytes: 500_000))

            #expect(error?.code == .tooLarge)
            #expect(error?.message.contains("499999") == true)
            #expect(exact.fileSize == 500_000)
            #expect(server.requests().count == 2)
        }
    }

    @Test func downloadIntoAMissingFolderThrowsFileSystemWithErrnoBeforeAnyRequest() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("a.bin", randomBytes(1_000))
            let destination = fixture.out.appendingPathComponent("no/such/folder/a.bin").path

            let error = await #expect(throws: TransportError.self) {
                try await makeTransport().download(
                    HTTPRequest(url: server.url(for: "a.bin")), to: destination,
                    options: DownloadOptions())
            }

            #expect(error?.code == .fileSystem)
            #expect(error?.errno == ENOENT)
            #expect(error?.message.contains(destination) == true)
            #expect(server.requests().isEmpty)
        }
    }

    @Test func fullDiskThrowsFileSystemWithENOSPCAndIsNotRetried() async throws {
        // /dev/full accepts open() and fails every write with ENOSPC: a full disk on demand.
        try #require(FileManager.default.isWritableFile(atPath: "/dev/full"))
        try await withServedFixture { server, fixture in
            try fixture.serve("a.bin", randomBytes(200_000))

            let error = await #expect(throws: TransportError.self) {
                try await makeTransport().download(
                    HTTPRequest(url: server.url(for: "a.bin")), to: "/dev/full",
                    options: DownloadOptions())
            }

            #expect(error?.code == .fileSystem)
            #expect(error?.errno == ENOSPC)
            #expect(error?.message.contains("/dev/full") == true)
            #expect(error?.message.contains("free disk space") == true)
            #expect(server.requests().count == 1)
        }
    }

    @Test func nonHTTPURLDownloadIsAnInvalidRequest() async throws {
        try await withServedFixture { _, fixture in
            let url = try #require(URL(string: "file:///etc/hostname"))
            let destination = fixture.outPath("hostname")

            let error = await #expect(throws: TransportError.self) {
                try await makeTransport().download(HTTPRequest(url: url), to: destination, options: DownloadOptions())
            }

            #expect(error?.code == .invalidRequest)
            #expect(fileContents(destination).isEmpty)
        }
    }
}
