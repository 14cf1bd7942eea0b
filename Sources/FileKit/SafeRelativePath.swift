import Foundation

/// A relative path that is safe to join onto a destination folder: it cannot climb out of it.
///
/// Archive entry names and change-list paths both pass through here, so one set of rules guards
/// every write. The rules refuse rather than repair: a storage that names `../x` is hostile or
/// broken, and silently rewriting its paths would hide that.
public struct SafeRelativePath: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The path's components, each non-empty and none `.` or `..`.
    public let components: [String]

    /// The components joined with `/`, without a leading or trailing slash; empty for the root.
    public var string: String { components.joined(separator: "/") }
    public var description: String { string }
    /// True for the root: the path with no components.
    public var isRoot: Bool { components.isEmpty }
    /// The last component (the file or folder name); nil for the root.
    public var lastComponent: String? { components.last }

    /// The longest a single component may be, in UTF-8 bytes (Linux NAME_MAX).
    public static let maxComponentBytes = 255
    /// The longest a whole path may be, in UTF-8 bytes (Linux PATH_MAX).
    public static let maxPathBytes = 4095

    /// The root of the destination itself.
    public static let root = SafeRelativePath(checkedComponents: [])

    /// Validates `raw` as a relative path. A single trailing `/` is allowed (it marks a folder in
    /// zip archives); repeated or leading slashes are not.
    ///
    /// Slashes are found in the UTF-8 bytes, never as Characters: a `/` followed by a combining
    /// mark is one Character, and splitting on Characters would leave it inside a component (found
    /// by the fuzzer), while the filesystem splits there.
    public init(validating raw: String) throws(SafePathError) {
        let slash = UInt8(ascii: "/")
        if raw.utf8.contains(0) { throw SafePathError(path: raw, reason: .nul) }
        if raw.utf8.contains(UInt8(ascii: "\\")) { throw SafePathError(path: raw, reason: .backslash) }
        if raw.utf8.first == slash { throw SafePathError(path: raw, reason: .absolute) }
        if raw.utf8.count > Self.maxPathBytes { throw SafePathError(path: raw, reason: .tooLong) }
        var text = Substring(raw).utf8[...]
        if text.last == slash { text = text.dropLast() }
        if text.isEmpty {
            self.components = []
            return
        }
        var parts: [String] = []
        for bytes in text.split(separator: slash, omittingEmptySubsequences: false) {
            // Cut at ASCII bytes, so each part is whole UTF-8.
            let part = String(Substring(bytes))
            if let reason = Self.componentFault(part) { throw SafePathError(path: raw, reason: reason) }
            parts.append(part)
        }
        self.components = parts
    }

    private init(checkedComponents: [String]) {
        self.components = checkedComponents
    }

    /// The folder holding this path; the root's parent is the root.
    public var parent: SafeRelativePath {
        SafeRelativePath(checkedComponents: Array(components.dropLast()))
    }

    /// Every ancestor folder from the top down, excluding the root and the path itself.
    public var ancestors: [SafeRelativePath] {
        guard components.count > 1 else { return [] }
        return (1..<components.count).map { SafeRelativePath(checkedComponents: Array(components.prefix($0))) }
    }

    /// True when `self` is `other` or lies inside it.
    public func isWithin(_ other: SafeRelativePath) -> Bool {
        components.count >= other.components.count
            && Array(components.prefix(other.components.count)) == other.components
    }

    /// `self` with the prefix `base` swapped for `newBase`. `self` must lie within `base`.
    public func rebased(from base: SafeRelativePath, onto newBase: SafeRelativePath) -> SafeRelativePath {
        precondition(isWithin(base), "\(self) is not within \(base)")
        return SafeRelativePath(checkedComponents: newBase.components + components.dropFirst(base.components.count))
    }

    /// Two of `paths` that are equal but for letter case, if any (the first pair in path order).
    /// Such paths are one path on case-insensitive file systems, so archives and publishers
    /// refuse them.
    ///
    /// A first pass keeps only a hash of each folded path (8 bytes a path, where a dictionary of
    /// folded strings held 9.5 MiB at 100,000 paths, the largest allocation of a restore's plan);
    /// only when two hashes meet (a collision, a path given twice, or a rare equal hash) are the
    /// folded paths compared.
    public static func caseCollision(in paths: [SafeRelativePath]) -> (SafeRelativePath, SafeRelativePath)? {
        var hashes = Set<Int>(minimumCapacity: paths.count)
        guard paths.contains(where: { !hashes.insert(caseFolded($0.string).hashValue).inserted }) else { return nil }
        hashes = []
        var byFolded: [String: SafeRelativePath] = [:]
        for path in paths.sorted() {
            let folded = caseFolded(path.string)
            if let earlier = byFolded[folded], earlier != path { return (earlier, path) }
            byFolded[folded] = path
        }
        return nil
    }

    /// `text` folded as case-insensitive file systems compare names (NTFS's and exFAT's upcase
    /// tables): each character by its simple uppercase mapping, then lowercased, so `ς`, `σ`
    /// and `Σ` meet, where lowercasing alone keeps `ς` apart. A character whose uppercase is
    /// several (`ß` → `SS`) keeps its own, as those tables do. Swift's string equality and
    /// hashing then also match Unicode normalization forms.
    static func caseFolded(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 >= 0x80 }) else { return text.lowercased() }
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            let upper = scalar.properties.uppercaseMapping.unicodeScalars
            scalars.append(upper.count == 1 ? upper.first! : scalar)
        }
        return String(scalars).lowercased()
    }

    /// Appends one already-safe path.
    public func appending(_ other: SafeRelativePath) -> SafeRelativePath {
        SafeRelativePath(checkedComponents: components + other.components)
    }

    /// Appends one component, checked by the rules ``init(validating:)`` applies to each
    /// component. As with ``appending(_:)``, the whole path's length is not checked again.
    public func appending(component name: String) throws(SafePathError) -> SafeRelativePath {
        if let reason = Self.componentFault(name) { throw SafePathError(path: name, reason: reason) }
        var extended = components
        extended.append(name)
        return SafeRelativePath(checkedComponents: extended)
    }

    /// Whether `name` passes the rules ``init(validating:)`` applies to each component: what
    /// ``appending(component:)`` checks, without building a path or an error.
    public static func isSafeComponent(_ name: String) -> Bool { componentFault(name) == nil }

    /// Why `name` is not a safe component, or nil when it is: the one set of component rules
    /// (``init(validating:)`` checks NUL, backslashes and the length of the whole path first).
    private static func componentFault(_ name: String) -> SafePathError.Reason? {
        let bytes = name.utf8
        if bytes.isEmpty { return .emptyComponent }
        // One pass over the bytes; the faults are then named in the order the checks always had.
        // A byte below 0x20 or 0x7F in UTF-8 is always that scalar (a C0 control or DEL).
        var (nul, backslash, slash, control) = (false, false, false, false)
        for byte in bytes where byte < 0x20 || byte == 0x7F || byte == UInt8(ascii: "\\") || byte == UInt8(ascii: "/") {
            switch byte {
            case 0: nul = true
            case UInt8(ascii: "\\"): backslash = true
            case UInt8(ascii: "/"): slash = true
            default: control = true
            }
        }
        if nul { return .nul }
        if backslash { return .backslash }
        if slash { return .emptyComponent }
        if bytes.elementsEqual(".".utf8) || bytes.elementsEqual("..".utf8) { return .dotComponent }
        if bytes.count > maxComponentBytes { return .tooLong }
        return control ? .controlCharacter : nil
    }

    /// The path under `folder` on the local filesystem.
    public func absolute(in folder: String) -> String {
        components.isEmpty ? folder : folder + "/" + string
    }

    /// Component by component. Equal components are skipped with `==`, which compares small
    /// strings' bits; `lexicographicallyPrecedes` ordered each equal pair twice with `<`, and
    /// paths that share a long prefix (a deep tree) are mostly equal pairs.
    public static func < (lhs: SafeRelativePath, rhs: SafeRelativePath) -> Bool {
        let (left, right) = (lhs.components, rhs.components)
        var index = 0
        while index < left.count, index < right.count {
            if left[index] != right[index] { return left[index] < right[index] }
            index += 1
        }
        return left.count < right.count
    }
}

