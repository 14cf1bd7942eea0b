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

    /// A document saved as UTF-16 or UTF-32 (with a byte order mark or without) is refused
    /// naming its encoding, at byte 0, whatever byte the parser stopped at.
    @Test(arguments: [
        ("utf-16le", true, "UTF-16LE"), ("utf-16le", false, "UTF-16LE"), ("utf-16be", true, "UTF-16BE"),
        ("utf-16be", false, "UTF-16BE"), ("utf-32le", true, "UTF-32LE"), ("utf-32le", false, "UTF-32LE"),
        ("utf-32be", true, "UTF-32BE"), ("utf-32be", false, "UTF-32BE"),
    ])
    func aWideEncodingIsNamed(encoding: String, marked: Bool, named: String) throws {
        let text = #"{"actualVersion": "1.2"}"#
        var bytes: [UInt8] = []
        for scalar in ((marked ? "\u{FEFF}" : "") + text).unicodeScalars {
            let value = scalar.value
            let units: [UInt32] =
                encoding.hasPrefix("utf-16") ? [value & 0xFFFF] : [value]
            for unit in units {
                let width = encoding.hasPrefix("utf-16") ? 2 : 4
                let little = (0..<width).map { UInt8((unit >> (8 * UInt32($0))) & 0xFF) }
                bytes += encoding.hasSuffix("le") ? little : little.reversed()
            }
        }
        let error = #expect(throws: JSONParseError.self) { try JSONValue.parse(bytes) }
        #expect(error?.offset == 0)
        #expect(
            error?.reason == "the text is \(named), not UTF-8 (RFC 8259 §8.1); save it as UTF-8",
            "\(String(describing: error))")
        // The UTF-8 text parses, and a bad one names its own fault.
        #expect(try JSONValue.parse(Array(text.utf8))["actualVersion"] == .string("1.2"))
        let bad = #expect(throws: JSONParseError.self) { try JSONValue.parse(Array("{1}".utf8)) }
        #expect(bad?.reason.contains("UTF") == false)
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
