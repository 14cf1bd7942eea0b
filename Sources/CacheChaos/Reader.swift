import Foundation
import ItemCache
import ToolSupport

/// `reader`: reads random keys of every writer, through the synchronous and the async path, a
/// small memory tier so most reads go to disk, and checks each value it gets. Every 250 reads it
/// reports its counts and writes its recorded reads (a write transaction of its own).
func runReader(_ options: ToolOptions) async throws {
    let writers = max(1, try options.int("writers", 1))
    let keys = max(1, try options.int("keys", 300))
    let count = try options.int("count", 0)
    var random = SplitMix64(seed: UInt64(try options.int("seed", 1)) &* 0x2_0000_0003)
    var configuration = CacheConfiguration(folder: try options.string("cache"))
    configuration.memory = MemoryLimits(totalBytes: 1 << 20)
    let store = try ItemStore(configuration: configuration)
    emit("start reader orphanFiles=\(store.openingRepairs.orphanFiles) orphanRows=\(store.openingRepairs.orphanRows)")
    var reads = 0
    var hits = 0
    while count == 0 || reads < count {
        let name = "w\(random.next() % UInt64(writers))-\(random.next() % UInt64(keys))"
        let key = try CacheKey.custom(name)
        let item = reads % 2 == 0 ? try store.blockingItem(for: key)?.item : try await store.item(for: key)?.item
        reads += 1
        if let item {
            hits += 1
            switch ChaosValue.check(item.data) {
            case .failure(let why):
                emit("TORN \(name) \(why)")
                exit(2)
            case .success(let value) where value.name != name:
                emit("TORN \(name) holds the value of \(value.name) generation \(value.generation)")
                exit(2)
            case .success:
                guard item.info.size == Int64(item.data.count) else {
                    emit("TORN \(name) has \(item.data.count) bytes, its record says \(item.info.size)")
                    exit(2)
                }
            }
        }
        if reads % 250 == 0 {
            emit("reads \(reads) hits \(hits)")
            try await store.flush()
        }
    }
    try await store.close()
    emit("reads \(reads) hits \(hits)")
}
