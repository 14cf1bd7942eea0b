import Foundation
import ItemCache
import ToolSupport

/// What one writer process does, the same for each of its tasks.
struct WriterPlan: Sendable {
    var id: Int
    var seed: UInt64
    var epoch: UInt64
    var keys: Int
    var tasks: Int
    var sizes: SizeMix
    var groupItems: Int
    var removePercent: UInt64
    var updatePercent: UInt64
    var count: Int
    /// `--die-at-step N`: the step at which the writer SIGKILLs itself, once the step's call
    /// returned and before the line that says so (0: never). The crash tests' kill at the worst
    /// moment, which a kill from outside reaches only by chance.
    var dieAtStep: Int

    init(_ options: ToolOptions) throws {
        id = try options.int("id", 0)
        seed = UInt64(try options.int("seed", 1))
        epoch = UInt64(try options.int("epoch", 0))
        tasks = max(1, try options.int("tasks", 1))
        keys = max(tasks, try options.int("keys", 300))
        guard let sizes = SizeMix(rawValue: try options.string("sizes", "mixed")) else {
            throw ToolFailure("--sizes must be mixed, small or large")
        }
        self.sizes = sizes
        groupItems = try options.int("group-items", 0)
        removePercent = UInt64(try options.int("remove-percent", 5))
        updatePercent = UInt64(try options.int("update-percent", 5))
        count = try options.int("count", 0)
        dieAtStep = try options.int("die-at-step", 0)
        // The group is the process's; its lines only add up with one task filling it.
        guard groupItems == 0 || tasks == 1 else { throw ToolFailure("--group-items needs --tasks 1") }
    }
}

/// `writer`: stores, updates and removes self-verifying values, each task on its own share of
/// the keys (so each key's lines are in the order its writes reached the disk), and says on
/// stdout what is durable.
func runWriter(_ options: ToolOptions) async throws {
    let plan = try WriterPlan(options)
    var configuration = CacheConfiguration(folder: try options.string("cache"))
    configuration.diskLimit = try options.limit()
    if plan.groupItems > 0 {
        configuration.groupWrites = GroupWritePolicy(
            maxItems: plan.groupItems,
            maxDelay: .milliseconds(Int(try options.double("group-seconds", 1) * 1000)))
    }
    let store = try ItemStore(configuration: configuration)
    emit(
        "start writer=\(plan.id) epoch=\(plan.epoch) group=\(plan.groupItems) orphanFiles=\(store.openingRepairs.orphanFiles) orphanRows=\(store.openingRepairs.orphanRows)"
    )
    try await withThrowingTaskGroup(of: Void.self) { group in
        for task in 0..<plan.tasks {
            group.addTask { try await writerTask(store, plan, task: task) }
        }
        try await group.waitForAll()
    }
    try await store.close()
    if plan.groupItems > 0 { emit("flushed") }
    emit("closed")
}

private func writerTask(_ store: ItemStore, _ plan: WriterPlan, task: Int) async throws {
    var random = SplitMix64(seed: plan.seed &* 0x1_0000_0001 ^ plan.epoch << 20 ^ UInt64(plan.id << 8 | task))
    var generation = plan.epoch << 32
    var pending = Set<String>()
    var step = 0
    /// Says what the step's last call did, once it returned: where `--die-at-step` kills.
    func done(_ line: String) {
        if step == plan.dieAtStep {
            FileHandle.standardError.write(Data("dying at step \(step), before: \(line)\n".utf8))
            kill(getpid(), SIGKILL)
        }
        emit(line)
    }
    while plan.count == 0 || step < plan.count {
        step += 1
        generation += 1
        let name = "w\(plan.id)-\(Int(random.next() % UInt64(plan.keys / plan.tasks)) * plan.tasks + task)"
        let key = try CacheKey.custom(name)
        let roll = random.next() % 100
        if roll < plan.removePercent {
            // Said first: a kill between the remove's commit and "removed" leaves the key gone.
            emit("removing \(name) \(generation)")
            try await store.removeItem(for: key)
            pending.remove(name)
            done("removed \(name) \(generation)")
            continue
        }
        let data = ChaosValue(name: name, generation: generation).encoded(size: plan.sizes.next(&random))
        if roll < plan.removePercent + plan.updatePercent {
            if pending.contains(name) {
                // An update of a pending key writes the whole group first (ItemStore.update).
                emit("flushing \(pending.count)")
                try await store.flush()
                pending = []
                emit("flushed")
            }
            // A read-modify-write: the current value must be whole too.
            try await store.update(key) { current in
                if let current, case .failure(let why) = ChaosValue.check(current.data) {
                    emit("TORN \(name) in update: \(why)")
                    exit(2)
                }
                return data
            }
            done("committed \(name) \(generation)")
            continue
        }
        let options = StoreOptions(expiry: random.next() % 10 == 0 ? .date(Date(timeIntervalSinceNow: -60)) : nil)
        if plan.groupItems > 0 {
            // The store that makes the group full writes it before it returns (ItemStore.store).
            let fills = !pending.contains(name) && pending.count + 1 >= plan.groupItems
            if fills { emit("flushing \(pending.count + 1)") }
            try await store.store(data, for: key, options: options)
            pending.insert(name)
            done("pending \(name) \(generation)")
            if fills {
                // A timer flush may have emptied the group already; this one makes "flushed" true.
                try await store.flush()
                pending = []
                emit("flushed")
            }
        } else {
            if random.next() % 3 == 0 {
                try store.blockingStore(data, for: key, options: options)
            } else {
                try await store.store(data, for: key, options: options)
            }
            done("committed \(name) \(generation)")
        }
    }
}
