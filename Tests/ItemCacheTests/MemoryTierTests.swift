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
        #expect(CgroupMemory.limit(root: root) == nil, "no limit file")
        try "268435456\n".write(toFile: root + "/memory/memory.limit_in_bytes", atomically: true, encoding: .utf8)
        #expect(CgroupMemory.limit(root: root) == 268_435_456, "v1")
        try "max\n".write(toFile: root + "/memory.max", atomically: true, encoding: .utf8)
        #expect(CgroupMemory.limit(root: root) == nil, "v2 wins, and max is no limit")
    }
}
