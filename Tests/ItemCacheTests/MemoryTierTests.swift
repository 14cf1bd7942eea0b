import Foundation
import Testing

@testable import ItemCache

/// The memory tier keeps the most recently used values within its limits.
@Suite("The memory tier is an LRU bounded by cost, item size and count")
struct MemoryTierTests {
    static func key(_ name: String) -> CacheKey { try! CacheKey.custom(name) }

    /// An operation of a scripted run: `s:name:cost` stores, `g:name` reads, `r:name` removes.
    static func run(_ script: String, limits: MemoryLimits) -> (order: [String], evicted: [String], cost: Int) {
        let tier = MemoryTier<String>(limits: limits)
        var evicted: [String] = []
        for step in script.split(separator: " ") {
            let parts = step.split(separator: ":").map(String.init)
            switch parts[0] {
            case "s":
                tier.set(parts[1], cost: Int(parts[2])!, for: key(parts[1])) {
                    evicted.append(String($0.rawValue.dropFirst("custom:".count)))
                }
            case "g": _ = tier.value(for: key(parts[1]))
            case "r": tier.remove(key(parts[1]))
            default: Issue.record("bad step \(step)")
            }
        }
        return (tier.keysByRecency.map { String($0.rawValue.dropFirst("custom:".count)) }, evicted, tier.totalCost)
    }

    @Test(arguments: [
        // Most recent first; a read refreshes.
        ("s:a:1 s:b:1 s:c:1", 10, nil as Int?, ["c", "b", "a"], [String](), 3),
        ("s:a:1 s:b:1 s:c:1 g:a", 10, nil, ["a", "c", "b"], [], 3),
        // Over the byte limit: the least recently used go first, as many as needed.
        ("s:a:4 s:b:4 s:c:4", 10, nil, ["c", "b"], ["a"], 8),
        ("s:a:4 s:b:4 g:a s:c:4", 10, nil, ["c", "a"], ["b"], 8),
        ("s:a:3 s:b:3 s:c:3 s:d:8", 10, nil, ["d"], ["a", "b", "c"], 8),
        // Replacing a value changes its cost and refreshes it.
        ("s:a:4 s:b:4 s:a:1 s:c:5", 10, nil, ["c", "a", "b"], [], 10),
        // The count limit.
        ("s:a:1 s:b:1 s:c:1", 10, 2, ["c", "b"], ["a"], 2),
        // Removal.
        ("s:a:1 s:b:1 r:a s:c:1", 10, nil, ["c", "b"], [], 2),
    ])
    func scriptsEndInTheirOrder(script: String, total: Int, count: Int?, order: [String], evicted: [String], cost: Int)
    {
        let result = Self.run(script, limits: MemoryLimits(totalBytes: total, itemBytes: 8, count: count))
        #expect(result.order == order, "\(script)")
        #expect(result.evicted == evicted, "\(script)")
        #expect(result.cost == cost, "\(script)")
    }

    @Test func aValueOverThePerItemLimitIsNotKeptAndDropsAnOlderCopy() {
        // itemBytes 8: a 9-byte value stays out of memory, and its stale copy goes too.
        let result = Self.run("s:a:1 s:b:2 s:a:9", limits: MemoryLimits(totalBytes: 100, itemBytes: 8))
        #expect(result.order == ["b"])
        #expect(result.cost == 2)
    }

    @Test func purgingEmptiesTheTier() {
        let tier = MemoryTier<Int>(limits: MemoryLimits(totalBytes: 100))
        for index in 0..<10 { tier.set(index, cost: 5, for: Self.key("\(index)")) }
        tier.removeAll()
        #expect(tier.keysByRecency.isEmpty && tier.totalCost == 0 && tier.value(for: Self.key("3")) == nil)
    }

    @Test func manyRandomOperationsKeepTheLimitsAndTheBookkeeping() {
        var random = SystemRandomNumberGenerator()
        let tier = MemoryTier<Int>(limits: MemoryLimits(totalBytes: 1_000, itemBytes: 300, count: 20))
        var costs: [String: Int] = [:]
        for _ in 0..<5_000 {
            let name = "\(Int.random(in: 0..<40, using: &random))"
            switch Int.random(in: 0..<4, using: &random) {
            case 0, 1:
                let cost = Int.random(in: 0..<400, using: &random)
                if tier.set(
                    cost, cost: cost, for: Self.key(name),
                    evicted: { costs[String($0.rawValue.dropFirst("custom:".count))] = nil })
                {
                    costs[name] = cost
                } else {
                    costs[name] = nil
                }
            case 2:
                #expect(tier.value(for: Self.key(name)) == costs[name])
            default:
                tier.remove(Self.key(name))
                costs[name] = nil
            }
            #expect(tier.totalCost <= 1_000 && tier.keysByRecency.count <= 20)
        }
        #expect(Set(tier.keysByRecency.map { String($0.rawValue.dropFirst("custom:".count)) }) == Set(costs.keys))
        #expect(tier.totalCost == costs.values.reduce(0, +))
    }

