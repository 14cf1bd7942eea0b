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

    /// The first two of `candidates` out of publication order: among those whose names give
    /// their versions, in list order, a list (`later`) whose `B` is below the `B` of one before
    /// it (`earlier`). nil when they are in order. Only the candidates count, so an entry that
    /// cannot continue the chain (older than the local version, or past the actual one) is
    /// skipped wherever it stands (protocol.md §2.1), while the lists a replay may take must come
    /// oldest first: the chain read from them otherwise is not the one their publisher meant.
    public static func firstOutOfOrder(_ candidates: [UpdateList.Entry]) -> (
        earlier: UpdateList.Entry, later: UpdateList.Entry
    )? {
        var highest: UpdateList.Entry?
        for entry in candidates {
            guard let to = entry.namedTo else { continue }
            if let earlier = highest, let reached = earlier.namedTo, to < reached { return (earlier, entry) }
            if highest?.namedTo.map({ to > $0 }) ?? true { highest = entry }
        }
        return nil
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
