import Foundation
import Synchronization

/// The memory tier's limits.
public struct MemoryLimits: Sendable, Equatable {
    /// The most bytes (the values' costs) held at once. Default ``defaultTotalBytes(cgroupLimit:)``.
    public var totalBytes: Int
    /// The largest single value kept in memory; bigger ones live on disk only. Default 10 MiB,
    /// RXWebCache's "no single item over 10 MB".
    public var itemBytes: Int = 10 << 20
    /// The most values held at once, or nil for no count limit. Default nil.
    public var count: Int?

    /// Limits with the default total (``defaultTotalBytes(cgroupLimit:)``).
    public init(totalBytes: Int = MemoryLimits.defaultTotalBytes(), itemBytes: Int = 10 << 20, count: Int? = nil) {
        self.totalBytes = totalBytes
        self.itemBytes = itemBytes
        self.count = count
    }

    /// 256 MiB, or an eighth of the process's cgroup memory limit when that is smaller (a
    /// container with 512 MiB gets 64 MiB), and never under 4 MiB.
    public static func defaultTotalBytes(cgroupLimit: Int64? = CgroupMemory.limit()) -> Int {
        let standard: Int64 = 256 << 20
        guard let cgroupLimit, cgroupLimit > 0 else { return Int(standard) }
        return Int(max(4 << 20, min(standard, cgroupLimit / 8)))
    }
}

/// The process's memory limit as its cgroup sets it (v2 `memory.max`, or v1
/// `memory.limit_in_bytes`); nil when there is none or it cannot be read.
///
/// The process's own group is the one `/proc/self/cgroup` names (a systemd service's is
/// `/system.slice/NAME.service`, not the hierarchy's root, where no limit is set), and a limit
/// set on a group above it (a slice) bounds it too: the smallest limit from the group up to the
/// root counts. A container whose cgroup namespace makes its group the root reads the root.
public enum CgroupMemory {
    /// The limit in bytes, or nil for "unlimited" or unknown.
    public static func limit(root: String = "/sys/fs/cgroup", selfCgroup: String? = ownCgroupText()) -> Int64? {
        let groups = Groups(selfCgroup)
        let v2 = smallest(in: folders(root, groups.unified), file: "memory.max")
        if v2.found { return v2.limit }
        return smallest(in: folders(root + "/memory", groups.memory), file: "memory.limit_in_bytes").limit
    }

    /// `/proc/self/cgroup`, or nil when it cannot be read.
    public static func ownCgroupText() -> String? {
        try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8)
    }

    /// The process's groups as `/proc/self/cgroup` names them: the v2 (unified) one, on the
    /// `0::` line, and the v1 memory controller's. Nil for one it does not name, or names by a
    /// path that is not plainly below the root (`..`, as outside a cgroup namespace).
    struct Groups: Equatable {
        var unified: String?
        var memory: String?

        init(unified: String? = nil, memory: String? = nil) {
            self.unified = unified
            self.memory = memory
        }

        init(_ text: String?) {
            for line in (text ?? "").split(separator: "\n") {
                let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
                guard fields.count == 3, fields[2].hasPrefix("/") else { continue }
                let path = String(fields[2])
                guard !path.split(separator: "/").contains(where: { $0 == ".." || $0 == "." }) else { continue }
                if fields[0] == "0" && fields[1].isEmpty {
                    unified = path
                } else if fields[1].split(separator: ",").contains("memory") {
                    memory = path
                }
            }
        }
    }

    /// The folders from `base` + `group` up to `base` itself, nearest first (just `base` when
    /// the group is unknown).
    static func folders(_ base: String, _ group: String?) -> [String] {
        var parts = (group ?? "/").split(separator: "/").map(String.init)
        var folders: [String] = []
        while true {
            folders.append(([base] + parts).joined(separator: "/"))
            if parts.isEmpty { return folders }
            parts.removeLast()
        }
    }

    /// The smallest limit that `file` sets in `folders`; `found` when any of them has the file.
    static func smallest(in folders: [String], file: String) -> (found: Bool, limit: Int64?) {
        var found = false
        var smallest: Int64?
        for folder in folders {
            guard let text = try? String(contentsOfFile: folder + "/" + file, encoding: .utf8) else { continue }
            found = true
            if let limit = parse(text) { smallest = min(smallest ?? limit, limit) }
        }
        return (found, smallest)
    }

    /// A cgroup limit file's value: bytes, or nil for `max` and for v1's "no limit" (a number
    /// near `Int64.max`, rounded to the page size).
    public static func parse(_ text: String) -> Int64? {
        let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard value != "max", let bytes = Int64(value), bytes > 0, bytes < Int64.max / 2 else { return nil }
        return bytes
    }
}

