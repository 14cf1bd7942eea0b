import FileKit
import Foundation

/// Reads a `changes_A_B.json` without building it in memory.
///
/// A change list can hold a million changes. Parsed into ``JSONValue``s and ``Change``s it took
/// thirteen times its own size; this reader keeps only the body. Creating it checks the whole
/// text, so a syntax error anywhere fails before any change is used (as a full parse would), and
/// reads `from` and `to`, wherever they stand (the publisher sorts keys, so `"changes"` comes
/// first). ``forEachChange(_:)`` then classifies one change at a time straight from the bytes.
/// Errors name the list, the change number and what the publisher must fix, exactly as
/// ``ChangeList/parse(_:from:layout:)`` always did.
package struct ChangeListReader: Sendable {
    package let url: URL
    package let from: CacheVersion
    package let to: CacheVersion
    /// The list's bytes; empty once ``release()`` ran.
    private(set) var data: Data
    private let layout: StorageLayout
    /// The offset of the `[` of `"changes"`.
    private let changesStart: Int

    /// The name used in messages.
    package var name: String { url.lastPathComponent }

    /// Checks the text and reads the versions.
    package init(_ data: Data, from url: URL, layout: StorageLayout) throws(StorageFormatError) {
        let name = url.lastPathComponent
        let header = try Self.withParser(data, name: name) { parser throws(JSONParseError) -> Header in
            try Header.read(&parser)
        }
        func version(_ key: String, _ value: FieldValue?) throws(StorageFormatError) -> CacheVersion {
            guard
                let raw = try Self.withParser(
                    data, name: name, { parser throws(JSONParseError) in try value?.scalarText(parser) })
            else {
                throw StorageFormatError(
                    code: .invalidChangeList, message: "\(name): required key \"\(key)\" is missing or not a version")
            }
            do { return try CacheVersion(raw) } catch {
                throw StorageFormatError(code: .invalidChangeList, message: "\(name): \"\(key)\": \(error)")
            }
        }
        guard header.isObject else {
            throw StorageFormatError(
                code: .invalidChangeList,
                message: "\(name): expected a JSON object, found \(header.rootKind); the storage must publish an object"
            )
        }
        let from = try version("from", header.from)
        let to = try version("to", header.to)
        guard from < to else {
            throw StorageFormatError(
                code: .invalidChangeList,
                message:
                    "\(name): \"from\" \(from) is not below \"to\" \(to), but a change list leads from an older version to a newer one; the publisher must publish this storage again"
            )
        }
        guard case .array(let start)? = header.changes else {
            throw StorageFormatError(
                code: .invalidChangeList, message: "\(name): required key \"changes\" is missing or not an array")
        }
        self.url = url
        self.from = from
        self.to = to
        self.data = data
        self.layout = layout
        self.changesStart = start
    }

    /// Drops the body once the list has been used.
    package mutating func release() {
        data = Data()
    }

    /// Classifies each change in order and hands it to `body`. Entries that change nothing are
    /// skipped. The record is valid only during the call: its `"files"` are read from the body.
    package func forEachChange(_ body: (ChangeRecord) throws(StorageFormatError) -> Void) throws(StorageFormatError) {
        precondition(!data.isEmpty || changesStart == 0, "\(name) was released")
        let name = self.name
        var failure: StorageFormatError?
        data.withUnsafeBytes { raw in
            do throws(StorageFormatError) {
                var parser = JSONParser(bytes: raw)
                parser.index = changesStart
                parser.depth = 1
                var first = true
                var index = 0
                try Self.json(name) { () throws(JSONParseError) in try parser.beginArray() }
                while try Self.json(name, { () throws(JSONParseError) in try parser.nextElement(&first) }) {
                    if let record = try ChangeRecord.read(
                        &parser, index: index, name: name, document: url, layout: layout)
                    {
                        try body(record)
                    }
                    index += 1
                }
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }

    /// Runs `body` on a parser over `data`, turning syntax errors into the list's error.
    package static func withParser<T>(
        _ data: Data, name: String,
        _ body: (inout JSONParser) throws(JSONParseError) -> T
    ) throws(StorageFormatError) -> T {
        let result = data.withUnsafeBytes { raw in
            Result { () throws(JSONParseError) -> T in
                var parser = JSONParser(bytes: raw)
                return try body(&parser)
            }
        }
        do { return try result.get() } catch { throw syntaxError(error, name: name) }
    }

    package static func json<T>(_ name: String, _ body: () throws(JSONParseError) -> T) throws(StorageFormatError) -> T
    {
        do { return try body() } catch { throw syntaxError(error, name: name) }
    }

    package static func syntaxError(_ error: JSONParseError, name: String) -> StorageFormatError {
        StorageFormatError(
            code: .invalidChangeList, message: "\(name): \(error); the storage must publish valid JSON",
            underlying: error)
    }

    /// What the first pass finds at the top level.
    private struct Header {
        var isObject = false
        var rootKind = ""
        var from: FieldValue?
        var to: FieldValue?
        var changes: FieldValue?

        static func read(_ parser: inout JSONParser) throws(JSONParseError) -> Header {
            var header = Header()
            let first = parser.peek()
            guard first == UInt8(ascii: "{") else {
                try parser.skipValue()
                try parser.finishDocument()
                header.rootKind = FieldValue.kindName(startingWith: first!)
                return header
            }
            header.isObject = true
            try parser.beginObject()
            var firstMember = true
            while let key = try parser.nextMember(&firstMember) {
                if try parser.token(key, is: "changes") {
                    header.changes = try FieldValue.read(&parser)
                } else if try parser.token(key, is: "from") {
                    header.from = try FieldValue.read(&parser)
                } else if try parser.token(key, is: "to") {
                    header.to = try FieldValue.read(&parser)
                } else {
                    try parser.skipValue()
                }
            }
            try parser.finishDocument()
            return header
        }
    }
}

/// A member's value as found in the text, decoded only when asked.
package enum FieldValue: Equatable {
    case null
    case bool(Bool)
    case number(Range<Int>)
    case string(JSONParser.StringToken)
    /// Where the `[` stands.
    case array(Int)
    /// Where the `{` stands.
    case object(Int)

    /// Reads (checking and skipping) the value at the cursor.
    package static func read(_ parser: inout JSONParser) throws(JSONParseError) -> FieldValue {
        let start = parser.index
        switch parser.peek() {
        case UInt8(ascii: "\"")?: return .string(try parser.scanString())
        case UInt8(ascii: "-")?, (UInt8(ascii: "0")...UInt8(ascii: "9"))?: return .number(try parser.scanNumber())
        case UInt8(ascii: "t")?:
            try parser.expectWord("true")
            return .bool(true)
        case UInt8(ascii: "f")?:
            try parser.expectWord("false")
            return .bool(false)
        case UInt8(ascii: "n")?:
            try parser.expectWord("null")
            return .null
        case UInt8(ascii: "[")?:
            let at = parser.index
            try parser.skipValue()
            return .array(at)
        case UInt8(ascii: "{")?:
            let at = parser.index
            try parser.skipValue()
            return .object(at)
        default:
            parser.index = start
            try parser.skipValue() // throws the parser's own error
            preconditionFailure("skipValue accepted an invalid value")
        }
    }

    /// ``JSONValue/kindName`` of a value starting with `byte`.
    package static func kindName(startingWith byte: UInt8) -> String {
        switch byte {
        case UInt8(ascii: "{"): return "an object"
        case UInt8(ascii: "["): return "an array"
        case UInt8(ascii: "\""): return "a string"
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return "a boolean"
        case UInt8(ascii: "n"): return "null"
        default: return "a number"
        }
    }

    package var kindName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

    /// ``JSONValue/scalarText``: a string, or a number's literal text.
    package func scalarText(_ parser: JSONParser) throws(JSONParseError) -> String? {
        switch self {
        case .string(let token): return try parser.decode(token)
        case .number(let range): return parser.text(range)
        default: return nil
        }
    }

    /// ``JSONValue/looseBool``.
    package func looseBool(_ parser: JSONParser) throws(JSONParseError) -> Bool? {
        switch self {
        case .bool(let value): return value
        case .string(let token): return JSONValue.string(try parser.decode(token)).looseBool
        case .number(let range): return JSONValue.number(parser.text(range)).looseBool
        case .null: return false
        default: return nil
        }
    }
}
