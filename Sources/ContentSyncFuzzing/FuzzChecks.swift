import FileKit
import Foundation
import StorageFormat

/// What the fuzzer (and `make test`'s corpus replay) checks for one input: the storage document
/// parsers and the item cache's HTTP parsers never crash, whatever the bytes, and the path
/// rules, header combining, directive parsing, dates and cache keys keep their promises.
///
/// A broken promise is a `precondition` failure, which libFuzzer reports as a crash with the
/// input that caused it.
public enum FuzzChecks {
    static let base = URL(string: "https://fuzz.invalid/storage/")!
    static let document = URL(
        string: "https://fuzz.invalid/storage/RXCacheConfig/HistoryOfVersions/changes_1.0_1.1.json")!

    /// Runs every check on `bytes`.
    public static func run(_ bytes: [UInt8]) {
        documents(bytes)
        paths(String(decoding: bytes, as: UTF8.self))
        http(bytes)
    }

    /// The JSON reader and every storage document parser on the same bytes.
    static func documents(_ bytes: [UInt8]) {
        let data = Data(bytes)
        let parsed = Result { () throws(JSONParseError) in try JSONValue.parse(bytes) }
        if case .success(let value) = parsed {
            // The canonical form (what signatures cover) reads back as the same value.
            let canonical = value.canonicalData
            guard let again = try? JSONValue.parse(canonical) else {
                preconditionFailure(
                    "canonical form of a parsed document does not parse: \(String(decoding: canonical, as: UTF8.self))")
            }
            precondition(again == value, "canonical form reads back differently")
        }
        guard var layout = try? StorageLayout(baseURL: base) else { preconditionFailure("fixed base refused") }
        _ = try? CacheStatus.parse(data, from: layout.statusURL, layout: &layout)
        _ = try? UpdateList.parse(data, from: layout.statusURL, layout: layout)
        let list = Result { () throws(StorageFormatError) in try ChangeList.parse(data, from: document, layout: layout)
        }
        // The change-list reader checks and skips what it does not build: it must refuse exactly
        // the texts the full parser refuses, at the same byte for the same reason.
        if case .failure(let syntax) = parsed {
            guard case .failure(let error) = list, let underlying = error.underlying as? JSONParseError else {
                preconditionFailure("the change-list reader accepted text the JSON parser refuses (\(syntax))")
            }
            precondition(
                underlying == syntax, "the change-list reader fails with \(underlying), the JSON parser with \(syntax)")
        } else if case .failure(let error) = list, let underlying = error.underlying as? JSONParseError {
            preconditionFailure("the change-list reader refuses text the JSON parser accepts: \(underlying)")
        }
    }

    /// Path sanitization: an accepted path has only plain components, survives a round trip and
    /// stays inside any folder it is resolved in; a change URL maps back to the same path.
    static func paths(_ text: String) {
        if let path = try? SafeRelativePath(validating: text) {
            for component in path.components {
                precondition(
                    !component.isEmpty && component != "." && component != ".."
                        && !component.utf8.contains(UInt8(ascii: "/"))
                        && !component.utf8.contains(0) && !component.utf8.contains(UInt8(ascii: "\\")),
                    "unsafe component '\(component)' accepted")
            }
            precondition((try? SafeRelativePath(validating: path.string)) == path, "'\(path)' does not round-trip")
            // Bytes, not Characters: a component may start with a combining mark that would join
            // the "/" before it into one Character.
            precondition(
                path.isRoot || path.absolute(in: "/dir").utf8.starts(with: "/dir/".utf8),
                "'\(path)' resolves outside its folder")
        }
        guard let layout = try? StorageLayout(baseURL: base) else { preconditionFailure("fixed base refused") }
        for candidate in [text, base.absoluteString + "RXCacheContent/" + text] {
            // The fast path for URLs in the publisher's form must agree with the general way.
            let general = Result { () throws(SafePathError) in
                try layout.contentPath(ofURL: candidate, in: document, plainFastPath: false)
            }
            let quick = Result { () throws(SafePathError) in
                try layout.contentPath(ofURL: candidate, in: document, plainFastPath: true)
            }
            switch (general, quick) {
            case (.success(let a), .success(let b)):
                precondition(a == b, "'\(candidate)': fast path '\(b)', general '\(a)'")
            case (.failure(let a), .failure(let b)):
                precondition(a.reason == b.reason, "'\(candidate)': fast path \(b), general \(a)")
            default: preconditionFailure("'\(candidate)': fast path \(quick), general \(general)")
            }
            guard let path = try? layout.contentPath(ofURL: candidate, in: document) else { continue }
            let url = layout.contentURL(for: path).absoluteString
            precondition(
                (try? layout.contentPath(ofURL: url, in: document)) == path,
                "'\(candidate)' → '\(path)' → \(url) does not map back")
        }
    }

    /// Replays every file under `paths` (files or folders, recursively). Returns the number of
    /// inputs run.
    public static func replay(_ paths: [String]) throws -> Int {
        var count = 0
        for path in paths {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
                throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: path])
            }
            let files =
                isFolder.boolValue
                ? (try FileManager.default.subpathsOfDirectory(atPath: path)).sorted().map { path + "/" + $0 } : [path]
            for file in files {
                var isSubfolder: ObjCBool = false
                guard FileManager.default.fileExists(atPath: file, isDirectory: &isSubfolder), !isSubfolder.boolValue,
                    let data = FileManager.default.contents(atPath: file)
                else { continue }
                run(Array(data))
                count += 1
            }
        }
        return count
    }
}
