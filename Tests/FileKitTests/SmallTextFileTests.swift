import Foundation
import Testing

@testable import FileKit

/// A short text file in another encoding is named as such, with the line that converts it; a
/// binary file that happens to start like one is no text.
@Suite("SmallTextFile: encodings")
struct SmallTextFileTests {
    @Test(
        arguments: [
            (
                "UTF-16 LE with its mark",
                [0xFF, 0xFE] + Array("key: v\n".utf16).flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] },
                "is UTF-16 text, not UTF-8"
            ),
            (
                "UTF-16 BE with its mark",
                [0xFE, 0xFF] + Array("key: v\n".utf16).flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] },
                "is UTF-16 text, not UTF-8"
            ),
            (
                "UTF-32 LE with its mark",
                [0xFF, 0xFE, 0, 0] + Array("k\n".unicodeScalars).flatMap { [UInt8($0.value & 0xFF), 0, 0, 0] },
                "is UTF-32 text, not UTF-8"
            ),
            (
                "UTF-16 LE without a mark", Array("key: v\n".utf16).flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] },
                "is UTF-16LE text without a byte order mark, not UTF-8"
            ),
            (
                "UTF-16 BE without a mark", Array("key: v\n".utf16).flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] },
                "is UTF-16BE text without a byte order mark, not UTF-8"
            ),
            (
                "UTF-16 LE without a mark, not ASCII",
                Array("ключ: значение\n".utf16).flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] },
                "is UTF-16LE text without a byte order mark, not UTF-8"
            ),
            (
                "UTF-16 BE without a mark, not ASCII",
                Array("ключ: значение\n".utf16).flatMap { [UInt8($0 >> 8), UInt8($0 & 0xFF)] },
                "is UTF-16BE text without a byte order mark, not UTF-8"
            ),
            (
                "UTF-32 LE without a mark",
                Array("key: é\n".unicodeScalars).flatMap { [UInt8($0.value & 0xFF), UInt8($0.value >> 8), 0, 0] },
                "is UTF-32LE text without a byte order mark, not UTF-8"
            ),
            (
                "UTF-32 BE without a mark",
                Array("key: é\n".unicodeScalars).flatMap { [0, 0, UInt8($0.value >> 8), UInt8($0.value & 0xFF)] },
                "is UTF-32BE text without a byte order mark, not UTF-8"
            ),
            (
                "UTF-16 LE whose first character is U+0000 is no UTF-32",
                [0xFF, 0xFE, 0, 0] + Array("key\n".utf16).flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] },
                "is not text (not UTF-8)"
            ),
            ("binary behind a UTF-16 mark", [0xFF, 0xFE, 0x01, 0x00, 0x02, 0x00], "is not text (not UTF-8)"),
            ("binary", [0x00, 0xFF, 0x81, 0xFE], "is not text (not UTF-8)"),
            // Past the first line, the line of the first byte that is not UTF-8.
            (
                "Latin-1 on line 3", Array("a: 1\nb: 2\nc: caf".utf8) + [0xE9, 0x0A],
                "is not text (not UTF-8 from line 3)"
            ),
        ] as [(String, [UInt8], String)])
    func wideTextIsNamed(name: String, bytes: [UInt8], phrase: String) throws {
        let path = NSTemporaryDirectory() + "small-text-\(getpid())-\(UUID().uuidString)"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        defer { unlink(path) }
        do {
            _ = try SmallTextFile.read(path)
            Issue.record("\(name): read as UTF-8")
        } catch {
            #expect(error.description == phrase, "\(name)")
            if phrase.hasPrefix("is UTF") {
                let encoding = phrase.dropFirst(3).prefix { $0 != " " }
                #expect(error.remedy == "save it as UTF-8 (iconv -f \(encoding) -t UTF-8)", "\(name)")
            } else {
                #expect(error.remedy == "save it as UTF-8", "\(name)")
            }
        }
        // UTF-8 (with or without its mark) reads.
        try Data("key: v\n".utf8).write(to: URL(fileURLWithPath: path))
        #expect(try SmallTextFile.read(path) == "key: v\n")
    }

    /// UTF-8 with a stray NUL is UTF-8 (its reader then names the NUL's place), not text in
    /// another encoding that happens to decode: `ab\0c` also reads as two CJK characters in
    /// UTF-16LE.
    @Test func utf8WithAStrayNulIsNotNamedWide() throws {
        let path = NSTemporaryDirectory() + "small-text-\(getpid())-\(UUID().uuidString)"
        defer { unlink(path) }
        for text in ["ab\0c", "key: value\0 and then some more words\n", "k\0\0\0"] {
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            #expect(try SmallTextFile.read(path) == text, "\(Array(text.utf8))")
        }
    }
}
