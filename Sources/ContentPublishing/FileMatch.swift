import Archive
import FileKit
import StorageFormat

/// Pairs new files that need bytes with old files that have them, by fingerprint: each pair
/// becomes one move, so the client reuses the old bytes instead of downloading.
struct FileMatch {
    /// New path → the old path whose bytes move there.
    private(set) var sourceOf: [SafeRelativePath: SafeRelativePath] = [:]
    /// Old path → the new path its bytes move to.
    private(set) var targetOf: [SafeRelativePath: SafeRelativePath] = [:]

    /// Matches greedily in a fixed order, so the same input always gives the same pairs.
    ///
    /// Sources whose path is left empty (departed files) go first: moving them never needs a
    /// refill. An edited file used as a source leaves its path empty, and only an add can refill
    /// it; when its name has no extension it cannot be added, so it is banned as a source and the
    /// matching runs again.
    init(_ inventory: DiffInventory, bans: inout DiffBans) {
        var sources: [FileFingerprint: [SafeRelativePath]] = [:]
        var targets: [FileFingerprint: [SafeRelativePath]] = [:]
        for path in inventory.departed { sources[inventory.old.files[path]!, default: []].append(path) }
        for path in inventory.edited.sorted() {
            sources[inventory.old.files[path]!, default: []].append(path)
            targets[inventory.new.files[path]!, default: []].append(path)
        }
        for path in inventory.arrived { targets[inventory.new.files[path]!, default: []].append(path) }

        func sourceRank(_ path: SafeRelativePath) -> Int {
            !inventory.edited.contains(path) ? 0 : (Change.namesFolder(path) ? 2 : 1)
        }
        // A new path without extension can only get its bytes from a move; serve it first.
        func targetRank(_ path: SafeRelativePath) -> Int {
            !inventory.edited.contains(path) && Change.namesFolder(path) ? 0 : 1
        }
        var buckets: [(sources: [SafeRelativePath], targets: [SafeRelativePath])] = []
        for (fingerprint, wanted) in targets {
            guard let available = sources[fingerprint] else { continue }
            buckets.append(
                (
                    available.sorted { (sourceRank($0), $0) < (sourceRank($1), $1) },
                    wanted.sorted { (targetRank($0), $0) < (targetRank($1), $1) }
                ))
        }

        while true {
            sourceOf = [:]
            targetOf = [:]
            for bucket in buckets { match(bucket.sources, bucket.targets, bans: bans) }
            let stranded = targetOf.keys.filter {
                inventory.edited.contains($0) && sourceOf[$0] == nil && Change.namesFolder($0)
            }
            if stranded.isEmpty { return }
            bans.sources.formUnion(stranded)
        }
    }

    private mutating func match(_ sources: [SafeRelativePath], _ targets: [SafeRelativePath], bans: DiffBans) {
        var used = [Bool](repeating: false, count: sources.count)
        var firstFree = 0
        for target in targets {
            while firstFree < sources.count && used[firstFree] { firstFree += 1 }
            var index = firstFree
            while index < sources.count {
                let source = sources[index]
                // The client ignores a move into the moved item itself (a file `x` to `x/y`).
                if !used[index], !bans.sources.contains(source),
                    !bans.filePairs.contains(DiffBans.Pair(source: source, target: target)),
                    !(target.isWithin(source) && target != source)
                {
                    used[index] = true
                    sourceOf[target] = source
                    targetOf[source] = target
                    break
                }
                index += 1
            }
        }
    }
}
