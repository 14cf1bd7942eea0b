import ContentPublishing
import FileKit
import Foundation
import PercentDecoding
import StorageFormat
import Testing

/// The byte-level encoder that replaced Foundation's `addingPercentEncoding` on the download
/// path: it must give the very same text (published change lists and download URLs must not
/// change) and be undone exactly by ``PercentDecoding``.
@Suite
struct PercentEncodingTests {
    /// What the client and the publisher used before (unreserved plus `!$&'()*+,=@`).
    static let foundationAllowed: CharacterSet = {
        var set = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        set.insert(charactersIn: "-._~!$&'()*+,=@")
        return set
    }()

    static let samples = [
        "plain.txt", "a b", "10:30 notes.txt", "100%.txt", "q?.txt", "#1.txt", "semi;colon", "slash/inside",
        "日本語.txt", "é.txt", "\u{FEFF}{}", "\u{200B}x", "~tilde-_.", "!$&'()*+,=@", "\"quoted\"", "<>[]{}|\\^`",
        "tab\there", "emoji 🎉.png", "", "%", "%41",
    ]

    @Test(arguments: samples)
    func matchesFoundationAndDecodesBack(_ text: String) {
        let encoded = PercentEncoding.encodeComponent(text)
        #expect(encoded == text.addingPercentEncoding(withAllowedCharacters: Self.foundationAllowed))
        #expect(PercentDecoding.decode(encoded) == text)
        #expect(!encoded.contains("/") && !encoded.contains(":") && !encoded.contains(";"))
    }

    @Test func randomUnicodeTextMatchesFoundationAndRoundTrips() {
        var generator = SystemRandomNumberGenerator()
        let pool: [Unicode.Scalar] =
            (0x20...0x7E).compactMap(Unicode.Scalar.init)
            + [0xA0, 0xE9, 0x391, 0x5D0, 0x3042, 0xFEFF, 0x1F600, 0x10FFFD].compactMap(Unicode.Scalar.init)
        for _ in 0..<2000 {
            var text = ""
            for _ in 0..<Int.random(in: 0...12, using: &generator) {
                text.unicodeScalars.append(pool.randomElement(using: &generator)!)
            }
            let encoded = PercentEncoding.encodeComponent(text)
            #expect(
                encoded == text.addingPercentEncoding(withAllowedCharacters: Self.foundationAllowed),
                "\(text.debugDescription)")
            #expect(PercentDecoding.decode(encoded) == text, "\(text.debugDescription)")
        }
    }
}
