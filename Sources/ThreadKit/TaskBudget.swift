import CLinux

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A limit on tasks (threads) that leaves this process too little room: a cgroup's `pids.max`
/// (systemd's `TasksMax=`, a container's pids limit) or `RLIMIT_NPROC` (`ulimit -u`), with what
/// it allows and what already runs under it.
package struct TaskShortage: Sendable, Equatable, CustomStringConvertible {
    package enum Limit: Sendable, Equatable {
        /// The `pids.max` of this cgroup folder, which counts every task below it.
        case cgroup(folder: String)
        /// `RLIMIT_NPROC`, which counts every task of this real user id.
        case userTasks(uid: UInt32)
    }

    package let limit: Limit
    package let maximum: Int
    package let inUse: Int

    /// How many more tasks may start under this limit.
    package var free: Int { max(0, maximum - inUse) }

    package var description: String {
        switch limit {
        case .cgroup(let folder):
            "the cgroup \(folder) allows \(Self.tasks(maximum)) (pids.max) and \(Self.run(inUse)) in it"
        case .userTasks(let uid):
            "ulimit -u allows user \(uid) \(Self.tasks(maximum)) and \(Self.run(inUse)) as that user"
        }
    }

    private static func tasks(_ count: Int) -> String { count == 1 ? "1 task" : "\(count) tasks" }
    private static func run(_ count: Int) -> String { count == 1 ? "1 runs" : "\(count) run" }

    /// What to raise, in the operator's words.
    package var remedy: String {
        switch limit {
        case .cgroup: "raise the task limit (systemd's TasksMax=, the container's pids limit)"
        case .userTasks:
            "raise the user's task limit (ulimit -u, systemd's LimitNPROC=) or run fewer tasks as that user"
        }
    }
}

