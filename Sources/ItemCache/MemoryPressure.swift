import Foundation
import Synchronization

extension CgroupMemory {
    /// The counters of cgroup v2's `memory.events`: how many times the group went over its
    /// `memory.high` throttle, hit `memory.max`, and had a process killed for memory.
    public struct Events: Sendable, Equatable {
        /// Times usage went over `memory.high` (the kernel throttled and reclaimed).
        public var high: Int
        /// Times usage reached `memory.max` (reclaim was forced; an OOM kill may follow).
        public var max: Int
        /// OOM kills in the group.
        public var oomKill: Int
    }

    /// The `memory.events` counters of the process's group and the groups above it, added up
    /// (a limit on a slice above the group presses on it too); nil without cgroup v2 or when
    /// none can be read.
    public static func events(root: String = "/sys/fs/cgroup", selfCgroup: String? = ownCgroupText()) -> Events? {
        var total: Events?
        for folder in folders(root, Groups(selfCgroup).unified) {
            guard let text = try? String(contentsOfFile: folder + "/memory.events", encoding: .utf8),
                let events = parseEvents(text)
            else { continue }
            total = Events(
                high: (total?.high ?? 0) + events.high, max: (total?.max ?? 0) + events.max,
                oomKill: (total?.oomKill ?? 0) + events.oomKill)
        }
        return total
    }

    /// A `memory.events` file's counters (lines of `name value`); nil when it names none of them.
    public static func parseEvents(_ text: String) -> Events? {
        var values: [Substring: Int] = [:]
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            if fields.count == 2, let value = Int(fields[1]) { values[fields[0]] = value }
        }
        guard values["high"] != nil || values["max"] != nil else { return nil }
        return Events(high: values["high"] ?? 0, max: values["max"] ?? 0, oomKill: values["oom_kill"] ?? 0)
    }
}

/// Watches the process's cgroup for memory pressure and calls `onPressure` when the kernel
/// reports it: a `memory.events` counter (`high`, `max`, `oom_kill`) went up since the last look.
///
/// Polls (a small sysfs read every ``interval``) rather than registering a PSI trigger, because a
/// trigger needs write access to the group's `memory.pressure`, which containers rarely give.
/// Without cgroup v2 it does nothing. It stops when ``stop()`` is called or its owner is gone.
final class MemoryPressureMonitor: Sendable {
    private let task = Mutex<Task<Void, Never>?>(nil)

    /// Starts watching `root` every `interval`; `onPressure` returns false to stop watching.
    init(root: String = "/sys/fs/cgroup", interval: Duration = .seconds(1), onPressure: @escaping @Sendable () -> Bool)
    {
        let own = CgroupMemory.ownCgroupText()
        guard let first = CgroupMemory.events(root: root, selfCgroup: own) else { return }
        let watcher = Task.detached(priority: .background) {
            var last = first
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                guard let now = CgroupMemory.events(root: root, selfCgroup: own) else { continue }
                defer { last = now }
                if now.high > last.high || now.max > last.max || now.oomKill > last.oomKill {
                    if !onPressure() { return }
                }
            }
        }
        task.withLock { $0 = watcher }
    }

    /// Stops watching.
    func stop() {
        task.withLock { $0?.cancel() }
    }

    deinit {
        stop()
    }
}
