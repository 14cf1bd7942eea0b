import Foundation
import Testing

@testable import Transport

/// `URL.httpOrigin`: one text per origin, for the item cache's backoff and a storage's headers.
@Suite("URL.httpOrigin")
struct URLOriginTests {
    @Test(arguments: [
        ("https://RAW.example/o/r?x=1", "https://raw.example"),
        ("https://raw.example:443/o/r", "https://raw.example"),
        ("http://raw.example:80/", "http://raw.example"),
        ("https://raw.example:8443/x", "https://raw.example:8443"),
        ("http://raw.example:443/x", "http://raw.example:443"),
        ("https://user:secret@raw.example/x", "https://raw.example"),
        ("http://[::1]:8080/x", "http://[::1]:8080"),
    ])
    func originsOfURLs(url: String, origin: String) throws {
        #expect(try #require(URL(string: url)).httpOrigin == origin)
    }

    @Test func aURLWithNoHostHasNoOrigin() throws {
        #expect(try #require(URL(string: "file:///tmp/x")).httpOrigin == nil)
        #expect(try #require(URL(string: "mailto:a@b.c")).httpOrigin == nil)
    }
}