/// The memory tier: values by key in least-recently-used order, limited by their total cost,
/// a per-value cost and optionally a count. Thread-safe behind a mutex, and synchronous, so a
/// lookup that only touches memory needs no `await`.
///
/// The recency list is made of nodes linked by reference, so a hit is one hash lookup and a few
/// pointer updates (a list of keys linked through the dictionary cost about seven lookups, and
/// copies of the entries, per hit).
final class MemoryTier<Value: Sendable>: Sendable {
    /// One value in the recency list. The dictionary holds the only strong reference; the links
    /// are `unowned(unsafe)` (no reference counting on the hot path), which is safe because a
    /// node always leaves the list before it leaves the dictionary, both under the mutex.
    private final class Node {
        let key: CacheKey
        var value: Value
        var cost: Int
        unowned(unsafe) var newer: Node?
        unowned(unsafe) var older: Node?

        init(key: CacheKey, value: Value, cost: Int) {
            (self.key, self.value, self.cost) = (key, value, cost)
        }
    }

    private struct State {
        var nodes: [CacheKey: Node] = [:]
        unowned(unsafe) var newest: Node?
        unowned(unsafe) var oldest: Node?
        var totalCost = 0

        mutating func unlink(_ node: Node) {
            if let newer = node.newer { newer.older = node.older } else { newest = node.older }
            if let older = node.older { older.newer = node.newer } else { oldest = node.newer }
            node.newer = nil
            node.older = nil
        }

        mutating func linkNewest(_ node: Node) {
            node.older = newest
            node.newer = nil
            if let newest { newest.newer = node }
            newest = node
            if oldest == nil { oldest = node }
        }

        mutating func drop(_ node: Node) {
            unlink(node)
            totalCost -= node.cost
            nodes.removeValue(forKey: node.key)
        }
    }

    let limits: MemoryLimits
    private let state = Mutex(State())

    init(limits: MemoryLimits) {
        self.limits = limits
    }

    /// The value for `key`, which becomes the most recently used; nil when absent.
    func value(for key: CacheKey) -> Value? {
        state.withLock { state in
            guard let node = state.nodes[key] else { return nil }
            if state.newest !== node {
                state.unlink(node)
                state.linkNewest(node)
            }
            return node.value
        }
    }

    /// Stores `value` (costing `cost` bytes) as the most recently used, evicting the least
    /// recently used values until the limits hold. A value over the per-item limit is not kept
    /// (and replaces nothing): false. Returns the evicted keys through `evicted`.
    @discardableResult
    func set(_ value: Value, cost: Int, for key: CacheKey, evicted: ((CacheKey) -> Void)? = nil) -> Bool {
        let cost = max(0, cost)
        guard cost <= limits.itemBytes, cost <= limits.totalBytes, limits.count != 0 else {
            remove(key)
            return false
        }
        let dropped: [CacheKey] = state.withLock { state in
            if let node = state.nodes[key] {
                state.totalCost += cost - node.cost
                node.value = value
                node.cost = cost
                state.unlink(node)
                state.linkNewest(node)
            } else {
                let node = Node(key: key, value: value, cost: cost)
                state.nodes[key] = node
                state.totalCost += cost
                state.linkNewest(node)
            }
            var dropped: [CacheKey] = []
            while state.totalCost > limits.totalBytes || (limits.count.map { state.nodes.count > $0 } ?? false),
                let oldest = state.oldest, oldest !== state.newest
            {
                dropped.append(oldest.key)
                state.drop(oldest)
            }
            return dropped
        }
        if let evicted { dropped.forEach(evicted) }
        return true
    }

    /// Forgets `key`.
    func remove(_ key: CacheKey) {
        state.withLock { state in
            if let node = state.nodes[key] { state.drop(node) }
        }
    }

    /// Forgets everything (`purgeMemory()`).
    func removeAll() {
        state.withLock { $0 = State() }
    }

    /// The total cost held.
    var totalCost: Int { state.withLock { $0.totalCost } }

    /// The keys from the most to the least recently used.
    var keysByRecency: [CacheKey] {
        state.withLock { state in
            var keys: [CacheKey] = []
            var cursor = state.newest
            while let node = cursor {
                keys.append(node.key)
                cursor = node.older
            }
            return keys
        }
    }
}
