import FileKit
import Foundation

/// `changes_A_B.json`: the changes that turn version `from` into version `to`.
///
/// The client itself never holds a whole list this way: it reads lists with
/// `ChangeListReader`, one change at a time. This type is the list as a value, for callers and
/// tests that want one.
public struct ChangeList: Sendable, Equatable {
    /// The version the list starts from.
    public var from: CacheVersion
    /// The version the list leads to.
    public var to: CacheVersion
    /// The changes, in list order.
    public var changes: [Change]
    /// Where it was read from, for messages.
    public var url: URL

    /// Parses the change list read from `url`, checking every path against `layout`; throws a
    /// message naming the file and the entry at fault.
    public static func parse(_ data: Data, from url: URL, layout: StorageLayout) throws(StorageFormatError)
        -> ChangeList
    {
        let reader = try ChangeListReader(data, from: url, layout: layout)
        var changes: [Change] = []
        try reader.forEachChange { record in
            changes.append(record.change(folder: record.folderFiles.isEmpty ? nil : record.refreshedFolder))
        }
        return ChangeList(from: reader.from, to: reader.to, changes: changes, url: url)
    }
}
