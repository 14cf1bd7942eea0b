/// Picks, from a storage's published change lists, the chain that leads from the local version
/// to the storage's actual version.
public enum UpdateChain {
    /// The entries worth fetching: those whose file names place them between `local` and
    /// `actual`, plus any whose names do not say (their contents will tell). An entry whose URL
    /// (rebased and normalized) an earlier entry already names is dropped: one file is fetched
    /// once, at the place of its first mention.
    public static func candidates(_ list: UpdateList, local: CacheVersion, actual: CacheVersion) -> [UpdateList.Entry] {
        var seen = Set<String>()
        return list.entries.filter { entry in
            if let from = entry.namedFrom, let to = entry.namedTo, !(from >= local && to <= actual && from < to) {
                return false
            }
            return seen.insert(StorageLayout.normalized(entry.url)).inserted
        }
    }

    /// The lists to replay, in order: starting with the one whose `from` is `local`, each next
    /// one continuing where the last ended, stopping at `actual` even when later lists exist.
    /// Lists that do not continue the chain are skipped. `nil` when no chain reaches `actual`.
    public static func resolve(_ lists: [ChangeList], from local: CacheVersion, to actual: CacheVersion)
        -> [ChangeList]?
    {
        var chain: [ChangeList] = []
        var current = local
        while current < actual {
            guard let next = lists.first(where: { $0.from == current && $0.to <= actual }) else { return nil }
            chain.append(next)
            current = next.to
        }
        return current == actual ? chain : nil
    }
}
