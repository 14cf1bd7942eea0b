import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

@Suite("Versions compare numerically, component by component", .timeLimit(.minutes(3)))
struct CacheVersionTests {
    @Test(arguments: [
        ("1.10", "1.9", 1), ("2.1", "1.9", 1), ("1.5", "1.5.0", 0), ("1.0", "1", 0), ("1.0.1", "1.0", 1),
        ("0.9", "1.0", -1), ("10", "9.99", 1), ("1.2.3", "1.2.10", -1), (" 1.5", "1.5", 0),
    ])
    func versionsOrderAsNumbers(left: String, right: String, order: Int) throws {
        let a = try CacheVersion(left)
        let b = try CacheVersion(right)
        switch order {
        case 1: #expect(a > b)
        case -1: #expect(a < b)
        default: #expect(a == b && a.hashValue == b.hashValue)
        }
    }

    @Test(arguments: ["1..2", "a.b", "1.x", "-1", "1.2-beta", ".5", "1.", "١.٢"])
    func nonNumericVersionsAreRefusedWithTheText(text: String) {
        #expect {
            try CacheVersion(text)
        } throws: { error in
            "\(error)".contains("'\(text)'")
        }
    }

    /// A version longer than `CacheVersion.maxLength` is refused, quoted in part: one of
    /// 200,000 components made a 400 KB message (and last error). At the limit it parses.
    @Test func aVersionTooLongIsRefusedQuotedInPart() throws {
        let longest = String(repeating: "1.", count: CacheVersion.maxLength / 2 - 1) + "10"
        #expect(longest.utf8.count == CacheVersion.maxLength)
        #expect(try CacheVersion(longest).text == longest)
        let huge = Array(repeating: "1", count: 200_000).joined(separator: ".")
        let error = #expect(throws: CacheVersionError.self) { try CacheVersion(huge) }
        let message = error.map { "\($0)" } ?? ""
        #expect(message.utf8.count < 300, "\(message.prefix(400))")
        #expect(message.contains("(399999 bytes) is not a version: a version has at most 100 characters"), "\(message)")
        #expect(throws: CacheVersionError.self) { try CacheVersion(longest + "1") }
    }

    /// Said as it is, not as "'' is not a version" or "must be a string, found a string".
    @Test(arguments: ["", "  "])
    func anEmptyVersionIsCalledEmpty(text: String) {
        #expect {
            try CacheVersion(text)
        } throws: { error in
            "\(error)".hasPrefix("the version is empty")
        }
    }
}
