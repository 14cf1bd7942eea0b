import Foundation
import Testing

import enum Transport.HTTPDate

@testable import StorageServer

/// What an HTTP cache under test relies on: `Cache-Control` and other caching headers per path,
/// `Last-Modified` with `If-Modified-Since`, and how often each path was asked for.
@Suite(.timeLimit(.minutes(3)))
struct StorageServerCachingTests {
    /// 1994-11-06 08:49:37.75 UTC: the fraction checks that `Last-Modified` rounds down.
    static let modified = Date(timeIntervalSince1970: 784_111_777.75)
    static let modifiedText = "Sun, 06 Nov 1994 08:49:37 GMT"

    @Test func cacheControlIsSentPerPathOverTheDefaultAndFallsBackWhenRemoved() async throws {
        try await withServedFixture(prepare: {
            try $0.write("a.json", "{}")
            try $0.write("b.json", "[]")
            try $0.write("c d/é.json", "1")
        }) { server, fixture in
            func cacheControl(_ path: String) async throws -> String? {
                try await curl(server.url(for: path), in: fixture.scratch).headers["cache-control"]
            }
            let unset = try await cacheControl("a.json")
            #expect(unset == nil)

            server.defaultCacheControl = "no-cache"
            server.setCacheControl("max-age=60, public", forPath: "/a.json")
            server.setCacheControl("immutable", forPath: "c d/é.json")
            #expect(server.defaultCacheControl == "no-cache")
            #expect(try await cacheControl("a.json") == "max-age=60, public")
            #expect(try await cacheControl("b.json") == "no-cache")
            #expect(try await cacheControl("c d/é.json") == "immutable")

            server.setCacheControl(nil, forPath: "a.json")
            #expect(try await cacheControl("a.json") == "no-cache")
            server.defaultCacheControl = nil
            #expect(try await cacheControl("a.json") == nil)
            #expect(try await cacheControl("b.json") == nil)
            #expect(try await cacheControl("c d/é.json") == "immutable")
        }
    }

