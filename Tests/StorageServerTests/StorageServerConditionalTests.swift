import Foundation
import Testing

@testable import StorageServer

/// ETags, conditional requests, byte ranges and root switching.
@Suite(.timeLimit(.minutes(3)))
struct StorageServerConditionalTests {
    @Test func etagIsStrongAndIfNoneMatchAnswersNotModifiedWithoutBody() async throws {
        try await withServedFixture(prepare: { try $0.write("index.json", "{\"v\":1}") }) { server, fixture in
            let url = server.url(for: "index.json")
            let first = try await curl(url, in: fixture.scratch)
            let etag = try #require(first.headers["etag"])
            #expect(etag.hasPrefix("\""))
            #expect(!etag.hasPrefix("W/"))

            let cached = try await curl(url, ["--header", "If-None-Match: \(etag)"], in: fixture.scratch)
            #expect(cached.exitCode == 0)
            #expect(cached.status == 304)
            #expect(cached.body.isEmpty)
            #expect(cached.headers["etag"] == etag)

            let listed = try await curl(url, ["--header", "If-None-Match: \"other\", W/\(etag)"], in: fixture.scratch)
            #expect(listed.status == 304)

            let stale = try await curl(url, ["--header", "If-None-Match: \"stale\""], in: fixture.scratch)
            #expect(stale.status == 200)
            #expect(stale.body == Data("{\"v\":1}".utf8))

            #expect(server.requests().map(\.status) == [200, 304, 304, 200])
            #expect(server.requests()[1].ifNoneMatch == etag)
            #expect(server.requests()[1].bodyBytes == 0)
        }
    }

    @Test func keepAliveConnectionSurvivesNotModifiedHeadAndPartialAnswers() async throws {
        let contents = randomBytes(3000)
        try await withServedFixture(prepare: { try $0.write("a.bin", contents) }) { server, fixture in
            let url = server.url(for: "a.bin").absoluteString
            let etag = try #require(try await curl(url, ["--head"], in: fixture.scratch).headers["etag"])
            server.resetLog()
            let report = fixture.scratch.appendingPathComponent("report.txt")
            let out = { (name: String) in fixture.scratch.appendingPathComponent(name).path }
            // One curl process, four transfers: libcurl reuses the connection when each answer
            // is framed correctly, as the transport under test will.
            let code = try await runProcess(
                "curl",
                [
                    "--silent", "--show-error", "--max-time", "20",
                    "--write-out", "%{http_code} %{num_connects}\n",
                    "--header", "If-None-Match: \(etag)", "--output", out("1"), url, "--next",
                    "--head", "--write-out", "%{http_code} %{num_connects}\n", "--output", out("2"), url, "--next",
                    "--header", "Range: bytes=10-19", "--write-out", "%{http_code} %{num_connects}\n", "--output",
                    out("3"), url, "--next",
                    "--write-out", "%{http_code} %{num_connects}\n", "--output", out("4"), url,
                ], stdout: report, stderr: nil)
            #expect(code == 0)
            let lines = try String(contentsOf: report, encoding: .utf8).split(separator: "\n")
            #expect(lines == ["304 1", "200 0", "206 0", "200 0"])
            #expect(try Data(contentsOf: URL(fileURLWithPath: out("3"))) == contents[10..<20])
            #expect(try Data(contentsOf: URL(fileURLWithPath: out("4"))) == contents)
            #expect(server.requests().map(\.status) == [304, 200, 206, 200])
        }
    }

    @Test func closedRangeAnswersPartialContentWithExactBytes() async throws {
        let contents = randomBytes(1000)
        try await withServedFixture(prepare: { try $0.write("a.bin", contents) }) { server, fixture in
            let result = try await curl(
                server.url(for: "a.bin"), ["--header", "Range: bytes=100-199"], in: fixture.scratch)
            #expect(result.status == 206)
            #expect(result.body == contents[100..<200])
            #expect(result.headers["content-range"] == "bytes 100-199/1000")
            #expect(result.headers["content-length"] == "100")
            #expect(server.requests().first?.range == "bytes=100-199")
        }
    }

