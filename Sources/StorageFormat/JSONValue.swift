/// A parsed JSON document that keeps each number exactly as written.
///
/// Foundation's decoders turn the version `1.10` into the double 1.1, which then compares equal
/// to `1.1` and below `1.9`. Storages write versions as bare numbers often enough that this
/// matters, so protocol files are read with this small parser instead. It also bounds nesting
/// depth, so a hostile, deeply nested file fails cleanly instead of exhausting the stack.
public indirect enum JSONValue: Sendable, Equatable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// The number's literal text, e.g. `"1.10"`.
    case number(String)
    /// A string, its escapes decoded.
    case string(String)
    /// An array, in order.
    case array([JSONValue])
    /// An object's members by name; of repeated names the last wins.
    case object([String: JSONValue])

    /// The deepest nesting accepted.
    public static let maxDepth = 64

    /// Parses UTF-8 JSON text. Throws ``JSONParseError`` with the byte offset of the problem.
    ///
    /// Contiguous input (`Data`, `[UInt8]`) is read in place, without a copy.
    public static func parse<Bytes: Collection<UInt8>>(_ bytes: Bytes) throws(JSONParseError) -> JSONValue {
        let parsed = bytes.withContiguousStorageIfAvailable { buffer in
            Result { () throws(JSONParseError) -> JSONValue in
                var parser = JSONParser(bytes: UnsafeRawBufferPointer(buffer))
                return try parser.parseDocument()
            }
        }
        if let parsed { return try parsed.get() }
        return try Array(bytes).withUnsafeBytes { buffer in
            Result { () throws(JSONParseError) -> JSONValue in
                var parser = JSONParser(bytes: buffer)
                return try parser.parseDocument()
            }
        }.get()
    }

    /// The member named `key`, when this is an object holding it.
    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// A string, or a number's literal text: protocol fields accept both.
    public var scalarText: String? {
        switch self {
        case .string(let text): return text
        case .number(let literal): return literal
        default: return nil
        }
    }

    /// `true`/`false`; also the strings "true", "yes", "1" and "false", "no", "0", "" (any case),
    /// a number (true unless 0) and `null` (false). Nil for anything else.
    public var looseBool: Bool? {
        switch self {
        case .bool(let value): return value
        case .string(let text):
            return ["true", "yes", "1"].contains(text.lowercased())
                ? true
                : (["false", "no", "0", ""].contains(text.lowercased()) ? false : nil)
        case .number(let literal): return Double(literal).map { $0 != 0 }
        case .null: return false
        default: return nil
        }
    }

    /// A short name of the value's kind, for error messages.
    public var kindName: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

/// Why a JSON text did not parse.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Where the problem is: a byte offset into the text, from 0.
    public var offset: Int
    /// What is wrong there, e.g. "expected ',' or '}' in an object".
    public var reason: String
    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}
