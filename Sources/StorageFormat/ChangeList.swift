import FileKit
import Foundation

/// `changes_A_B.json`: the changes that turn version `from` into version `to`.
///
/// The client itself never holds a whole list this way: it reads lists with
/// ``ChangeListReader``, one change at a time. This type is the list as a value, for callers and
/// tests that want one.
public struct ChangeList: Sendable, Equatable {
    public var from: CacheVersion
    public var to: CacheVersion
    public var changes: [Change]
    /// Where it was read from, for messages.
    public var url: URL

    public static func parse(_ data: Data, from url: URL, layout: StorageLayout) throws(StorageFormatError) -> ChangeList {
        let reader = try ChangeListReader(data, from: url, layout: layout)
        var changes: [Change] = []
        try reader.forEachChange { record in
            changes.append(record.change(folder: record.folderFiles.isEmpty ? nil : record.refreshedFolder))
        }
        return ChangeList(from: reader.from, to: reader.to, changes: changes, url: url)
    }
}
