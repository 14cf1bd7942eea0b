import Testing
@testable import StorageServer

/// Request path decoding, range parsing and tag comparison, without sockets.
@Suite(.timeLimit(.minutes(1)))
struct PureLogicTests {
    @Test(arguments: [
        ("/a.txt", ["a.txt"]),
        ("/dir/sub/file.bin", ["dir", "sub", "file.bin"]),
        ("/a%20b/%C3%A9.txt", ["a b", "é.txt"]),
        ("/", []),
        ("/..a/b..", ["..a", "b.."]),
        ("/%252e%252e", ["%2e%2e"]),
    ])
    func requestPathDecodesEachComponent(raw: String, components: [String]) {
        #expect(RequestPath(percentEncoded: raw)?.components == components)
    }

    @Test(arguments: [
        "", "a.txt", "/..", "/../x", "/a/../b", "/./a", "/%2e%2e/x", "/%2E%2e", "/.%2e/x",
        "/a%2fb", "/a%2F..%2Fb", "/a%00b", "//a", "/a//b", "/a/", "/bad%zzescape",
    ])
    func requestPathRefusesAnythingThatCouldLeaveTheRoot(raw: String) {
        #expect(RequestPath(percentEncoded: raw) == nil)
    }

    @Test(arguments: [
        ("bytes=0-9", 100, ByteRange.partial(0..<10)),
        ("bytes=90-200", 100, .partial(90..<100)),
        ("bytes=99-", 100, .partial(99..<100)),
        ("bytes=-10", 100, .partial(90..<100)),
        ("bytes=-500", 100, .partial(0..<100)),
        (" bytes=5-5 ", 100, .partial(5..<6)),
        ("bytes = 5-5", 100, .whole),
        ("BYTES=1-2", 100, .partial(1..<3)),
        ("bytes=100-", 100, .unsatisfiable),
        ("bytes=100-200", 100, .unsatisfiable),
        ("bytes=-0", 100, .unsatisfiable),
        ("bytes=-5", 0, .unsatisfiable),
        ("bytes=0-", 0, .unsatisfiable),
        ("bytes=5-1", 100, .whole),
        ("bytes=0-1,3-4", 100, .whole),
        ("bytes=-", 100, .whole),
        ("bytes=a-b", 100, .whole),
        ("bytes=+1-2", 100, .whole),
        ("lines=0-9", 100, .whole),
    ])
    func byteRangeFollowsRFC9110(header: String, size: Int, expected: ByteRange) {
        #expect(ByteRange(header: header, size: size) == expected)
    }

    @Test func missingRangeHeaderMeansTheWholeFile() {
        #expect(ByteRange(header: nil, size: 10) == .whole)
    }

    @Test func entityTagComparesWeaklyForIfNoneMatchAndStronglyForIfRange() {
        let tag = EntityTag(inode: 0xabc, size: 10, modificationNanoseconds: 0x1f)
        #expect(tag.value == "\"abc-a-1f\"")
        #expect(tag.matches(ifNoneMatch: "\"abc-a-1f\""))
        #expect(tag.matches(ifNoneMatch: "W/\"abc-a-1f\""))
        #expect(tag.matches(ifNoneMatch: "\"x\", \"abc-a-1f\""))
        #expect(tag.matches(ifNoneMatch: " * "))
        #expect(!tag.matches(ifNoneMatch: "\"abc-a-20\""))
        #expect(tag.matches(ifRange: "\"abc-a-1f\""))
        #expect(!tag.matches(ifRange: "W/\"abc-a-1f\""))
        #expect(!tag.matches(ifRange: "Wed, 21 Oct 2015 07:28:00 GMT"))
    }

    @Test func entityTagsDifferWhenAnyIdentityPartDiffers() {
        let base = EntityTag(inode: 1, size: 2, modificationNanoseconds: 3)
        #expect(base != EntityTag(inode: 9, size: 2, modificationNanoseconds: 3))
        #expect(base != EntityTag(inode: 1, size: 9, modificationNanoseconds: 3))
        #expect(base != EntityTag(inode: 1, size: 2, modificationNanoseconds: 9))
    }

    @Test(arguments: [
        ("index.json", "application/json"),
        ("A.ZIP", "application/zip"),
        ("notes.txt", "text/plain; charset=utf-8"),
        ("noextension", "application/octet-stream"),
        (".hidden", "application/octet-stream"),
        ("archive.unknownext", "application/octet-stream"),
    ])
    func contentTypeIsChosenByExtension(name: String, type: String) {
        #expect(ContentType.forFileName(name) == type)
    }

    @Test(arguments: [
        ("v2/a b.zip", "/v2/a%20b.zip"),
        ("/v2/é.txt", "/v2/%C3%A9.txt"),
        ("a:b/c?d#e", "/a%3Ab/c%3Fd%23e"),
        ("/", "/"),
        ("100%.txt", "/100%25.txt"),
    ])
    func serverPathsArePercentEncodedPerComponent(path: String, encoded: String) {
        #expect(StorageServer.percentEncodedPath(path) == encoded)
    }
}
