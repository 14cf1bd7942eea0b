import ContentPublishing
import FileKit
import Foundation
import StorageFormat

/// A folder's full shape: every folder, and every file with the SHA-256 of its bytes.
struct TreeSnapshot: Equatable, CustomStringConvertible {
    var folders: Set<String>
    var files: [String: String]

    /// Reads a folder from disk (symlinks are recorded as files named "symlink:…" so they show),
    /// the top-level entries named in `skipping` left out unread.
    static func read(_ root: String, skipping: Set<String> = []) throws -> TreeSnapshot {
        var snapshot = TreeSnapshot(folders: [], files: [:])
        guard let enumerator = FileManager.default.enumerator(atPath: root) else { return snapshot }
        while let relative = enumerator.nextObject() as? String {
            if skipping.contains(relative) {
                enumerator.skipDescendants()
                continue
            }
            let path = root + "/" + relative
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            switch attributes[.type] as? FileAttributeType {
            case .typeDirectory?: snapshot.folders.insert(relative)
            case .typeRegular?: snapshot.files[relative] = SHA256Hex.of(file: path)
            default: snapshot.files[relative] = "special:\(String(describing: attributes[.type]))"
            }
        }
        return snapshot
    }

    var description: String { "\(folders.count) folders, \(files.count) files" }

    /// What differs from `expected`, for a readable failure message.
    func difference(from expected: TreeSnapshot) -> String {
        var lines: [String] = []
        for folder in expected.folders.subtracting(folders).sorted() { lines.append("missing folder \(folder)") }
        for folder in folders.subtracting(expected.folders).sorted() { lines.append("extra folder \(folder)") }
        for (file, hash) in expected.files.sorted(by: { $0.key < $1.key }) {
            if files[file] == nil {
                lines.append("missing file \(file)")
            } else if files[file] != hash {
                lines.append("different file \(file)")
            }
        }
        for file in Set(files.keys).subtracting(expected.files.keys).sorted() { lines.append("extra file \(file)") }
        return lines.isEmpty ? "identical" : lines.joined(separator: "\n")
    }
}
