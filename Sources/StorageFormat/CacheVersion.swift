import Foundation

/// A storage version such as `1.5` or `2.10`, compared numerically component by component.
///
/// `1.10 > 1.9`, `2.1` may follow `1.9`, and trailing zero components do not matter
/// (`1.5 == 1.5.0`). The original text is kept for display and file names.
public struct CacheVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The numeric components, trailing zeros removed for comparison.
    public let components: [UInt64]
    /// The version as written, surrounding whitespace trimmed.
    public let text: String

    /// The longest version text: a version is part of change lists' file names
    /// (`changes_A_B.json`, at most 255 bytes), and of every message about it.
    public static let maxLength = 100

    /// Parses `text`; throws a message naming the text when a component is not a whole number,
    /// or when it is longer than ``maxLength``.
    public init(_ text: String) throws(CacheVersionError) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.utf8.count <= Self.maxLength else { throw CacheVersionError(text: text) }
        var parts: [UInt64] = []
        for part in trimmed.split(separator: ".", omittingEmptySubsequences: false) {
            guard !part.isEmpty, part.allSatisfy(\.isASCII), part.allSatisfy(\.isNumber), let value = UInt64(part)
            else {
                throw CacheVersionError(text: text)
            }
            parts.append(value)
        }
        while parts.count > 1, parts.last == 0 { parts.removeLast() }
        self.components = parts
        self.text = trimmed
    }

    public var description: String { text }

    /// Equal when the numbers are, whatever the text: `1.5 == 1.5.0` and `1.05 == 1.5`.
    public static func == (lhs: CacheVersion, rhs: CacheVersion) -> Bool { lhs.components == rhs.components }
    public func hash(into hasher: inout Hasher) { hasher.combine(components) }

    /// Numerically, component by component, a missing component counting as 0:
    /// `1.9 < 1.10 < 2.1` and `1.5 < 1.5.1`.
    public static func < (lhs: CacheVersion, rhs: CacheVersion) -> Bool {
        for (left, right) in zip(lhs.components, rhs.components) where left != right {
            return left < right
        }
        return lhs.components.count < rhs.components.count
    }
}

/// A version string that is not dot-separated whole numbers.
public struct CacheVersionError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The text that was refused, as given.
    public var text: String
    public var description: String {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.isEmpty {
            return "the version is empty: use dot-separated whole numbers such as \"1.5\" or \"2.10\""
        }
        if trimmed.utf8.count > CacheVersion.maxLength {
            // Quoted in part: a version of 200,000 components made a 400 KB message.
            return "'\(trimmed.prefix(40))…' (\(trimmed.utf8.count) bytes) is not a version: a version has at most "
                + "\(CacheVersion.maxLength) characters; use dot-separated whole numbers such as \"1.5\" or \"2.10\""
        }
        return "'\(text)' is not a version: use dot-separated whole numbers such as \"1.5\" or \"2.10\""
    }
}
