import Foundation
import Testing

@testable import ThreadKit

/// `TaskBudget` reads the limits on tasks (a cgroup's `pids.max`, `RLIMIT_NPROC`) before a
/// process starts its threads: the parsing of `/proc` and `/sys` texts, then a fake tree.
@Suite("Task limits read before threads start")
struct TaskBudgetTests {
    static let hostMounts = """
        22 1 0:21 / /proc rw,nosuid - proc proc rw
        30 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
        """
    static let v1Mounts = """
        35 30 0:30 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids
        36 30 0:31 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
        37 30 0:32 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
        """

    @Test(
        "the folders whose pids.max bound the process, its own first",
        arguments: [
            // cgroup v2, a systemd service: the service, the slice, the mount point.
            (
                "0::/system.slice/agent.service\n", hostMounts,
                ["/sys/fs/cgroup/system.slice/agent.service", "/sys/fs/cgroup/system.slice", "/sys/fs/cgroup"]
            ),
            // v2 in a container with its own cgroup namespace: the container is the mount's root.
            ("0::/\n", hostMounts, ["/sys/fs/cgroup"]),
            // v1 (hybrid): the pids controller's tree; the unified tree has no pids controller
            // here but is walked too (a missing pids.max is skipped when reading).
            (
                "8:pids:/user.slice/u\n4:memory:/m\n0::/user.slice/u\n", v1Mounts,
                [
                    "/sys/fs/cgroup/pids/user.slice/u", "/sys/fs/cgroup/pids/user.slice", "/sys/fs/cgroup/pids",
                    "/sys/fs/cgroup/unified/user.slice/u", "/sys/fs/cgroup/unified/user.slice",
                    "/sys/fs/cgroup/unified",
                ]
            ),
            // A container that bind-mounts its own part of the host's tree: the mount's root is
            // the container's cgroup, so the process's path is taken relative to it.
            (
                "0::/docker/abc/inner\n",
                "40 30 0:26 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n",
                ["/sys/fs/cgroup/inner", "/sys/fs/cgroup"]
            ),
            // Outside the mount's root, or climbing out of a namespace: not visible, nothing read.
            ("0::/other/x\n", "40 30 0:26 /docker/abc /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n", []),
            ("0::/../../x\n", hostMounts, []),
            // A controller list with pids among others; a mount point with a space in it.
            (
                "3:cpu,pids:/a\n",
                "50 30 0:40 / /mnt/my\\040cgroups rw - cgroup none rw,cpu,pids\n",
                ["/mnt/my cgroups/a", "/mnt/my cgroups"]
            ),
            // No cgroup file content, or no cgroup mounts: nothing.
            ("", hostMounts, []),
            ("0::/a\n", "22 1 0:21 / /proc rw - proc proc rw\n", []),
            // Damaged lines are skipped.
            ("garbage\n0::/a\n", "short line\n" + hostMounts, ["/sys/fs/cgroup/a", "/sys/fs/cgroup"]),
        ])
    func pidsFolders(cgroup: String, mounts: String, expected: [String]) {
        #expect(TaskBudget.pidsFolders(cgroupFile: cgroup, mountInfo: mounts) == expected)
    }

    @Test func countsStatusesAndLoad() {
        #expect(TaskBudget.count("12\n") == 12)
        #expect(TaskBudget.count("max\n") == nil)
        #expect(TaskBudget.count("") == nil)
        #expect(TaskBudget.count("99999999999999999999999") == nil)
        #expect(TaskBudget.systemTasks(loadavg: "0.76 2.86 3.01 1/78 21354\n") == 78)
        #expect(TaskBudget.systemTasks(loadavg: "0.76 2.86\n") == nil)
        let status = "Name:\tsync-agent\nUid:\t4242\t0\t0\t0\nThreads:\t11\nCapEff:\t0000000000000000\n"
        #expect(TaskBudget.tasks(inStatus: status, of: 4242) == 11)
        #expect(TaskBudget.tasks(inStatus: status, of: 0) == 0, "the effective id is not the real one")
        #expect(TaskBudget.tasks(inStatus: "Uid:\t4242\t4242\t4242\t4242\n", of: 4242) == 0, "no Threads: line")
        #expect(!TaskBudget.exemptsFromUserLimit(status: status))
        #expect(TaskBudget.isInitialUserNamespace(uidMap: "         0          0 4294967295\n"))
        #expect(!TaskBudget.isInitialUserNamespace(uidMap: "         0      65534          1\n"), "unshare -r")
        #expect(!TaskBudget.isInitialUserNamespace(uidMap: "0 100000 65536\n1000 1000 1\n"), "a rootless container")
        #expect(TaskBudget.exemptsFromUserLimit(status: "CapEff:\t000001fffeffffff\n"))
        #expect(TaskBudget.exemptsFromUserLimit(status: "CapEff:\t0000000001000000\n"), "CAP_SYS_RESOURCE")
        #expect(TaskBudget.exemptsFromUserLimit(status: "CapEff:\t0000000000200000\n"), "CAP_SYS_ADMIN")
        #expect(!TaskBudget.exemptsFromUserLimit(status: "CapEff:\t0000000000400000\n"), "CAP_SYS_BOOT lifts nothing")
    }

