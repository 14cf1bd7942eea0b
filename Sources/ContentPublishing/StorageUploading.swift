import StorageFormat

/// Copies a published storage to where clients read it: a bucket, a WebDAV share, another disk.
///
/// The publisher calls ``upload(_:from:)`` once per step of ``StorageUploadStep/order``, each
/// only after the previous one returned, while it still holds the storage's lock (so no other
/// publish changes the files mid-upload). An uploader copies and never deletes: clients that
/// are behind still need older change lists, and files of older versions while they replay.
public protocol StorageUploading: Sendable {
    /// Copies `step`'s files from the storage folder `storage` to the remote, keeping their
    /// storage-relative paths; throws when any of them did not arrive.
    func upload(_ step: StorageUploadStep, from storage: String) throws
}

/// One step of an upload: a group of a storage's files that must all be on the remote before
/// the next group goes.
public struct StorageUploadStep: Sendable, Equatable, CustomStringConvertible {
    /// Which files the step copies.
    public enum Kind: Sendable, Equatable {
        /// `RXCacheContent/`, `RXCacheContent.zip` and the content manifest.
        case content
        /// `RXCacheConfig/HistoryOfVersions/`: every change list, old ones included.
        case changeLists
        /// `RXCacheConfig/listOfURLsToUpdatesByVersion.json`.
        case updateList
        /// `RXCacheConfig/cacheStatus.json`: the commit point.
        case status
    }

    /// Which files the step copies.
    public var kind: Kind
    /// The storage-relative paths: a folder ends in `/` and stands for everything in it.
    public var paths: [String]
    /// The step's place in ``order``, from 1.
    public var number: Int

    /// The upload order. Clients read the status first and follow its URLs, so everything a
    /// status names must be on the remote before the status is: the content and archive, then
    /// the change lists, then the update list that names them, and the status last.
    public static let order: [StorageUploadStep] = [
        StorageUploadStep(
            kind: .content,
            paths: [StorageLayout.contentFolder, StorageWriter.archivePath, StorageWriter.contentManifestPath],
            number: 1),
        StorageUploadStep(kind: .changeLists, paths: ["RXCacheConfig/HistoryOfVersions/"], number: 2),
        StorageUploadStep(kind: .updateList, paths: [StorageLayout.updateListPath], number: 3),
        StorageUploadStep(kind: .status, paths: [StorageLayout.statusPath], number: 4),
    ]

    /// A published change list is never rewritten (a publish refuses to), so a file of the same
    /// name and size already on the remote is that list: an uploader may skip it. The other
    /// steps' files can change in place at the same size (a status from "1.1" to "1.2").
    public var filesNeverChange: Bool { kind == .changeLists }

    /// What the step copies, for messages: "the content (RXCacheContent/, …)".
    public var description: String {
        switch kind {
        case .content: "the content (" + paths.joined(separator: ", ") + ")"
        case .changeLists: "the change lists (" + paths.joined(separator: ", ") + ")"
        case .updateList, .status: paths.joined(separator: ", ")
        }
    }
}
