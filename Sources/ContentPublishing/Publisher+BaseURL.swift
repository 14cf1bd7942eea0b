import FileKit
import Foundation
import StorageFormat

/// A storage moved to another base URL (protocol.md §8.5): change lists published under the old
/// base name their paths under it, and a client configured with the new base refuses those
/// paths (§1.2, §3.3). Clients that would need such a list must restore instead.
extension Publisher {
    /// The lowest `minimalCacheVersion` the storage can publish under `layout`'s base: the `to`
    /// of every change list the update list names outside it (a list whose name does not say gives
    /// `current`), and `current` itself when the storage `moved` from another base. Clients at
    /// or above it replay only lists under `base`: the chain's candidates start at the local
    /// version (§2.1), so no older list is fetched. nil when nothing constrains it.
    /// An update list clients would refuse (a cycle, lists out of order: protocol.md §1.3) is
    /// refused here too, and so is one that names a version above `current`: appending to it
    /// would put the next version's list after one that reaches further, out of order for every
    /// client behind.
    static func minimalFloor(storage: String, layout: StorageLayout, moved: Bool, current: CacheVersion)
        throws(PublishError) -> CacheVersion?
    {
        let base = layout.baseURL
        var floor: CacheVersion?
        func raise(to version: CacheVersion) {
            let version = min(version, current)
            floor = max(floor ?? version, version)
        }
        if moved { raise(to: current) }
        let path = storage + "/" + StorageLayout.updateListPath
        guard let data = FileManager.default.contents(atPath: path) else { return floor }
        guard case .array(let items)? = try? JSONValue.parse(data)["updatesByVersions"] else {
            throw PublishError(
                code: .invalidStorage,
                message: "\(path) is not {\"updatesByVersions\": [URL, …]}; fix it before publishing")
        }
        let listURL = URL(string: StorageLayout.updateListPath, relativeTo: base)!.absoluteURL
        let list: UpdateList
        do {
            list = try UpdateList.parse(data, from: listURL, layout: layout)
        } catch {
            let reason = error.message.range(of: listURL.absoluteString + ": ").map { error.message[$0.upperBound...] }
            throw PublishError(
                code: .invalidStorage,
                message: "\(path): \(reason ?? Substring(error.message)); fix it before publishing")
        }
        try checkOrder(of: list, at: path, current: current)
        let prefix = StorageLayout.normalized(base)
        for case .string(let text) in items {
            guard let url = URL(string: text, relativeTo: listURL)?.absoluteURL else {
                raise(to: current)
                continue
            }
            if StorageLayout.normalized(url).hasPrefix(prefix) { continue }
            raise(to: UpdateList.versions(inFileName: url.lastPathComponent).1 ?? current)
        }
        return floor
    }

    /// Refuses `list` (the update list at `path`) when an entry's name reaches above `current`,
    /// the storage's actual version, or when the lists a client at any version could replay are
    /// out of publication order (``UpdateChain/firstOutOfOrder(_:)``, as the client judges).
    static func checkOrder(of list: UpdateList, at path: String, current: CacheVersion) throws(PublishError) {
        for (number, entry) in list.entries.enumerated() {
            guard let to = entry.namedTo, to > current else { continue }
            throw PublishError(
                code: .invalidStorage,
                message:
                    "\(path): entry #\(number), \(entry.url.lastPathComponent), reaches \(to), above the storage's actual "
                    + "version \(current) (\(StorageLayout.statusPath)); a list published after it would come out of order "
                    + "for every client behind. Remove that entry, then publish")
        }
        // The lowest version a list starts from: every client a list can serve is at or above it,
        // and a lower start only adds candidates, so this finds every pair out of order.
        guard let lowest = list.entries.compactMap(\.namedFrom).min() else { return }
        let candidates = UpdateChain.candidates(list, local: lowest, actual: current)
        if let (earlier, later) = UpdateChain.firstOutOfOrder(candidates) {
            throw PublishError(
                code: .invalidStorage,
                message:
                    "\(path): \(later.url.lastPathComponent) comes after \(earlier.url.lastPathComponent), which reaches "
                    + "further, so clients would refuse the list as out of order; put the lists in the order of their "
                    + "versions, then publish")
        }
    }
}
