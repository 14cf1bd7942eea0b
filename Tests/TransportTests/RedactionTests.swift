import Foundation
import Testing
import Transport

/// What `Redaction` leaves of a URL's user info, in URLs and in the messages that quote them.
@Suite("Redaction hides a URL's password or token, in URLs and in prose")
struct RedactionTests {
    @Test(
        "text",
        arguments: [
            ("https://TOKEN@host/x/", "https://***@host/x/"),
            ("https://alice:S3cret@host/x/", "https://alice:***@host/x/"),
            // RFC 3986 allows sub-delims in the user info: the whole password goes, not the part before ','.
            ("https://alice:pa,ss(1)'!$&*+;=@host/x/", "https://alice:***@host/x/"),
            ("https://tok,en@host", "https://***@host"),
            ("base URL 'https://alice:S3cret@host' is bad", "base URL 'https://alice:***@host' is bad"),
            ("base URL 'https://alice:S3cret@host/x/' is bad", "base URL 'https://alice:***@host/x/' is bad"),
            (
                "GET https://a:b@one/x and https://c@two/y failed",
                "GET https://a:***@one/x and https://***@two/y failed"
            ),
            ("http://u:p@[::1]:8080/s/", "http://u:***@[::1]:8080/s/"),
            ("a:p@b@host/", "a:p@b@host/"),
            ("https://a:p@b@host/", "https://a:***@host/"),
            ("line one https://u:p@h\nnext", "line one https://u:***@h\nnext"),
            // No user info: unchanged.
            ("https://host/x?mail=a@b.c#f@g", "https://host/x?mail=a@b.c#f@g"),
            ("mail a@b.c, see https://host/x/", "mail a@b.c, see https://host/x/"),
            ("(https://host) by a@b", "(https://host) by a@b"),
            ("http://[::1]:8080/x", "http://[::1]:8080/x"),
        ])
    func text(input: String, expected: String) {
        #expect(Redaction.text(input) == expected)
    }

    @Test func urlKeepsTheUserNameAndHidesThePassword() throws {
        let url = try #require(URL(string: "https://alice:S3cret@example.com/storage/"))
        #expect(Redaction.url(url) == "https://alice:***@example.com/storage/")
        #expect(Redaction.hasUserInfo(url))
        #expect(!Redaction.hasUserInfo(try #require(URL(string: "https://example.com/a@b"))))
    }
}
