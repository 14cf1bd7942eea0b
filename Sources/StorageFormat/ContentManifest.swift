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
}