    @Test(arguments: [
        ("max\n", nil as Int64?), ("536870912\n", 536_870_912), ("9223372036854771712\n", nil), ("", nil),
        ("junk", nil),
    ])
    func cgroupLimitFilesAreRead(text: String, limit: Int64?) {
        #expect(CgroupMemory.parse(text) == limit)
    }

    @Test(arguments: [
        (nil as Int64?, 256 << 20), (Int64(512) << 20, 64 << 20), (Int64(8) << 30, 256 << 20),
        (Int64(16) << 20, 4 << 20),
    ])
    func theDefaultTotalShrinksInASmallContainer(cgroup: Int64?, expected: Int) {
        #expect(MemoryLimits.defaultTotalBytes(cgroupLimit: cgroup) == expected)
    }

    @Test func aRealCgroupHierarchyIsRead() throws {
        let root = NSTemporaryDirectory() + "cgroup-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/memory", withIntermediateDirectories: true)
        let atRoot = "0::/\n"
        #expect(CgroupMemory.limit(root: root, selfCgroup: atRoot) == nil, "no limit file")
        try "268435456\n".write(toFile: root + "/memory/memory.limit_in_bytes", atomically: true, encoding: .utf8)
        #expect(CgroupMemory.limit(root: root, selfCgroup: atRoot) == 268_435_456, "v1")
        try "max\n".write(toFile: root + "/memory.max", atomically: true, encoding: .utf8)
        #expect(CgroupMemory.limit(root: root, selfCgroup: atRoot) == nil, "v2 wins, and max is no limit")
    }

    /// A systemd service's group is below the root, where no limit is set: its own limit, or
    /// its slice's when smaller, is the one. (Only the root's was read: a service with
    /// `MemoryMax=512M` got the 256 MiB default.)
    @Test func theProcesssOwnGroupAndTheGroupsAboveItSetTheLimit() throws {
        let root = NSTemporaryDirectory() + "cgroup-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: root) }
        let service = root + "/system.slice/sync-agent.service"
        try FileManager.default.createDirectory(atPath: service, withIntermediateDirectories: true)
        func write(_ text: String, _ path: String) throws {
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        }
        let inService = "0::/system.slice/sync-agent.service\n"
        try write("max\n", service + "/memory.max")
        #expect(CgroupMemory.limit(root: root, selfCgroup: inService) == nil, "no limit anywhere")
        try write("536870912\n", service + "/memory.max")
        #expect(CgroupMemory.limit(root: root, selfCgroup: inService) == 536_870_912, "the service's own")
        #expect(
            MemoryLimits.defaultTotalBytes(cgroupLimit: CgroupMemory.limit(root: root, selfCgroup: inService)) == 64
                << 20)
        try write("268435456\n", root + "/system.slice/memory.max")
        #expect(CgroupMemory.limit(root: root, selfCgroup: inService) == 268_435_456, "the slice's, smaller")
        #expect(CgroupMemory.limit(root: root, selfCgroup: "0::/\n") == nil, "the root sets none")
        // Outside a cgroup namespace a path may climb: it is not followed; the root is read.
        #expect(CgroupMemory.limit(root: root, selfCgroup: "0::/../../etc\n") == nil)
        // v1: the memory controller's line names the group.
        try FileManager.default.createDirectory(
            atPath: root + "/memory/process_api/abc", withIntermediateDirectories: true)
        try? FileManager.default.removeItem(atPath: service + "/memory.max")
        try? FileManager.default.removeItem(atPath: root + "/system.slice/memory.max")
        try write("9223372036854771712\n", root + "/memory/memory.limit_in_bytes")
        try write("1073741824\n", root + "/memory/process_api/abc/memory.limit_in_bytes")
        #expect(
            CgroupMemory.limit(root: root, selfCgroup: "4:memory:/process_api/abc\n1:cpu:/\n") == 1_073_741_824, "v1")
        // memory.events of the group and the groups above it add up.
        try write("low 0\nhigh 2\nmax 1\noom 0\noom_kill 0\n", service + "/memory.events")
        try write("low 0\nhigh 0\nmax 3\noom 0\noom_kill 1\n", root + "/system.slice/memory.events")
        #expect(
            CgroupMemory.events(root: root, selfCgroup: inService)
                == CgroupMemory.Events(high: 2, max: 4, oomKill: 1))
    }

    @Test(arguments: [
        ("0::/\n", CgroupMemory.Groups(unified: "/")),
        ("0::/system.slice/a.service\n", CgroupMemory.Groups(unified: "/system.slice/a.service")),
        ("12:memory:/docker/abc\n0::/\n", CgroupMemory.Groups(unified: "/", memory: "/docker/abc")),
        ("4:cpu,memory:/x\n", CgroupMemory.Groups(memory: "/x")),
        ("0::/../..\n", CgroupMemory.Groups()),
        ("garbage\n1:name=systemd:/\n", CgroupMemory.Groups()),
        ("", CgroupMemory.Groups()),
    ])
    func procSelfCgroupLinesNameTheGroups(text: String, groups: CgroupMemory.Groups) {
        #expect(CgroupMemory.Groups(text) == groups)
    }
}