/// Why a path was refused. The message names the path and what is wrong with it.
public struct SafePathError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong with a refused path; the raw value is the phrase the message uses.
    public enum Reason: String, Sendable, Equatable {
        /// The path holds a NUL byte.
        case nul = "contains a NUL byte"
        /// The path holds a backslash.
        case backslash = "contains a backslash"
        /// The path starts with `/`.
        case absolute = "is absolute"
        /// A component is empty (`//`), or a single component given holds a `/`.
        case emptyComponent = "has an empty component (//)"
        /// A component is `.` or `..`.
        case dotComponent = "has a '.' or '..' component that could leave the destination"
        /// A component holds a control character (U+0001–U+001F or U+007F).
        case controlCharacter = "contains a control character"
        /// A component is over ``SafeRelativePath/maxComponentBytes`` or the whole path over
        /// ``SafeRelativePath/maxPathBytes`` bytes of UTF-8.
        case tooLong = "is longer than Linux allows"
        /// A storage URL that is not an http(s) URL under the storage's `RXCacheContent/` folder.
        case notUnderContentRoot = "is not under the storage's RXCacheContent/ folder"
        /// A storage URL with a malformed `%XX` escape.
        case badEncoding = "has invalid percent-encoding"
        /// A storage URL whose component escapes a `/` (`%2F`): no file name can hold one, and
        /// hosts disagree on whether it separates folders.
        case encodedSlash =
            "escapes a '/' (%2F) inside a name, which no file name can hold; the publisher must write folders with a plain '/'"
    }

    /// The refused path (or component), as given.
    public var path: String
    /// Why it was refused.
    public var reason: Reason

    /// An error refusing `path` for `reason`.
    public init(path: String, reason: Reason) {
        self.path = path
        self.reason = reason
    }

    public var description: String {
        let shown = path.replacingOccurrences(of: "\0", with: "\\0")
        return "path '\(shown)' \(reason.rawValue); refusing it"
    }
}
