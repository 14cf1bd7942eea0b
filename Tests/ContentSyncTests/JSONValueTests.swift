import Testing

@testable import ContentPublishing
@testable import ContentSync
@testable import FileKit
@testable import StorageFormat

@Suite("JSON reading keeps versions exact and refuses bad input", .timeLimit(.minutes(3)))
struct JSONValueTests {
    @Test(arguments: [
        ("1.10", "1.10"), ("2", "2"), ("-0.5", "-0.5"), ("1e3", "1e3"), ("1.50", "1.50"),
    ])
    func numbersKeepTheirLiteralText(literal: String, expected: String) throws {
        let value = try JSONValue.parse(Array("{\"v\": \(literal)}".utf8))
        #expect(value["v"] == .number(expected))
    }

    @Test func stringsDecodeEscapesAndSurrogatePairs() throws {
        let value = try JSONValue.parse(Array(#"["a\"b\\c\/d\n", "\u00e8", "\ud83d\ude00", "crème"]"#.utf8))
        #expect(value == .array([.string("a\"b\\c/d\n"), .string("è"), .string("😀"), .string("crème")]))
    }

    @Test func objectsArraysAndLiteralsParse() throws {
        let value = try JSONValue.parse(Array(#" {"a": [true, false, null, {}], "b": {"c": []}} "#.utf8))
        #expect(value["a"] == .array([.bool(true), .bool(false), .null, .object([:])]))
        #expect(value["b"]?["c"] == .array([]))
    }

    @Test(arguments: [
        "", "{", "{\"a\":}", "[1,]", "{\"a\" 1}", "tru", "\"abc", "01x", "[1 2]", "{\"a\":1}}",
        "\"\u{01}\"", "1.", "-", "\"\\x\"", "\"\\ud800\"", "{a:1}",
    ])
    func malformedTextIsRefusedWithAnOffset(text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue.parse(Array(text.utf8)) }
    }

    @Test func nestingDeeperThanTheLimitIsRefused() throws {
        let deep =
            String(repeating: "[", count: JSONValue.maxDepth + 1)
            + String(repeating: "]", count: JSONValue.maxDepth + 1)
        #expect(throws: JSONParseError.self) { try JSONValue.parse(Array(deep.utf8)) }
        let allowed =
            String(repeating: "[", count: JSONValue.maxDepth) + String(repeating: "]", count: JSONValue.maxDepth)
        #expect(throws: Never.self) { try JSONValue.parse(Array(allowed.utf8)) }
    }

    @Test func invalidUTF8InAStringIsRefused() {
        #expect(throws: JSONParseError.self) { try JSONValue.parse([0x22, 0xFF, 0xFE, 0x22]) }
    }

    @Test(arguments: [
        (JSONValue.bool(true), true), (.string("false"), false), (.number("1"), true), (.number("0"), false),
        (.null, false),
    ])
    func looseBooleansAcceptCommonSpellings(value: JSONValue, expected: Bool) {
        #expect(value.looseBool == expected)
    }
}