    /// A fake `/proc` and `/sys` under a scratch folder: the tightest of the service's and the
    /// slice's limits is the one reported, with its numbers.
    @Test func theTightestCgroupLimitIsReported() throws {
        let root = NSTemporaryDirectory() + "/task-budget-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        func write(_ path: String, _ text: String) throws {
            let url = URL(fileURLWithPath: root + path)
            try FileManager.default.createDirectory(
                at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try text.write(to: url, atomically: false, encoding: .utf8)
        }
        try write("/proc/self/cgroup", "0::/system.slice/agent.service\n")
        try write("/proc/self/mountinfo", Self.hostMounts)
        try write("/sys/fs/cgroup/system.slice/agent.service/pids.max", "max\n")
        try write("/sys/fs/cgroup/system.slice/agent.service/pids.current", "3\n")
        try write("/sys/fs/cgroup/system.slice/pids.max", "40\n")
        try write("/sys/fs/cgroup/system.slice/pids.current", "30\n")

        #expect(TaskBudget.shortage(wanted: 10, root: root) == nil, "exactly 10 free is enough")
        try write("/proc/self/status", "Name:\tsync-agent\nThreads:\t7\n")
        #expect(TaskBudget.ownThreads(root: root) == 7)
        #expect((TaskBudget.ownThreads() ?? 0) >= 1, "this process's own count")
        let shortage = try #require(TaskBudget.shortage(wanted: 16, root: root))
        #expect(shortage.limit == .cgroup(folder: "/sys/fs/cgroup/system.slice"))
        #expect((shortage.maximum, shortage.inUse, shortage.free) == (40, 30, 10))
        #expect("\(shortage)".contains("/sys/fs/cgroup/system.slice allows 40 tasks (pids.max) and 30 run in it"))
        #expect(shortage.remedy.contains("TasksMax"))

        // The service's own limit is tighter still, and overfull (a limit lowered under a
        // running service): no room, never a negative count.
        try write("/sys/fs/cgroup/system.slice/agent.service/pids.max", "2\n")
        let tighter = try #require(TaskBudget.shortage(wanted: 16, root: root))
        #expect(tighter.limit == .cgroup(folder: "/sys/fs/cgroup/system.slice/agent.service"))
        #expect(tighter.free == 0)

        // A damaged pids.current is not read as a count.
        try write("/sys/fs/cgroup/system.slice/agent.service/pids.current", "many\n")
        #expect(TaskBudget.shortage(wanted: 16, root: root)?.limit == .cgroup(folder: "/sys/fs/cgroup/system.slice"))
    }

    /// `ProcFile` reads kernel files (size 0) and ordinary ones to their end, over several reads.
    @Test func procFilesAreReadWhole() throws {
        let status = try #require(ProcFile.text("/proc/self/status"))
        #expect(status.contains("Threads:") && status.hasSuffix("\n"), "read past the reported size of 0")
        #expect(ProcFile.text("/nonexistent/\(UUID().uuidString)") == nil)
        let path = NSTemporaryDirectory() + "/proc-file-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let text = String(repeating: "0123456789abcdef\n", count: 10_000) // 170 KB: three reads
        try text.write(toFile: path, atomically: false, encoding: .utf8)
        #expect(ProcFile.text(path) == text)
        #expect(ProcFile.text(path, limit: 65_536)?.utf8.count == 65_536, "stops at the limit's read")
    }

    @Test func theUserLimitNamesUlimit() {
        let shortage = TaskShortage(limit: .userTasks(uid: 4242), maximum: 12, inUse: 3)
        #expect(shortage.free == 9)
        #expect("\(shortage)" == "ulimit -u allows user 4242 12 tasks and 3 run as that user")
        #expect(shortage.remedy.contains("ulimit -u") && shortage.remedy.contains("LimitNPROC="))
    }
}
