import Foundation
import Synchronization

/// The memory tier's limits.
public struct MemoryLimits: Sendable, Equatable {
    /// The most bytes (the values' costs) held at once. Default ``defaultTotalBytes()``.
    public var totalBytes: Int
    /// The largest single value kept in memory; bigger ones live on disk only. Default 10 MiB,
    /// RXWebCache's "no single item over 10 MB".
    public var itemBytes: Int = 10 << 20
    /// The most values held at once, or nil for no count limit. Default nil.
    public var count: Int?

    /// Limits with the default total (``defaultTotalBytes()``).
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
public enum CgroupMemory {
    /// The limit in bytes, or nil for "unlimited" or unknown.
    public static func limit(root: String = "/sys/fs/cgroup") -> Int64? {
        for path in [root + "/memory.max", root + "/memory/memory.limit_in_bytes"] {
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { continue }
            return parse(text)
        }
        return nil
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
final class MemoryTier<Value: Sendable>: Sendable {
    private struct Entry {
        var value: Value
        var cost: Int
        var newer: CacheKey?
        var older: CacheKey?
    }

    private struct State {
        var entries: [CacheKey: Entry] = [:]
        var newest: CacheKey?
        var oldest: CacheKey?
        var totalCost = 0
    }

    let limits: MemoryLimits
    private let state = Mutex(State())

    init(limits: MemoryLimits) {
        self.limits = limits
    }

    /// The value for `key`, which becomes the most recently used; nil when absent.
    func value(for key: CacheKey) -> Value? {
        state.withLock { state in
            guard let entry = state.entries[key] else { return nil }
            Self.unlink(key, &state)
            Self.linkNewest(key, &state)
            return entry.value
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
            if let old = state.entries[key] {
                state.totalCost -= old.cost
                Self.unlink(key, &state)
            }
            state.entries[key] = Entry(value: value, cost: cost)
            state.totalCost += cost
            Self.linkNewest(key, &state)
            var dropped: [CacheKey] = []
            while state.totalCost > limits.totalBytes || (limits.count.map { state.entries.count > $0 } ?? false),
                  let oldest = state.oldest, oldest != key {
                dropped.append(oldest)
                Self.drop(oldest, &state)
            }
            return dropped
        }
        if let evicted { dropped.forEach(evicted) }
        return true
    }

    /// Forgets `key`.
    func remove(_ key: CacheKey) {
        state.withLock { state in
            if state.entries[key] != nil { Self.drop(key, &state) }
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
            while let key = cursor {
                keys.append(key)
                cursor = state.entries[key]?.older
            }
            return keys
        }
    }

    // MARK: - The recency list (keys linked through the entries)

    private static func drop(_ key: CacheKey, _ state: inout State) {
        unlink(key, &state)
        if let entry = state.entries.removeValue(forKey: key) { state.totalCost -= entry.cost }
    }

    private static func unlink(_ key: CacheKey, _ state: inout State) {
        guard let entry = state.entries[key] else { return }
        if let newer = entry.newer { state.entries[newer]?.older = entry.older } else { state.newest = entry.older }
        if let older = entry.older { state.entries[older]?.newer = entry.newer } else { state.oldest = entry.newer }
        state.entries[key]?.newer = nil
        state.entries[key]?.older = nil
    }

    private static func linkNewest(_ key: CacheKey, _ state: inout State) {
        state.entries[key]?.older = state.newest
        state.entries[key]?.newer = nil
        if let newest = state.newest { state.entries[newest]?.newer = key }
        state.newest = key
        if state.oldest == nil { state.oldest = key }
    }
}
