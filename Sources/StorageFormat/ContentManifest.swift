import FileKit
import Foundation

/// `RXCacheConfig/contentManifest.json`: every folder and file (with its fingerprint) of the
/// published version, written by `sync-agent publish`.
package enum ContentManifest {
    /// Where the publisher writes it, relative to the storage.
    package static let path = "RXCacheConfig/contentManifest.json"

    /// The published tree the manifest lists.
    package static func parse(_ data: Data, name: String) throws(StorageFormatError) -> ContentTree {
        let root = try JSONValue.parseStorageDocument(data, name: name, code: .integrity)
        guard case .array(let folderValues)? = root["folders"], case .object(let fileValues)? = root["files"] else {
            throw StorageFormatError(code: .integrity, message: "\(name): needs \"folders\" and \"files\"")
        }
        var tree = ContentTree(folders: [], files: [:])
        do {
            for case .string(let folder) in folderValues {
                tree.folders.insert(try SafeRelativePath(validating: folder))
            }
            for (path, value) in fileValues {
                guard case .string(let hash)? = value["sha256"],
                    let size = value["size"]?.scalarText.flatMap({ Int64($0) })
                else {
                    throw StorageFormatError(code: .integrity, message: "\(name): file '\(path)' needs sha256 and size")
                }
                tree.files[try SafeRelativePath(validating: path)] = FileFingerprint(
                    size: size, sha256: hash.lowercased())
            }
        } catch let error as SafePathError {
            throw StorageFormatError(code: .unsafePath, message: "\(name): \(error)", underlying: error)
        } catch let error as StorageFormatError {
            throw error
        } catch {
            throw StorageFormatError(code: .integrity, message: "\(name): \(error)")
        }
        return tree
    }

    /// The manifest of `tree` at `version`: pretty-printed JSON with the keys `files`,
    /// `folders`, `treeDigest` and `version`; the folders and the files' paths in the byte order
    /// of their UTF-8, so the same tree always gives the same bytes.
    ///
    /// Written by hand rather than by `JSONSerialization`: its `.sortedKeys` compares keys with
    /// a locale-aware, numeric, case-insensitive string compare and casts each key, which took
    /// 12 s for 100,000 paths here; this takes tens of milliseconds. The layout is the one
    /// `JSONSerialization`'s `.prettyPrinted` gives (two-space indent, `"key" : value`).
    package static func encode(_ tree: ContentTree, version: String, treeDigest: String) -> Data {
        var out: [UInt8] = []
        let files = tree.files.map { (Array($0.key.string.utf8), $0.value) }.sorted {
            $0.0.lexicographicallyPrecedes($1.0)
        }
        let folders = tree.folders.map { Array($0.string.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
        out.reserveCapacity(128 + files.count * 120 + folders.reduce(0) { $0 + $1.count + 8 })
        func append(_ text: String) { out.append(contentsOf: text.utf8) }
        append("{\n  \"files\" : {\n")
        if files.isEmpty { append("\n") }
        for (index, (path, fingerprint)) in files.enumerated() {
            append("    ")
            appendString(path, to: &out)
            append(" : {\n      \"sha256\" : ")
            appendString(Array(fingerprint.sha256.utf8), to: &out)
            append(",\n      \"size\" : \(fingerprint.size)\n    }")
            append(index == files.count - 1 ? "\n" : ",\n")
        }
        append("  },\n  \"folders\" : [\n")
        if folders.isEmpty { append("\n") }
        for (index, folder) in folders.enumerated() {
            append("    ")
            appendString(folder, to: &out)
            append(index == folders.count - 1 ? "\n" : ",\n")
        }
        append("  ],\n  \"treeDigest\" : ")
        appendString(Array(treeDigest.utf8), to: &out)
        append(",\n  \"version\" : ")
        appendString(Array(version.utf8), to: &out)
        append("\n}\n")
        return Data(out)
    }

    /// `bytes` as a JSON string: `"` and `\\` escaped, control characters as `\n`, `\t`, … or
    /// `\u00XX`; everything else (`/` and non-ASCII included) as it is.
    private static func appendString(_ bytes: [UInt8], to out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        out.append(0x22)
        for byte in bytes {
            switch byte {
            case 0x22: out.append(contentsOf: [0x5C, 0x22])
            case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: out.append(contentsOf: [0x5C, 0x6E])
            case 0x0D: out.append(contentsOf: [0x5C, 0x72])
            case 0x09: out.append(contentsOf: [0x5C, 0x74])
            case 0x08: out.append(contentsOf: [0x5C, 0x62])
            case 0x0C: out.append(contentsOf: [0x5C, 0x66])
            case 0x00..<0x20:
                out.append(contentsOf: [0x5C, 0x75, 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: out.append(byte)
            }
        }
        out.append(0x22)
    }
}
