/// `--name value` options after a tool's mode (`cache-bench get --size 4096`): the small test
/// and benchmark tools take their settings this way, each with a default where it is read.
public struct ToolOptions: Sendable {
    private var values: [String: String] = [:]

    /// Reads `--name value` pairs; `tool` names the program in the error for anything else.
    public init(_ arguments: ArraySlice<String>, tool: String) throws(ToolFailure) {
        var rest = arguments
        while let name = rest.popFirst() {
            guard name.hasPrefix("--"), let value = rest.popFirst() else {
                throw ToolFailure("expected --name value pairs, got '\(name)'; see \(tool) --help")
            }
            values[String(name.dropFirst(2))] = value
        }
    }

    /// Whether `--name` was given.
    public func has(_ name: String) -> Bool { values[name] != nil }

    /// The text of `--name`, else `fallback`; throws when neither is there.
    public func string(_ name: String, _ fallback: String? = nil) throws(ToolFailure) -> String {
        if let value = values[name] ?? fallback { return value }
        throw ToolFailure("--\(name) is required")
    }

    /// `--name` as a whole number, else `fallback`.
    public func int(_ name: String, _ fallback: Int) throws(ToolFailure) -> Int {
        guard let text = values[name] else { return fallback }
        guard let value = Int(text) else { throw ToolFailure("--\(name) '\(text)' is not a whole number") }
        return value
    }

    /// `--name` as a number, else `fallback`.
    public func double(_ name: String, _ fallback: Double) throws(ToolFailure) -> Double {
        guard let text = values[name] else { return fallback }
        guard let value = Double(text) else { throw ToolFailure("--\(name) '\(text)' is not a number") }
        return value
    }

    /// `--name` as comma-separated whole numbers, else `fallback`.
    public func ints(_ name: String, _ fallback: [Int]) throws(ToolFailure) -> [Int] {
        guard let text = values[name] else { return fallback }
        var result: [Int] = []
        for part in text.split(separator: ",") {
            guard let value = Int(part) else { throw ToolFailure("--\(name): '\(part)' is not a whole number") }
            result.append(value)
        }
        return result
    }
}

/// A tool's own failure (bad arguments, a check that did not hold), in words that name the value
/// or option and why.
public struct ToolFailure: Error, CustomStringConvertible {
    /// What went wrong.
    public var description: String

    /// A failure saying `description`.
    public init(_ description: String) { self.description = description }
}
