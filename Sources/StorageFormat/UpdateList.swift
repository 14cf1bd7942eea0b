import Foundation

/// `RXCacheConfig/listOfURLsToUpdatesByVersion.json`: the change lists the storage has published.
public struct UpdateList: Sendable, Equatable {
    /// One published change list, with the versions its file name promises.
    public struct Entry: Sendable, Equatable {
        /// The change list's URL, rebased onto the configured storage.
        public var url: URL
        /// The `A` and `B` of `changes_A_B.json`, when the name has that form. The file's own
        /// `from` and `to` are what count; the name only lets the client skip fetching lists
        /// that cannot matter.
        public var namedFrom: CacheVersion?
        /// The `B` of `changes_A_B.json`, when the name has that form (see ``namedFrom``).
        public var namedTo: CacheVersion?
    }

    /// The published change lists, in the file's order.
    public var entries: [Entry]

    /// Parses the update list read from `url`, resolving and rebasing each entry with `layout`;
    /// throws a message naming the file and the entry at fault.
    ///
    /// A name `changes_A_B.json` with `A` not below `B` closes a cycle of versions and refuses
    /// the whole list (``StorageFormatError/Code/invalidUpdateList``; protocol.md §1.3), wherever
    /// it stands. Lists out of order are refused only where a replay needs them
    /// (``UpdateChain/firstOutOfOrder(_:)``).
    public static func parse(_ data: Data, from url: URL, layout: StorageLayout) throws(StorageFormatError)
        -> UpdateList
    {
        let name = url.absoluteString
        let root = try JSONValue.parseStorageDocument(data, name: name, code: .invalidUpdateList)
        guard let list = root["updatesByVersions"] else {
            throw StorageFormatError(
                code: .invalidUpdateList, message: "\(name): required key \"updatesByVersions\" is missing")
        }
        guard case .array(let items) = list else {
            throw StorageFormatError(
                code: .invalidUpdateList,
                message: "\(name): \"updatesByVersions\" must be an array of URLs, found \(list.kindName)")
        }
        var entries: [Entry] = []
        for (index, item) in items.enumerated() {
            guard case .string(let text) = item, let entryURL = layout.resolve(text, relativeTo: url) else {
                throw StorageFormatError(
                    code: .invalidUpdateList, message: "\(name): entry #\(index) is not an http(s) URL")
            }
            let file = entryURL.lastPathComponent
            let (from, to) = Self.versions(inFileName: file)
            if let from, let to, from >= to {
                throw StorageFormatError(
                    code: .invalidUpdateList,
                    message: "\(name): entry #\(index), \(file), goes from \(from) back to \(to), which makes "
                        + "a cycle of versions; the publisher must remove that entry (a list's versions only go up)")
            }
            entries.append(Entry(url: entryURL, namedFrom: from, namedTo: to))
        }
        return UpdateList(entries: entries)
    }

    /// Reads `changes_A_B.json`.
    package static func versions(inFileName name: String) -> (CacheVersion?, CacheVersion?) {
        guard name.hasPrefix("changes_"), name.hasSuffix(".json") else { return (nil, nil) }
        let middle = name.dropFirst("changes_".count).dropLast(".json".count)
        let parts = middle.split(separator: "_")
        guard parts.count == 2, let from = try? CacheVersion(String(parts[0])),
            let to = try? CacheVersion(String(parts[1]))
        else {
            return (nil, nil)
        }
        return (from, to)
    }
}