    @Test func openAndSuffixRangesAnswerTheTail() async throws {
        let contents = randomBytes(1000)
        try await withServedFixture(prepare: { try $0.write("a.bin", contents) }) { server, fixture in
            let url = server.url(for: "a.bin")
            let open = try await curl(url, ["--header", "Range: bytes=990-"], in: fixture.scratch)
            #expect(open.status == 206)
            #expect(open.body == contents[990...])
            #expect(open.headers["content-range"] == "bytes 990-999/1000")

            let suffix = try await curl(url, ["--header", "Range: bytes=-25"], in: fixture.scratch)
            #expect(suffix.status == 206)
            #expect(suffix.body == contents[975...])
            #expect(suffix.headers["content-range"] == "bytes 975-999/1000")

            let longSuffix = try await curl(url, ["--header", "Range: bytes=-5000"], in: fixture.scratch)
            #expect(longSuffix.status == 206)
            #expect(longSuffix.body == contents)

            let pastEnd = try await curl(url, ["--header", "Range: bytes=500-99999"], in: fixture.scratch)
            #expect(pastEnd.body == contents[500...])
            #expect(pastEnd.headers["content-range"] == "bytes 500-999/1000")
        }
    }

    @Test func unsatisfiableRangeAnswers416WithTheSize() async throws {
        try await withServedFixture(prepare: { try $0.write("a.bin", randomBytes(1000)) }) { server, fixture in
            let url = server.url(for: "a.bin")
            for range in ["bytes=1000-", "bytes=5000-6000", "bytes=-0"] {
                let result = try await curl(url, ["--header", "Range: \(range)"], in: fixture.scratch)
                #expect(result.status == 416, "\(range)")
                #expect(result.headers["content-range"] == "bytes */1000", "\(range)")
                #expect(result.body.isEmpty, "\(range)")
            }
        }
    }

    @Test func multiRangeAndMalformedRangeAnswerTheWholeFile() async throws {
        let contents = randomBytes(300)
        try await withServedFixture(prepare: { try $0.write("a.bin", contents) }) { server, fixture in
            let url = server.url(for: "a.bin")
            for range in ["bytes=0-1,5-9", "bytes=9-5", "items=0-5", "bytes=abc"] {
                let result = try await curl(url, ["--header", "Range: \(range)"], in: fixture.scratch)
                #expect(result.status == 200, "\(range)")
                #expect(result.body == contents, "\(range)")
            }
        }
    }

    @Test func ifRangeMismatchAnswersTheWholeFileAndMatchAnswersTheRange() async throws {
        let contents = randomBytes(500)
        try await withServedFixture(prepare: { try $0.write("a.bin", contents) }) { server, fixture in
            let url = server.url(for: "a.bin")
            let etag = try #require(try await curl(url, ["--head"], in: fixture.scratch).headers["etag"])

            let mismatch = try await curl(
                url, ["--header", "Range: bytes=100-", "--header", "If-Range: \"old-version\""], in: fixture.scratch)
            #expect(mismatch.status == 200)
            #expect(mismatch.body == contents)

            let match = try await curl(
                url, ["--header", "Range: bytes=100-", "--header", "If-Range: \(etag)"], in: fixture.scratch)
            #expect(match.status == 206)
            #expect(match.body == contents[100...])

            let weak = try await curl(
                url, ["--header", "Range: bytes=100-", "--header", "If-Range: W/\(etag)"], in: fixture.scratch)
            #expect(weak.status == 200)
            #expect(server.requests()[1].ifRange == "\"old-version\"")
        }
    }

    @Test func setRootSwitchesContentAndEtag() async throws {
        try await withTemporaryDirectory { directory in
            let fixture = try Fixture(directory: directory)
            let v1 = directory.appendingPathComponent("v1")
            let v2 = directory.appendingPathComponent("v2")
            // Same name and size in both snapshots: only the identity of the file tells them apart.
            try fixture.write("data/item.txt", "version-1", under: v1)
            try fixture.write("data/item.txt", "version-2", under: v2)

            try await withStorageServer(root: v1) { server in
                let url = server.url(for: "data/item.txt")
                let first = try await curl(url, in: fixture.scratch)
                #expect(first.body == Data("version-1".utf8))
                let firstTag = try #require(first.headers["etag"])

                server.setRoot(v2)
                #expect(server.root.path == v2.path)
                let second = try await curl(url, ["--header", "If-None-Match: \(firstTag)"], in: fixture.scratch)
                #expect(second.status == 200)
                #expect(second.body == Data("version-2".utf8))
                #expect(second.headers["etag"] != firstTag)

                server.setRoot(directory.appendingPathComponent("not-published-yet"))
                let missing = try await curl(url, in: fixture.scratch)
                #expect(missing.status == 404)
            }
        }
    }

