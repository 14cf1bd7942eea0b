import Testing

@testable import Transport

@Suite
struct HeaderLineTests {
    static func parse(_ bytes: [UInt8]) -> HeaderLine {
        bytes.withUnsafeBytes { HeaderLine($0) }
    }

    static func parse(_ text: String) -> HeaderLine {
        parse(Array(text.utf8))
    }

    @Test(arguments: [
        ("HTTP/1.1 200 OK\r\n", 200),
        ("HTTP/1.1 206 Partial Content\r\n", 206),
        ("HTTP/2 304\r\n", 304),
        ("HTTP/1.0 503 Service Unavailable\r\n", 503),
        ("HTTP/1.1 100 Continue\r\n", 100),
        ("HTTP/1.1 2000 Odd\r\n", 200), // three digits at most, as before: the first three
        ("HTTP/1.1 OK\r\n", 0), // no code: 0, which no success check accepts
        ("HTTP/1.1\r\n", 0),
    ])
    func statusLines(_ line: String, _ code: Int) {
        #expect(Self.parse(line) == .status(code))
    }

    @Test func fieldNamesAreLowerCasedAndValuesTrimmedOfOptionalWhitespace() {
        #expect(Self.parse("Content-Length: 4096\r\n") == .field(name: "content-length", value: "4096"))
        #expect(Self.parse("ETag:\t \"abc\" \t\r\n") == .field(name: "etag", value: "\"abc\""))
        #expect(Self.parse("Retry-After:120\r\n") == .field(name: "retry-after", value: "120"))
        #expect(Self.parse("X-Empty:\r\n") == .field(name: "x-empty", value: ""))
        // Only the first colon separates; the value keeps the rest, inner spaces included.
        #expect(Self.parse("Location: http://h:8080/a b\r\n") == .field(name: "location", value: "http://h:8080/a b"))
        // The value keeps its case.
        #expect(
            Self.parse("Content-Type: Application/JSON\r\n") == .field(name: "content-type", value: "Application/JSON"))
    }

    @Test func bytesOverSevenBitsReadAsLatin1() {
        // 0xE9 is "é" in ISO-8859-1; the old Foundation path decoded the same way.
        #expect(Self.parse(Array("X-Name: caf".utf8) + [0xE9, 0x0D, 0x0A]) == .field(name: "x-name", value: "café"))
        // Non-breaking space (0xA0) is not HTTP whitespace: it stays.
        #expect(Self.parse(Array("X-A: a".utf8) + [0xA0]) == .field(name: "x-a", value: "a\u{A0}"))
    }

    @Test(arguments: ["\r\n", "\n"])
    func theEmptyLineEndsTheHead(_ line: String) {
        #expect(Self.parse(line) == .end)
    }

    @Test(arguments: ["", "   \r\n", "\t\r\n", "no colon here\r\n"])
    func blankAndUnreadableLinesAreOther(_ line: String) {
        #expect(Self.parse(line) == .other)
    }

    /// RFC 9112 §5.2: a line that starts with a space or tab continues the field before it (a
    /// colon in it names no new field); §2.2: a bare CR in a value is a space.
    @Test func foldedLinesContinueAndBareCarriageReturnsAreSpaces() {
        #expect(Self.parse(" no-store\r\n") == .continuation("no-store"))
        #expect(Self.parse("\t no-cache \r\n") == .continuation("no-cache"))
        #expect(Self.parse(" Cache-Control: max-age=3600\r\n") == .continuation("Cache-Control: max-age=3600"))
        #expect(
            Self.parse("Cache-Control: max-age=3600,\rno-store\r\n")
                == .field(name: "cache-control", value: "max-age=3600, no-store"))
    }
}
