import Foundation
import Synchronization
import Testing

@testable import StorageServer

@Suite(.timeLimit(.minutes(3)))
struct StorageServerTests {
    @Test func servesFileBytesExactlyUnderNamesWithSpacesAndNonASCII() async throws {
        let contents = randomBytes(200_000)
        try await withServedFixture(prepare: { try $0.write("a folder/Ünïcødé ☃ file.bin", contents) }) {
            server, fixture in
            let url = server.url(for: "/a folder/Ünïcødé ☃ file.bin")
            #expect(url.absoluteString.hasSuffix("/a%20folder/%C3%9Cn%C3%AFc%C3%B8d%C3%A9%20%E2%98%83%20file.bin"))

            let result = try await curl(url, in: fixture.scratch)

            #expect(result.exitCode == 0)
            #expect(result.status == 200)
            #expect(result.body == contents)
            #expect(result.headers["content-length"] == "200000")
            #expect(result.headers["accept-ranges"] == "bytes")
            #expect(result.headers["content-type"] == "application/octet-stream")
            #expect(server.requests().map(\.path) == ["/a folder/Ünïcødé ☃ file.bin"])
        }
    }

    /// Foundation's `removingPercentEncoding` drops a leading U+FEFF: decoding is byte-exact.
    @Test func aNameStartingWithAByteOrderMarkIsServedAsItself() async throws {
        try await withServedFixture(prepare: { fixture in
            try fixture.write("\u{FEFF}bom.txt", "with mark")
            try fixture.write("bom.txt", "without")
        }) { server, fixture in
            let url = URL(string: server.baseURL!.absoluteString + "%EF%BB%BFbom.txt")!
            let result = try await curl(url, in: fixture.scratch)
            #expect(result.status == 200)
            #expect(result.body == Data("with mark".utf8))
            #expect(server.requests().map(\.path) == ["/\u{FEFF}bom.txt"])
        }
    }

    @Test func contentTypeFollowsTheExtension() async throws {
        try await withServedFixture(prepare: {
            try $0.write("index.json", "{}")
            try $0.write("notes.TXT", "hi")
        }) { server, fixture in
            let json = try await curl(server.url(for: "index.json"), in: fixture.scratch)
            let text = try await curl(server.url(for: "notes.TXT"), in: fixture.scratch)
            #expect(json.headers["content-type"] == "application/json")
            #expect(text.headers["content-type"] == "text/plain; charset=utf-8")
        }
    }

    @Test func emptyFileIsServedWithZeroLength() async throws {
        try await withServedFixture(prepare: { try $0.write("empty.txt", Data()) }) { server, fixture in
            let result = try await curl(server.url(for: "empty.txt"), in: fixture.scratch)
            #expect(result.exitCode == 0)
            #expect(result.status == 200)
            #expect(result.headers["content-length"] == "0")
            #expect(result.body.isEmpty)
        }
    }

    @Test func foldersAndMissingFilesAreNotFound() async throws {
        try await withServedFixture(prepare: { try $0.write("sub/file.txt", "x") }) { server, fixture in
            let base = try #require(server.baseURL).absoluteString
            for path in ["", "sub", "sub/", "missing.txt", "sub/missing.txt", "sub/file.txt/"] {
                let result = try await curl(base + path, ["--path-as-is"], in: fixture.scratch)
                #expect(result.status == 404, "\(path)")
                #expect(result.body.isEmpty, "\(path)")
            }
            #expect(server.bytesServed(forPathSuffix: "") == 0)
        }
    }

