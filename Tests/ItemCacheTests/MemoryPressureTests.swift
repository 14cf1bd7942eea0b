import Foundation
import Testing

@testable import ItemCache

/// The cgroup's memory pressure empties the memory tier, never the disk.
@Suite("Memory pressure: cgroup v2 memory.events read, and the memory tier emptied when a counter rises")
struct MemoryPressureTests {
    @Test(
        "memory.events parses",
        arguments: [
            (
                "low 0\nhigh 3\nmax 1\noom 0\noom_kill 2\noom_group_kill 0\n",
                CgroupMemory.Events(high: 3, max: 1, oomKill: 2)
            ),
            ("high 0\nmax 0\n", CgroupMemory.Events(high: 0, max: 0, oomKill: 0)),
            ("max 7", CgroupMemory.Events(high: 0, max: 7, oomKill: 0)),
            ("", nil),
            ("cache 12\nrss 4\n", nil),
        ] as [(String, CgroupMemory.Events?)])
    func parsing(text: String, expected: CgroupMemory.Events?) {
        #expect(CgroupMemory.parseEvents(text) == expected)
    }

    @Test("a rising high counter empties the memory tier; the disk keeps the item; off means off")
    func pressureEmptiesMemory() async throws {
        let root = NSTemporaryDirectory() + "fake-cgroup-\(UUID().uuidString.prefix(8))"
        let folder = temporaryCacheFolder()
        defer {
            try? FileManager.default.removeItem(atPath: root)
            try? FileManager.default.removeItem(atPath: folder)
        }
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        func writeEvents(high: Int) throws {
            try Data("low 0\nhigh \(high)\nmax 0\noom 0\noom_kill 0\n".utf8).write(
                to: URL(fileURLWithPath: root + "/memory.events"))
        }
        try writeEvents(high: 5)
        func open(purging: Bool) throws -> ItemStore {
            var configuration = CacheConfiguration(folder: folder)
            configuration.cgroupRoot = root
            configuration.pressurePollInterval = .milliseconds(20)
            configuration.purgesMemoryUnderPressure = purging
            return try ItemStore(configuration: configuration)
        }
        let store = try open(purging: true)
        let unbothered = try open(purging: false)
        let key = try CacheKey.custom("kept")
        try await store.store(Data("v".utf8), for: key)
        try await unbothered.store(Data("v".utf8), for: key)
        try await Task.sleep(for: .milliseconds(100))
        #expect(store.memory.value(for: key) != nil, "no pressure yet: the value stays in memory")

        try writeEvents(high: 6)
        var waited = 0
        while store.memory.value(for: key) != nil, waited < 200 {
            try await Task.sleep(for: .milliseconds(10))
            waited += 1
        }
        #expect(store.memory.value(for: key) == nil, "pressure empties the memory tier")
        #expect(unbothered.memory.value(for: key) != nil, "purgesMemoryUnderPressure = false leaves it")
        #expect(try store.blockingItem(for: key)?.source == .disk, "the disk keeps everything")
    }
}
