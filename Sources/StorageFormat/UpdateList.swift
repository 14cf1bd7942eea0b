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
    /// The list is in publication order, so the versions its file names give never go back
    /// (protocol.md §1.3). A name `changes_A_B.json` with `A` not below `B` closes a cycle, and
    /// a name whose `B` is below an earlier name's `B` is out of order: either refuses the whole
    /// list (``StorageFormatError/Code/invalidUpdateList``), since the chain read from such a
    /// list is not the one its publisher meant. A second mention of one file (the same URL,
    /// normalized) is not checked: only the first counts (``UpdateChain/candidates(_:local:actual:)``).
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
        var mentioned = Set<String>()
        /// The entry with the highest `B` so far: a later name must not go below it.
        var highest: (index: Int, file: String, to: CacheVersion)?
        for (index, item) in items.enumerated() {
            guard case .string(let text) = item, let entryURL = layout.resolve(text, relativeTo: url) else {
                throw StorageFormatError(
                    code: .invalidUpdateList, message: "\(name): entry #\(index) is not an http(s) URL")
            }
            let file = entryURL.lastPathComponent
            let (from, to) = Self.versions(inFileName: file)
            if let from, let to, mentioned.insert(StorageLayout.normalized(entryURL)).inserted {
                guard from < to else {
                    throw StorageFormatError(
                        code: .invalidUpdateList,
                        message: "\(name): entry #\(index), \(file), goes from \(from) back to \(to), which makes "
                            + "a cycle of versions; the publisher must remove that entry (a list's versions only go up)"
                    )
                }
                if let earlier = highest, to < earlier.to {
                    throw StorageFormatError(
                        code: .invalidUpdateList,
                        message: "\(name): entry #\(index), \(file), comes after entry #\(earlier.index), "
                            + "\(earlier.file), which reaches the later version \(earlier.to): the lists are out of order; "
                            + "the publisher must list them in publication order (oldest first)")
                }
                if highest.map({ to > $0.to }) ?? true { highest = (index, file, to) }
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
