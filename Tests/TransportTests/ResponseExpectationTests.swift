import Testing

@testable import Transport

/// The rules that hold a response to its request, without I/O.
@Suite
struct ResponseExpectationTests {
    typealias Span = ResponseExpectation.ByteSpan

    @Test(
        arguments: [
            ("bytes=400000-", Span(first: 400_000, last: nil)),
            ("bytes=10-19", Span(first: 10, last: 19)),
            (" BYTES=0- ", Span(first: 0, last: nil)),
        ] as [(String, Span)])
    func singleRangesFromAKnownStartAreRead(_ header: String, _ span: Span) {
        #expect(ResponseExpectation.parseRange(header) == span)
    }

    @Test(arguments: ["bytes=-500", "bytes=0-9,20-29", "bytes=9-0", "bytes=+5-", "items=0-", "bytes=0x10-"])
    func otherRangesAreNotASingleRangeFromAKnownStart(_ header: String) {
        #expect(ResponseExpectation.parseRange(header) == nil)
    }

    @Test func contentRangesAreReadWithOrWithoutATotal() {
        #expect(ResponseExpectation.parseContentRange("bytes 0-99/1000")?.span == Span(first: 0, last: 99))
        #expect(ResponseExpectation.parseContentRange("bytes 0-99/1000")?.total == 1000)
        #expect(ResponseExpectation.parseContentRange("bytes 5-9/*")?.total == nil)
        #expect(ResponseExpectation.parseContentRange("bytes */1000") == nil)
        #expect(ResponseExpectation.parseContentRange("bytes 0-1000/1000") == nil)
        #expect(ResponseExpectation.parseContentRange("bytes 9-5/1000") == nil)
    }

    @Test func contentLengthIsOneLengthOrNone() {
        #expect(ResponseExpectation.contentLength(["42"]) == 42)
        #expect(ResponseExpectation.contentLength(["42, 42"]) == 42)
        #expect(ResponseExpectation.contentLength(["42", "42"]) == 42)
        #expect(ResponseExpectation.contentLength(["42", "7"]) == nil)
        #expect(ResponseExpectation.contentLength(["5, 7"]) == nil)
        #expect(ResponseExpectation.contentLength(["-1"]) == nil)
        #expect(ResponseExpectation.contentLength([]) == nil)
    }

    /// (request headers, status, response headers, refused?)
    static let heads: [([String: String], Int, [String: String], Bool)] = [
        ([:], 200, [:], false),
        ([:], 206, ["content-range": "bytes 0-99/100"], true),
        ([:], 304, [:], true),
        (["If-None-Match": "\"a\""], 304, [:], false),
        (["if-modified-since": "Sat, 01 Jan 2022 00:00:00 GMT"], 304, [:], false),
        ([:], 204, [:], true),
        (["Range": "bytes=50-"], 200, [:], false),
        (["Range": "bytes=50-"], 206, ["content-range": "bytes 50-99/100"], false),
        (["range": "bytes=50-"], 206, ["content-range": "bytes 0-99/100"], true),
        (["Range": "bytes=50-"], 206, ["content-range": "bytes 49-99/100"], true),
        (["Range": "bytes=50-"], 206, ["content-range": "bytes 50-98/100"], true),
        (["Range": "bytes=50-"], 206, ["content-range": "bytes 50-99/*"], true),
        (["Range": "bytes=50-"], 206, [:], true),
        (["Range": "bytes=50-"], 206, ["content-range": "bytes 50-99/100", "content-encoding": "gzip"], true),
        (["Range": "bytes=50-"], 206, ["content-range": "bytes 50-99/100", "content-encoding": "identity"], false),
        (["Range": "bytes=10-19"], 206, ["content-range": "bytes 10-19/100"], false),
        (["Range": "bytes=10-19"], 206, ["content-range": "bytes 10-14/15"], false),
        (["Range": "bytes=10-19"], 206, ["content-range": "bytes 10-14/100"], true),
        (["Range": "bytes=0-9,20-29"], 206, ["content-type": "multipart/byteranges; boundary=x"], true),
        // A resume's If-Range: a 206 of another entity tag is another representation's range
        // (RFC 9110 §13.1.5); the same tag, or none named, continues the bytes held.
        (
            ["Range": "bytes=50-", "If-Range": "\"v1\""], 206, ["content-range": "bytes 50-99/100", "etag": "\"v2\""],
            true
        ),
        (
            ["Range": "bytes=50-", "If-Range": "\"v1\""], 206, ["content-range": "bytes 50-99/100", "etag": "\"v1\""],
            false
        ),
        (["Range": "bytes=50-", "If-Range": "\"v1\""], 206, ["content-range": "bytes 50-99/100"], false),
        (["Range": "bytes=50-", "If-Range": "\"v1\""], 200, ["etag": "\"v2\""], false),
    ]

    @Test(arguments: heads)
    func headsAreHeldToTheRequest(
        _ request: [String: String], _ status: Int, _ response: [String: String], _ refused: Bool
    ) {
        let expectation = ResponseExpectation(method: "get", headers: request)
        let problem = expectation.checkHead(status: status, headers: response, contentLengths: [])
        #expect((problem != nil) == refused, "\(problem ?? "accepted")")
    }

    @Test func bodiesAreHeldToTheirLengthsOnTheWire() {
        let plain = ResponseExpectation(method: "GET", headers: [:])
        let resume = ResponseExpectation(method: "GET", headers: ["Range": "bytes=50-"])
        let head = ResponseExpectation(method: "HEAD", headers: [:])

        #expect(plain.checkBody(status: 200, headers: [:], contentLengths: ["100"], wireBytes: 100) == nil)
        #expect(plain.checkBody(status: 200, headers: [:], contentLengths: ["100"], wireBytes: 99) != nil)
        #expect(plain.checkBody(status: 200, headers: [:], contentLengths: [], wireBytes: 12_345) == nil)
        #expect(head.checkBody(status: 200, headers: [:], contentLengths: ["100"], wireBytes: 0) == nil)
        #expect(
            resume.checkBody(
                status: 206, headers: ["content-range": "bytes 50-99/100"], contentLengths: [],
                wireBytes: 50) == nil)
        #expect(
            resume.checkBody(
                status: 206, headers: ["content-range": "bytes 50-99/100"], contentLengths: [],
                wireBytes: 40) != nil)
    }
}