    @Test func pathHeadersGoOnEveryFileAnswerIncludingNotModifiedButNotOnOthers() async throws {
        let contents = randomBytes(500)
        try await withServedFixture(prepare: { try $0.write("a.bin", contents) }) { server, fixture in
            let expires = "Thu, 01 Dec 2094 16:00:00 GMT"
            server.setResponseHeaders(
                ["Expires": expires, "Age": "30", "cache-control": "max-age=5"], forPath: "a.bin")
            server.setResponseHeaders(["Age": "1"], forPath: "/missing.bin")
            server.defaultCacheControl = "no-store"
            let url = server.url(for: "a.bin")

            let whole = try await curl(url, in: fixture.scratch)
            let head = try await curl(url, ["--head"], in: fixture.scratch)
            let part = try await curl(url, ["--header", "Range: bytes=0-9"], in: fixture.scratch)
            let etag = try #require(whole.headers["etag"])
            let cached = try await curl(url, ["--header", "If-None-Match: \(etag)"], in: fixture.scratch)
            let beyond = try await curl(url, ["--header", "Range: bytes=900-"], in: fixture.scratch)
            #expect([whole, head, part, cached, beyond].map(\.status) == [200, 200, 206, 304, 416])
            #expect(whole.body == contents)
            #expect(cached.body.isEmpty)
            for answer in [whole, head, part, cached, beyond] {
                #expect(answer.headers["expires"] == expires, "\(answer.status)")
                #expect(answer.headers["age"] == "30", "\(answer.status)")
                // The path's own Cache-Control, in any case, replaces the default.
                #expect(answer.headers["cache-control"] == "max-age=5", "\(answer.status)")
                #expect(answer.headers["etag"] == etag, "\(answer.status)")
                #expect(answer.headers["last-modified"] != nil, "\(answer.status)")
            }

            let missing = try await curl(server.url(for: "missing.bin"), in: fixture.scratch)
            #expect(missing.status == 404)
            #expect(missing.headers["age"] == nil)
            #expect(missing.headers["cache-control"] == nil)
            server.injectFault(.status(503), forPath: "a.bin", times: 1)
            let unavailable = try await curl(url, in: fixture.scratch)
            #expect(unavailable.status == 503)
            #expect(unavailable.headers["expires"] == nil)

            // Cache-Control changes on its own; replacing the set drops the rest.
            server.setCacheControl("max-age=9", forPath: "a.bin")
            #expect(
                server.responseHeaders(forPath: "/a.bin") == [
                    "Expires": expires, "Age": "30", "Cache-Control": "max-age=9",
                ])
            server.setResponseHeaders(["Age": "7"], forPath: "/a.bin")
            let replaced = try await curl(url, in: fixture.scratch)
            #expect(replaced.headers["age"] == "7")
            #expect(replaced.headers["expires"] == nil)
            #expect(replaced.headers["cache-control"] == "no-store")
            server.setResponseHeaders([:], forPath: "a.bin")
            #expect(server.responseHeaders(forPath: "a.bin").isEmpty)
            #expect(try await curl(url, in: fixture.scratch).headers["age"] == nil)
        }
    }

    @Test func lastModifiedIsTheFileTimeInWholeSecondsAsIMFFixdate() async throws {
        try await withServedFixture(prepare: { fixture in
            let file = try fixture.write("a.txt", "hello")
            try FileManager.default.setAttributes([.modificationDate: Self.modified], ofItemAtPath: file.path)
        }) { server, fixture in
            let url = server.url(for: "a.txt")
            let whole = try await curl(url, in: fixture.scratch)
            let head = try await curl(url, ["--head"], in: fixture.scratch)
            let part = try await curl(url, ["--header", "Range: bytes=1-2"], in: fixture.scratch)
            #expect([whole, head, part].map(\.status) == [200, 200, 206])
            #expect(
                [whole, head, part].map { $0.headers["last-modified"] }
                    == [String?](repeating: Self.modifiedText, count: 3))

            try fixture.write("a.txt", "rewritten")
            let after = try await curl(url, in: fixture.scratch)
            let now = Date().timeIntervalSince1970
            let lastModified = try #require(after.headers["last-modified"])
            let sent = try #require(HTTPDate.parse(lastModified, currentYear: HTTPDate.currentYear()))
            #expect(abs(Double(sent) - now) < 120)
        }
    }

    @Test func ifModifiedSinceAnswersNotModifiedUnlessTheFileChangedAfterTheDate() async throws {
        try await withServedFixture(prepare: { fixture in
            let file = try fixture.write("a.txt", "hello")
            try FileManager.default.setAttributes([.modificationDate: Self.modified], ofItemAtPath: file.path)
        }) { server, fixture in
            let url = server.url(for: "a.txt")
            server.setCacheControl("max-age=60", forPath: "a.txt")
            let since = { (date: String, extra: [String]) in
                try await curl(url, ["--header", "If-Modified-Since: \(date)"] + extra, in: fixture.scratch)
            }
            let same = try await since(Self.modifiedText, [])
            #expect(same.status == 304)
            #expect(same.body.isEmpty)
            #expect(same.headers["last-modified"] == Self.modifiedText)
            #expect(same.headers["etag"] != nil)
            #expect(same.headers["cache-control"] == "max-age=60")

            #expect(try await since("Sun, 06 Nov 1994 08:49:38 GMT", []).status == 304)
            #expect(try await since("Sun, 06 Nov 1994 08:49:37 GMT", ["--head"]).status == 304)
            #expect(try await since("Sunday, 06-Nov-94 08:49:37 GMT", []).status == 304)
            #expect(try await since("Sun Nov  6 08:49:37 1994", []).status == 304)

            let earlier = try await since("Sun, 06 Nov 1994 08:49:36 GMT", [])
            #expect(earlier.status == 200)
            #expect(earlier.body == Data("hello".utf8))
            // Not an HTTP date: ignored, as RFC 9110 §13.1.3 requires.
            #expect(try await since("1994-11-06T08:49:37Z", []).status == 200)
            #expect(try await since("\(Self.modifiedText), \(Self.modifiedText)", []).status == 200)

            try fixture.write("a.txt", "changed")
            let changed = try await since(Self.modifiedText, [])
            #expect(changed.status == 200)
            #expect(changed.body == Data("changed".utf8))
            #expect(server.requests().map(\.status) == [304, 304, 304, 304, 304, 200, 200, 200, 200])
            #expect(server.requests()[0].header("If-Modified-Since") == Self.modifiedText)
        }
    }

    @Test func ifNoneMatchTakesPrecedenceOverIfModifiedSince() async throws {
        try await withServedFixture(prepare: { fixture in
            let file = try fixture.write("a.txt", "hello")
            try FileManager.default.setAttributes([.modificationDate: Self.modified], ofItemAtPath: file.path)
        }) { server, fixture in
            let url = server.url(for: "a.txt")
            let etag = try #require(try await curl(url, ["--head"], in: fixture.scratch).headers["etag"])
            let notModifiedDate = "If-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT"
            let modifiedDate = "If-Modified-Since: Thu, 01 Jan 1970 00:00:00 GMT"

            let staleTag = try await curl(
                url, ["--header", "If-None-Match: \"other\"", "--header", notModifiedDate],
                in: fixture.scratch)
            #expect(staleTag.status == 200)
            #expect(staleTag.body == Data("hello".utf8))

            let sameTag = try await curl(
                url, ["--header", "If-None-Match: \(etag)", "--header", modifiedDate],
                in: fixture.scratch)
            #expect(sameTag.status == 304)
            #expect(sameTag.body.isEmpty)
        }
    }

    @Test func requestCountsCountEveryLoggedRequestPerDecodedPath() async throws {
        try await withServedFixture(prepare: {
            try $0.write("a b.json", "{}")
            try $0.write("dir/\u{E9}.txt", "x")
        }) { server, fixture in
            let url = server.url(for: "a b.json")
            let first = try await curl(url, in: fixture.scratch)
            _ = try await curl(url, ["--head"], in: fixture.scratch)
            _ = try await curl(url, ["--header", "If-None-Match: \(first.headers["etag"] ?? "")"], in: fixture.scratch)
            _ = try await curl(url, ["--request", "POST"], in: fixture.scratch)
            server.injectFault(.status(500), forPath: "a b.json", times: 1)
            _ = try await curl(url, in: fixture.scratch)
            _ = try await curl(server.url(for: "dir/\u{E9}.txt"), in: fixture.scratch)
            _ = try await curl(server.url(for: "missing.txt"), in: fixture.scratch)
            _ = try await curl(server.url(for: "missing.txt"), in: fixture.scratch)

            #expect(server.requests().map(\.status) == [200, 200, 304, 405, 500, 200, 404, 404])
            #expect(server.requestCount(forPath: "/a b.json") == 5)
            #expect(server.requestCount(forPath: "a b.json") == 5)
            #expect(server.requestCount(forPath: "/missing.txt") == 2)
            #expect(server.requestCount(forPath: "dir/\u{E9}.txt") == 1)
            // The same name decomposed is another file.
            #expect(server.requestCount(forPath: "dir/e\u{301}.txt") == 0)
            #expect(server.requestCount(forPath: "never.txt") == 0)
            #expect(server.requestCounts() == ["/a b.json": 5, "/dir/\u{E9}.txt": 1, "/missing.txt": 2])

            server.resetLog()
            #expect(server.requestCount(forPath: "/a b.json") == 0)
            #expect(server.requestCounts().isEmpty)
            _ = try await curl(url, in: fixture.scratch)
            #expect(server.requestCount(forPath: "/a b.json") == 1)
        }
    }
}