    @Test func pathsThatLeaveTheRootAreNotFound() async throws {
        try await withServedFixture(prepare: { fixture in
            try fixture.write("secret.txt", "outside", under: fixture.directory)
            try fixture.write("sub/inside.txt", "inside")
            try FileManager.default.createSymbolicLink(
                at: fixture.root.appendingPathComponent("link-out"), withDestinationURL: fixture.directory)
            try FileManager.default.createSymbolicLink(
                atPath: fixture.root.appendingPathComponent("escape.txt").path, withDestinationPath: "../secret.txt")
        }) { server, fixture in
            let base = try #require(server.baseURL).absoluteString.dropLast()
            let attempts = [
                "/../secret.txt",
                "/sub/../../secret.txt",
                "/../../../../../../../etc/passwd",
                "/%2e%2e/secret.txt",
                "/%2E%2E/secret.txt",
                "/.%2e/secret.txt",
                "/sub/%2e%2e/%2e%2e/secret.txt",
                "/sub%2f..%2f..%2fsecret.txt",
                "/sub/..%2f..%2fsecret.txt",
                "/%2fetc%2fpasswd",
                "/link-out/secret.txt",
                "/escape.txt",
                "/sub/inside.txt%00.json",
            ]
            for path in attempts {
                let result = try await curl(base + path, ["--path-as-is"], in: fixture.scratch)
                #expect(result.status == 404, "\(path)")
                #expect(result.body.isEmpty, "\(path)")
            }
            #expect(server.requests().count == attempts.count)
            #expect(server.requests().allSatisfy { $0.status == 404 && $0.bodyBytes == 0 })

            // The same file through a legal path is served, so the 404s above are the guard at work.
            let legal = try await curl(base + "/sub/inside.txt", in: fixture.scratch)
            #expect(legal.status == 200)
            #expect(legal.body == Data("inside".utf8))
        }
    }

    @Test func symlinkThatStaysInsideTheRootIsServed() async throws {
        try await withServedFixture(prepare: { fixture in
            try fixture.write("real/data.txt", "linked")
            try FileManager.default.createSymbolicLink(
                atPath: fixture.root.appendingPathComponent("alias").path, withDestinationPath: "real")
        }) { server, fixture in
            let result = try await curl(server.url(for: "alias/data.txt"), in: fixture.scratch)
            #expect(result.status == 200)
            #expect(result.body == Data("linked".utf8))
        }
    }

    /// A neighbour swaps a served folder between a real one and a link to an outside folder
    /// while files are opened: the outside file is never opened for serving. The path used to be
    /// checked and then opened again, and `/etc/passwd` came out within a dozen requests.
    @Test func aFolderSwappedForALinkOutsideIsNeverServed() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("swap-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let root = scratch.appendingPathComponent("root")
        let outside = scratch.appendingPathComponent("outside")
        try FileManager.default.createDirectory(at: root.appendingPathComponent("d"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        try Data("inside".utf8).write(to: root.appendingPathComponent("d/f.txt"))
        try Data("SECRET".utf8).write(to: outside.appendingPathComponent("f.txt"))
        let folder = root.appendingPathComponent("d").path
        let swapping = Atomic<Bool>(true)
        let stopped = DispatchSemaphore(value: 0)
        let swapper = Thread {
            while swapping.load(ordering: .relaxed) {
                rename(folder, folder + ".real")
                symlink(outside.path, folder)
                unlink(folder)
                rename(folder + ".real", folder)
            }
            stopped.signal()
        }
        swapper.start()
        defer {
            // The swapper must have stopped before the scratch folder is deleted, or it makes
            // `d` again behind the deletion, which then fails and leaves the folder behind.
            swapping.store(false, ordering: .relaxed)
            stopped.wait()
        }
        let path = try #require(RequestPath(percentEncoded: "/d/f.txt"))
        var served = 0
        var leaked = 0
        for _ in 0..<20_000 {
            guard let file = OpenedFile.open(path, under: root) else { continue }
            served += 1
            if (try? file.read(at: 0, count: 6)) == Data("SECRET".utf8) { leaked += 1 }
        }
        #expect(leaked == 0, "the outside file was opened \(leaked) times")
        #expect(served > 0, "the swap never let the inside file through: the test proves nothing")
    }

    @Test func headAnswersHeadersWithoutBody() async throws {
        try await withServedFixture(prepare: { try $0.write("a.bin", randomBytes(1234)) }) { server, fixture in
            let result = try await curl(server.url(for: "a.bin"), ["--head"], in: fixture.scratch)
            #expect(result.exitCode == 0)
            #expect(result.status == 200)
            #expect(result.headers["content-length"] == "1234")
            #expect(result.headers["etag"] != nil)
            let record = try #require(server.requests().first)
            #expect(record.method == "HEAD")
            #expect(record.bodyBytes == 0)
        }
    }

    @Test func otherMethodsAreNotAllowed() async throws {
        try await withServedFixture(prepare: { try $0.write("a.txt", "a") }) { server, fixture in
            let result = try await curl(server.url(for: "a.txt"), ["--request", "DELETE"], in: fixture.scratch)
            #expect(result.status == 405)
            #expect(FileManager.default.fileExists(atPath: fixture.root.appendingPathComponent("a.txt").path))
        }
    }
}