    @Test func rewrittenFileGetsANewEtag() async throws {
        try await withServedFixture(prepare: { try $0.write("a.txt", "one") }) { server, fixture in
            let url = server.url(for: "a.txt")
            let before = try await curl(url, in: fixture.scratch).headers["etag"]
            try fixture.write("a.txt", "two")
            let after = try await curl(url, in: fixture.scratch)
            #expect(after.body == Data("two".utf8))
            #expect(after.headers["etag"] != before)
        }
    }

    @Test func logRecordsMethodsPathsStatusesAndBodyBytes() async throws {
        try await withServedFixture(prepare: {
            try $0.write("v 2/é.bin", randomBytes(4000))
            try $0.write("other.bin", randomBytes(10))
        }) { server, fixture in
            let url = server.url(for: "v 2/é.bin")
            let full = try await curl(url, in: fixture.scratch)
            _ = try await curl(url, ["--header", "Range: bytes=0-999"], in: fixture.scratch)
            _ = try await curl(url, ["--head"], in: fixture.scratch)
            _ = try await curl(url, ["--header", "If-None-Match: \(full.headers["etag"] ?? "")"], in: fixture.scratch)
            _ = try await curl(server.url(for: "missing.bin"), in: fixture.scratch)
            _ = try await curl(server.url(for: "other.bin"), ["--header", "X-Probe: 7"], in: fixture.scratch)

            let log = server.requests()
            #expect(log.map(\.method) == ["GET", "GET", "HEAD", "GET", "GET", "GET"])
            #expect(
                log.map(\.path) == [
                    "/v 2/é.bin", "/v 2/é.bin", "/v 2/é.bin", "/v 2/é.bin", "/missing.bin", "/other.bin",
                ])
            #expect(log.map(\.status) == [200, 206, 200, 304, 404, 200])
            #expect(log.map(\.bodyBytes) == [4000, 1000, 0, 0, 0, 10])
            #expect(log[1].range == "bytes=0-999")
            #expect(log[5].header("X-PROBE") == "7")
            #expect(log[5].headers["user-agent"]?.hasPrefix("curl/") == true)
            #expect(log.allSatisfy { $0.fault == nil })
            #expect(server.bytesServed(forPathSuffix: "é.bin") == 5000)
            #expect(server.bytesServed(forPathSuffix: ".bin") == 5010)

            server.resetLog()
            #expect(server.requests().isEmpty)
        }
    }

    @Test func largeFileStreamsIntactAndRangesIntoIt() async throws {
        try await withTemporaryDirectory { directory in
            let fixture = try Fixture(directory: directory)
            // 50 MiB plus an odd tail, built from a 1 MiB random block stamped with its index, so a
            // misplaced chunk changes the checksum.
            let file = fixture.root.appendingPathComponent("big.zip")
            _ = FileManager.default.createFile(atPath: file.path, contents: nil)
            let handle = try FileHandle(forWritingTo: file)
            var block = randomBytes(1 << 20)
            for index in 0..<50 {
                withUnsafeBytes(of: UInt64(index)) { block.replaceSubrange(0..<8, with: $0) }
                try handle.write(contentsOf: block)
            }
            try handle.write(contentsOf: randomBytes(12_345))
            try handle.close()
            let size = 50 * (1 << 20) + 12_345
            let expected = try await sha256sum(file, in: fixture.scratch)

            try await withStorageServer(root: fixture.root) { server in
                let url = server.url(for: "big.zip")
                let whole = try await curl(url, in: fixture.scratch)
                #expect(whole.exitCode == 0)
                #expect(whole.headers["content-length"] == String(size))
                #expect(try await sha256sum(whole.bodyFile, in: fixture.scratch) == expected)

                let tail = try await curl(url, ["--header", "Range: bytes=\(size - 70_000)-"], in: fixture.scratch)
                #expect(tail.status == 206)
                let source = try FileHandle(forReadingFrom: file)
                try source.seek(toOffset: UInt64(size - 70_000))
                #expect(tail.body == (try source.readToEnd()))
                try source.close()
                #expect(server.bytesServed(forPathSuffix: "big.zip") == size + 70_000)
            }
        }
    }
}
