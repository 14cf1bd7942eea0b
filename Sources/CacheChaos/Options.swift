import Foundation

/// Writes one line to stdout with a single `write(2)`, unbuffered: a parent reading the file
/// after a SIGKILL sees every step that finished.
func emit(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    bytes.withUnsafeBytes { raw in
        var offset = 0
        while offset < raw.count {
            let written = write(1, raw.baseAddress! + offset, raw.count - offset)
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }
}

/// `--name value` options after the mode.
struct Options {
    private var values: [String: String] = [:]

    init(_ arguments: ArraySlice<String>) throws {
        var rest = arguments
        while let name = rest.popFirst() {
            guard name.hasPrefix("--"), let value = rest.popFirst() else {
                throw ChaosFailure("expected --name value pairs, got '\(name)'; see cache-chaos --help")
            }
            values[String(name.dropFirst(2))] = value
        }
    }

    func string(_ name: String, _ fallback: String? = nil) throws -> String {
        if let value = values[name] ?? fallback { return value }
        throw ChaosFailure("--\(name) is required")
    }

    func int(_ name: String, _ fallback: Int) throws -> Int {
        guard let text = values[name] else { return fallback }
        guard let value = Int(text) else { throw ChaosFailure("--\(name) '\(text)' is not a whole number") }
        return value
    }

    func double(_ name: String, _ fallback: Double) throws -> Double {
        guard let text = values[name] else { return fallback }
        guard let value = Double(text) else { throw ChaosFailure("--\(name) '\(text)' is not a number") }
        return value
    }

    func limit() throws -> Int64? {
        values["limit"] == nil ? nil : Int64(try int("limit", 0))
    }
}
