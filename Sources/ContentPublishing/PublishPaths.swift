import FileKit
import Foundation
import StorageFormat

/// Where a publish reads and writes, by canonical path, and the layouts it refuses.
///
/// Paths are compared after resolving symlinks (`realpath` of the deepest existing ancestor,
/// then the rest of the path with `.` and `..` applied), so `--content /srv/link-to-storage/x`
/// is seen to be inside the storage.
struct PublishPaths: Equatable {
    /// The storage folder as given (absolute), for messages.
    var storage: String
    /// The content folder as given (absolute), for messages.
    var content: String
    var canonicalStorage: String
    var canonicalContent: String

    /// The folder inside the storage where a publish stages, keeps and journals.
    static let workFolderName = ".content-sync-publish"

    init(storage: String, content: String) {
        self.storage = FileSystem.absolutePath(storage)
        self.content = FileSystem.absolutePath(content)
        canonicalStorage = Self.canonical(self.storage)
        canonicalContent = Self.canonical(self.content)
    }

    var workFolder: String { storage + "/" + Self.workFolderName }

    /// Refuses layouts that would corrupt the storage or the snapshot: the content inside the
    /// storage (its work folder and its own `RXCacheContent/` included), or the storage inside
    /// the content (the snapshot copy would copy itself).
    func checkLayout() throws(PublishError) {
        if Self.isWithin(canonicalContent, canonicalStorage) {
            let place: String
            if Self.isWithin(canonicalContent, canonicalStorage + "/" + Self.workFolderName) {
                place = "the storage's publish work folder \(Self.workFolderName)/"
            } else if Self.isWithin(canonicalContent, canonicalStorage + "/RXCacheContent") {
                place = "the storage's own RXCacheContent/"
            } else {
                place = "the storage"
            }
            let what =
                canonicalContent == canonicalStorage
                ? "the storage itself"
                : ([canonicalStorage + "/" + Self.workFolderName, canonicalStorage + "/RXCacheContent"].contains(
                    canonicalContent) ? place : "inside " + place)
            throw PublishError(
                code: .configuration,
                message:
                    "the content folder \(content) is \(what) (the storage resolves to \(canonicalStorage)); publishing would rewrite the folder it reads. Pass a folder outside the storage",
                option: .content)
        }
        if Self.isWithin(canonicalStorage, canonicalContent) {
            throw PublishError(
                code: .configuration,
                message:
                    "the storage \(storage) is inside the content folder \(content) (which resolves to \(canonicalContent)); the content snapshot would copy the storage into itself. Pass a storage outside the content folder",
                option: .storage)
        }
    }

    /// Whether `path` is `folder` or below it (both canonical).
    static func isWithin(_ path: String, _ folder: String) -> Bool { FileSystem.path(path, isWithin: folder) }

    /// `path` with every symlink of its existing part resolved (``FileSystem/canonicalPath(_:)``).
    static func canonical(_ path: String) -> String { FileSystem.canonicalPath(path) }
}