/// How many more threads the limits let this process start, read before it starts them.
///
/// At a task limit `pthread_create` fails with `EAGAIN`. The package's own threads report it
/// (``DetachedThread``), but libdispatch, which runs Swift concurrency and GRDB's queues, retries
/// for good in silence: a process that starts just above the limit hangs instead of failing.
/// Reading the limits first turns that into a message naming the limit.
package enum TaskBudget {
    /// The tightest limit that leaves fewer than `wanted` tasks to start, or nil when every limit
    /// leaves room (or none applies). `root` prefixes `/proc` and `/sys` (tests give a fake tree).
    package static func shortage(wanted: Int, root: String = "") -> TaskShortage? {
        var shortages = cgroupLimits(root: root).filter { $0.free < wanted }
        if let user = userTaskLimit(wanted: wanted, root: root), user.free < wanted { shortages.append(user) }
        return shortages.min { $0.free < $1.free }
    }

    /// How many threads this process runs now (`Threads:` in `/proc/self/status`).
    package static func ownThreads(root: String = "") -> Int? {
        ProcFile.text(root + "/proc/self/status").flatMap { field("Threads", in: $0) }.flatMap { Int($0) }
    }

    // MARK: cgroups

    /// Every `pids.max` that bounds this process: its pids cgroup (v1) or its unified cgroup (v2)
    /// and each ancestor up to the mount point, through the mounts this process sees.
    static func cgroupLimits(root: String) -> [TaskShortage] {
        guard let membership = ProcFile.text(root + "/proc/self/cgroup"),
            let mounts = ProcFile.text(root + "/proc/self/mountinfo")
        else { return [] }
        var limits: [TaskShortage] = []
        for folder in pidsFolders(cgroupFile: membership, mountInfo: mounts) {
            guard let maximumText = ProcFile.text(root + folder + "/pids.max") else { continue }
            guard let maximum = count(maximumText),
                let inUseText = ProcFile.text(root + folder + "/pids.current"), let inUse = count(inUseText)
            else { continue }
            limits.append(TaskShortage(limit: .cgroup(folder: folder), maximum: maximum, inUse: inUse))
        }
        return limits
    }

    /// The folders whose `pids.max` bounds this process, its own first, then each parent up to
    /// the mount point, from `/proc/self/cgroup` and `/proc/self/mountinfo`. A cgroup outside a
    /// mount's root (or with `..` in its path) is not visible there and gives nothing.
    static func pidsFolders(cgroupFile: String, mountInfo: String) -> [String] {
        var unified: String?
        var pids: String?
        for line in cgroupFile.split(separator: "\n") {
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            if fields[0] == "0" && fields[1].isEmpty {
                unified = String(fields[2])
            } else if fields[1].split(separator: ",").contains("pids") {
                pids = String(fields[2])
            }
        }
        var folders: [String] = []
        // A host may list thousands of mounts; only cgroup ones are parsed.
        let cgroupLines = mountInfo.split(separator: "\n").filter { $0.contains(" - cgroup") }
        for mount in cgroupLines.compactMap(CgroupMount.init) {
            let member: String?
            switch mount.kind {
            case .unified: member = unified
            case .pids: member = pids
            }
            guard let member, let relative = relativePath(of: member, under: mount.root) else { continue }
            var folder = joined(mount.point, relative)
            while true {
                if !folders.contains(folder) { folders.append(folder) }
                if folder == mount.point { break }
                folder = parent(of: folder)
                if folder.count < mount.point.count { break }
            }
        }
        return folders
    }

    /// A cgroup mount from one line of `/proc/self/mountinfo`: where it is, which part of the
    /// hierarchy it shows, and whether it is the unified (v2) tree or v1's pids tree.
    struct CgroupMount: Equatable {
        enum Kind { case unified, pids }
        let kind: Kind
        let root: String
        let point: String

        init?(_ line: Substring) {
            let halves = line.split(separator: " - ", maxSplits: 1)
            guard halves.count == 2 else { return nil }
            let before = halves[0].split(separator: " ")
            let after = halves[1].split(separator: " ")
            guard before.count >= 5, after.count >= 1 else { return nil }
            switch after[0] {
            case "cgroup2": kind = .unified
            case "cgroup" where after.count >= 3 && after[2].split(separator: ",").contains("pids"): kind = .pids
            default: return nil
            }
            root = TaskBudget.unescaped(before[3])
            point = TaskBudget.unescaped(before[4])
        }
    }

    /// `path` made relative to a mount's `root` (both absolute), or nil when it is outside it.
    static func relativePath(of path: String, under root: String) -> String? {
        let parts = path.split(separator: "/")
        guard !parts.contains("..") else { return nil }
        let rootParts = root.split(separator: "/")
        guard parts.starts(with: rootParts) else { return nil }
        return parts.dropFirst(rootParts.count).joined(separator: "/")
    }

    static func joined(_ base: String, _ relative: String) -> String {
        if relative.isEmpty { return base }
        return base.hasSuffix("/") ? base + relative : base + "/" + relative
    }

    static func parent(of folder: String) -> String {
        guard let slash = folder.lastIndex(of: "/") else { return folder }
        return slash == folder.startIndex ? "/" : String(folder[..<slash])
    }

    /// mountinfo writes a space, tab, newline and backslash in a path as `\040`, `\011`, `\012`, `\134`.
    static func unescaped(_ field: Substring) -> String {
        guard field.contains("\\") else { return String(field) }
        var bytes: [UInt8] = []
        let utf8 = Array(field.utf8)
        var index = 0
        while index < utf8.count {
            if utf8[index] == UInt8(ascii: "\\"), index + 3 < utf8.count,
                let value = UInt8(String(decoding: utf8[(index + 1)...(index + 3)], as: UTF8.self), radix: 8)
            {
                bytes.append(value)
                index += 4
            } else {
                bytes.append(utf8[index])
                index += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A count in a cgroup or proc file (`"12\n"`), or nil for `max` or anything else.
    static func count(_ text: String) -> Int? {
        Int(text.trimmingWhitespace)
    }

    // MARK: RLIMIT_NPROC

    /// `RLIMIT_NPROC` with the tasks of this real user, when it applies and may leave fewer than
    /// `wanted`. The kernel does not apply it to root or to a process with `CAP_SYS_ADMIN` or
    /// `CAP_SYS_RESOURCE`. Counting the user's tasks reads every process's status, so it is done
    /// only when the system's task count (`/proc/loadavg`) is not already far enough below.
    static func userTaskLimit(wanted: Int, root: String) -> TaskShortage? {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(__RLIMIT_NPROC.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max
        else { return nil }
        let uid = getuid()
        // Root and those capabilities are exempt only in the initial user namespace: in another
        // (a rootless container, `unshare -r`) the kernel counts the outside user's tasks still.
        let initialNamespace = ProcFile.text(root + "/proc/self/uid_map").map(isInitialUserNamespace(uidMap:)) ?? true
        if initialNamespace {
            guard uid != 0 else { return nil }
            if let status = ProcFile.text(root + "/proc/self/status"), exemptsFromUserLimit(status: status) {
                return nil
            }
        }
        let maximum = Int(clamping: limit.rlim_cur)
        if let loadavg = ProcFile.text(root + "/proc/loadavg"), let total = systemTasks(loadavg: loadavg),
            total + wanted <= maximum
        {
            return nil
        }
        return TaskShortage(limit: .userTasks(uid: uid), maximum: maximum, inUse: tasks(of: uid, root: root))
    }

    /// Whether `/proc/self/uid_map` is the initial user namespace's: every id mapped to itself.
    static func isInitialUserNamespace(uidMap: String) -> Bool {
        let lines = uidMap.split(separator: "\n")
        guard lines.count == 1 else { return false }
        return lines[0].split(whereSeparator: { $0 == " " || $0 == "\t" }) == ["0", "0", "4294967295"]
    }

    /// Whether `/proc/self/status`'s effective capabilities hold `CAP_SYS_ADMIN` (21) or
    /// `CAP_SYS_RESOURCE` (24), which lift `RLIMIT_NPROC`.
    static func exemptsFromUserLimit(status: String) -> Bool {
        guard let text = field("CapEff", in: status), let capabilities = UInt64(text, radix: 16) else { return false }
        return capabilities & (1 << 21 | 1 << 24) != 0
    }

    /// The number of tasks on the system: the fourth field of `/proc/loadavg` is "running/total".
    static func systemTasks(loadavg: String) -> Int? {
        let fields = loadavg.split(separator: " ")
        guard fields.count >= 4, let slash = fields[3].firstIndex(of: "/") else { return nil }
        return Int(fields[3][fields[3].index(after: slash)...])
    }

    /// The tasks (threads) of every process this process sees whose real user id is `uid`.
    static func tasks(of uid: uid_t, root: String) -> Int {
        guard let folder = opendir(root + "/proc") else { return 0 }
        defer { closedir(folder) }
        var total = 0
        while let entry = readdir(folder) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard let first = name.utf8.first, first >= UInt8(ascii: "1"), first <= UInt8(ascii: "9"),
                name.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
                let status = ProcFile.text(root + "/proc/" + name + "/status")
            else { continue }
            total += tasks(inStatus: status, of: uid)
        }
        return total
    }

    /// The `Threads:` of one `/proc/N/status` when its real user id (the first of `Uid:`) is
    /// `uid`, else 0.
    static func tasks(inStatus status: String, of uid: uid_t) -> Int {
        guard let ids = field("Uid", in: status),
            let real = ids.split(whereSeparator: { $0 == "\t" || $0 == " " }).first,
            UInt32(real) == uid, let threads = field("Threads", in: status).flatMap({ Int($0) })
        else { return 0 }
        return threads
    }

    /// The value of `name:` in a `/proc` status text, trimmed.
    static func field(_ name: String, in status: String) -> String? {
        for line in status.split(separator: "\n") where line.hasPrefix(name + ":") {
            return String(line.dropFirst(name.count + 1)).trimmingWhitespace
        }
        return nil
    }
}

extension String {
    fileprivate var trimmingWhitespace: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return String(self[first...last])
    }
}
