import Testing

@testable import Transport

/// One table of reason phrases for every status line the package writes (the test servers, the
/// agent's endpoint, `cache get --include`).
@Suite("HTTP reason phrases")
struct HTTPReasonPhraseTests {
    @Test(arguments: [
        (200, "OK"), (203, "Non-Authoritative Information"), (206, "Partial Content"), (304, "Not Modified"),
        (308, "Permanent Redirect"), (408, "Request Timeout"), (413, "Content Too Large"),
        (416, "Range Not Satisfiable"), (422, "Unprocessable Content"), (429, "Too Many Requests"),
        (431, "Request Header Fields Too Large"), (501, "Not Implemented"), (505, "HTTP Version Not Supported"),
    ])
    func namedCodes(status: Int, phrase: String) {
        #expect(HTTPReasonPhrase.phrase(for: status) == phrase)
    }

    @Test(arguments: [0, 99, 299, 418, 599, 600, -200, Int.max, Int.min])
    func codesTheRFCsDoNotNameHaveNone(status: Int) {
        #expect(HTTPReasonPhrase.phrase(for: status) == nil)
    }

    @Test func everyPhraseIsPrintableASCIIWithoutLineBreaks() {
        for status in 100...599 {
            guard let phrase = HTTPReasonPhrase.phrase(for: status) else { continue }
            #expect(!phrase.isEmpty && phrase.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }, "\(status)")
        }
    }
}
