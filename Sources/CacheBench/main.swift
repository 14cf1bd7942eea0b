// cache-bench: times ItemCache's tiers for bench/cache_bench.py, which runs the same measures
// with python-diskcache, alternating the two, and writes docs/benchmarks.md.
//
//   cache-bench MEASURE --folder DIR [--name value ...]
//
// Each run prints JSON lines on stdout (per-operation latencies in ns as "lat_ns", with median,
// p99 and ops/s for a human reader). A run starts from an empty folder of its own.
import FileKit
import Foundation
import ItemCache
import ToolSupport

let usage = """
    usage: cache-bench MEASURE --folder DIR [options]
      get        --size 4096 --count 2000 --ops 5000   warm disk gets (memory tier off), random keys
      set        --size 4096 --count 2000              disk sets (storeNow), new keys
      set-async  --size 4096 --count 2000              the same through `await store(_:for:)`
      hop        --count 2000 --busy 0                 `await BlockingIOPool.shared.run` of a job
                                                       spinning --busy µs: the hop's own cost
      group      --size 4096 --count 2000 --max-items 100   group writes: items/s including close()
      memhit     --count 1000 --batches 2000 --batch 100    memory-tier hits
      keys       --count 1000 --rounds 200 [--shape S]  CacheKey(url:) per URL shape (a path, 4 query
                                                       items, a secret one, a path parameter), beside
                                                       URLComponents alone, and a memory hit by URL
      writers    --procs 8 --ops 250 --size 4096       that many processes setting into one folder
      inline     --inline 16384 --sizes 1024,4096,... --count 200 --ops 500   set and get per size
      loader     --hits 20000 --revalidations 500      ItemLoader on a loopback StorageServer: fresh
                                                       hits (memory), then 304 revalidations
      down-origin --calls 100 --interval-ms 20         a stale item while the origin refuses or
                                                       answers 503: each load's time, the requests
      scenario   --base URL --steps FILE|- --start EPOCH   replay bench/cache_scenario.py's HTTP
                                                       steps through ItemLoader (.server freshness)
    common: --seed 1 (values and key order), --inline N (inline threshold; default the library's)
    """

let arguments = CommandLine.arguments
guard arguments.count >= 2, !["-h", "--help"].contains(arguments[1]) else {
    print(usage)
    exit(arguments.count >= 2 ? 0 : 64)
}

do {
    let options = try ToolOptions(arguments.dropFirst(2), tool: "cache-bench")
    switch arguments[1] {
    case "get": try measureGet(options)
    case "set": try measureSet(options)
    case "set-async": try await measureSetAsync(options)
    case "group": try await measureGroup(options)
    case "hop": try await measureHop(options)
    case "memhit": try measureMemoryHit(options)
    case "keys": try measureKeys(options)
    case "writers": try runWriters(options)
    case "writer-child": try runWriterChild(options)
    case "inline": try measureInline(options)
    case "loader": try await measureLoader(options)
    case "scenario": try await runScenario(options)
    case "down-origin": try await measureDownOrigin(options)
    default: throw ToolFailure("unknown measure '\(arguments[1])'\n\(usage)")
    }
} catch {
    FileHandle.standardError.write(Data("cache-bench \(arguments[1]): \(error)\n".utf8))
    exit(1)
}

// MARK: - Disk tier

/// Stores `count` items of `size` bytes with `storeNow`, timing each; returns the latencies.
func populate(_ store: ItemStore, keys: [CacheKey], values: Values) throws -> [UInt64] {
    var latencies: [UInt64] = []
    latencies.reserveCapacity(keys.count)
    for (index, key) in keys.enumerated() {
        let value = values.value(index)
        let start = nowNanoseconds()
        try store.storeNow(value, for: key)
        latencies.append(nowNanoseconds() - start)
    }
    return latencies
}

/// The store the disk measures use: `--folder`, `--inline` (default the library's), memory tier off.
func diskStore(_ options: ToolOptions) throws -> ItemStore {
    try ItemStore(
        configuration: configuration(
            folder: options.string("folder"), inlineThreshold: options.int("inline", -1).nonNegative,
            memoryTier: false))
}

/// Gets of random stored keys; every one must be a disk hit of the right size.
func timedGets(_ store: ItemStore, keys: [CacheKey], size: Int, ops: Int, seed: UInt64) throws -> [UInt64] {
    let order = randomIndices(count: keys.count, ops: ops, seed: seed)
    // Untimed warm-up: SQLite's statement cache and the first page faults are not the steady cost.
    for index in order.prefix(200) { _ = try store.itemNow(for: keys[index]) }
    var latencies: [UInt64] = []
    latencies.reserveCapacity(ops)
    for index in order {
        let start = nowNanoseconds()
        let found = try store.itemNow(for: keys[index])
        let elapsed = nowNanoseconds() - start
        guard let found, found.source == .disk, found.item.data.count == size else {
            throw ToolFailure(
                "get of \(keys[index]) returned \(found.map { "\($0.item.data.count) bytes from \($0.source)" } ?? "nothing"); expected \(size) bytes from disk"
            )
        }
        latencies.append(elapsed)
    }
    return latencies
}

func measureGet(_ options: ToolOptions) throws {
    let size = try options.int("size", 4096)
    let count = try options.int("count", 2000)
    let ops = try options.int("ops", 5000)
    let seed = UInt64(try options.int("seed", 1))
    let store = try diskStore(options)
    let keys = try itemKeys("get", count: count)
    _ = try populate(store, keys: keys, values: Values(size: size, seed: seed))
    let latencies = try timedGets(store, keys: keys, size: size, ops: ops, seed: seed)
    try store.closeNow()
    emit(["measure": "get", "size": size, "count": count].merging(latencyFields(latencies)) { $1 })
}

func measureSet(_ options: ToolOptions) throws {
    let size = try options.int("size", 4096)
    let count = try options.int("count", 2000)
    let store = try diskStore(options)
    let latencies = try populate(
        store, keys: try itemKeys("set", count: count),
        values: Values(size: size, seed: UInt64(try options.int("seed", 1))))
    try store.closeNow()
    emit(["measure": "set", "size": size, "count": count].merging(latencyFields(latencies)) { $1 })
}

func measureSetAsync(_ options: ToolOptions) async throws {
    let size = try options.int("size", 4096)
    let count = try options.int("count", 2000)
    let store = try diskStore(options)
    let keys = try itemKeys("set", count: count)
    let values = Values(size: size, seed: UInt64(try options.int("seed", 1)))
    var latencies: [UInt64] = []
    for (index, key) in keys.enumerated() {
        let value = values.value(index)
        let start = nowNanoseconds()
        try await store.store(value, for: key)
        latencies.append(nowNanoseconds() - start)
    }
    try await store.close()
    emit(["measure": "set-async", "size": size, "count": count].merging(latencyFields(latencies)) { $1 })
}

/// What a hop to the I/O pool and back costs: `await BlockingIOPool.shared.run` of a job that
/// spins for `--busy` µs (0: an empty job), timed around the call, less the job's own time.
/// A short job finds the threads awake; a longer one lets an idle CPU halt, which the pool's
/// spinning is there to avoid (see BlockingIOPool).
func measureHop(_ options: ToolOptions) async throws {
    let count = try options.int("count", 2000)
    let busy = UInt64(try options.int("busy", 0)) * 1000
    var latencies: [UInt64] = []
    latencies.reserveCapacity(count)
    for _ in 0..<count {
        let start = nowNanoseconds()
        let spent = await BlockingIOPool.shared.run { () -> UInt64 in
            let start = nowNanoseconds()
            var now = start
            while now - start < busy { now = nowNanoseconds() }
            return now - start
        }
        latencies.append(nowNanoseconds() - start - spent)
    }
    emit(["measure": "hop", "count": count, "busy_us": busy / 1000].merging(latencyFields(latencies)) { $1 })
}

/// Group writes: the wall time from the first store to the end of `close()`, which writes the
/// last group, so every item is on disk when the clock stops.
func measureGroup(_ options: ToolOptions) async throws {
    let size = try options.int("size", 4096)
    let count = try options.int("count", 2000)
    let maxItems = try options.int("max-items", 100)
    var config = try configuration(
        folder: options.string("folder"), inlineThreshold: options.int("inline", -1).nonNegative, memoryTier: false)
    config.groupWrites = GroupWritePolicy(maxItems: maxItems, maxDelay: .seconds(1))
    let store = try ItemStore(configuration: config)
    let keys = try itemKeys("group", count: count)
    let source = Values(size: size, seed: UInt64(try options.int("seed", 1)))
    let values = (0..<count).map(source.value)
    let start = nowNanoseconds()
    for (key, value) in zip(keys, values) {
        try await store.store(value, for: key)
    }
    try await store.close()
    let elapsed = nowNanoseconds() - start
    let stored = try await store.statistics().count
    guard stored == count else { throw ToolFailure("group writes left \(stored) items on disk; expected \(count)") }
    emit([
        "measure": "group", "size": size, "count": count, "max_items": maxItems, "total_ns": elapsed,
        "items_per_s": Double(count) / (Double(elapsed) / 1e9),
    ])
}

// MARK: - Memory tier

/// Memory-tier hits. A clock pair (about 20 ns) would be a visible part of a sub-µs hit, so the
/// main figure times batches of `batch` hits and divides; single-hit samples and the cost of an
/// empty clock pair are printed too.
func measureMemoryHit(_ options: ToolOptions) throws {
    let count = try options.int("count", 1000)
    let batches = try options.int("batches", 2000)
    let batch = try options.int("batch", 100)
    let store = try ItemStore(
        configuration: configuration(folder: try options.string("folder"), inlineThreshold: nil, memoryTier: true))
    let keys = try itemKeys("mem", count: count)
    _ = try populate(store, keys: keys, values: Values(size: 4096, seed: UInt64(try options.int("seed", 1))))
    let order = randomIndices(count: count, ops: batches * batch, seed: 7).map { keys[$0] }
    var hits = 0
    for key in order.prefix(10_000) where try store.itemNow(for: key)?.source == .memory { hits += 1 }
    var perHit: [UInt64] = []
    perHit.reserveCapacity(batches)
    for round in 0..<batches {
        let slice = order[(round * batch)..<((round + 1) * batch)]
        let start = nowNanoseconds()
        for key in slice where try store.itemNow(for: key)?.source == .memory { hits += 1 }
        perHit.append((nowNanoseconds() - start) / UInt64(batch))
    }
    var single: [UInt64] = []
    var clockPair: [UInt64] = []
    single.reserveCapacity(order.count / 10)
    for key in order.prefix(order.count / 10) {
        let start = nowNanoseconds()
        let found = try store.itemNow(for: key)
        single.append(nowNanoseconds() - start)
        if found?.source == .memory { hits += 1 }
    }
    for _ in 0..<10_000 {
        let start = nowNanoseconds()
        clockPair.append(nowNanoseconds() - start)
    }
    let expected = min(10_000, order.count) + order.count + order.count / 10
    guard hits == expected else {
        throw ToolFailure("\(expected - hits) memory gets missed; the memory tier should hold all \(count) items")
    }
    try store.closeNow()
    let singleFields = latencyFields(single)
    let clockFields = latencyFields(clockPair)
    emit(
        ["measure": "memhit", "count": count, "batch": batch].merging(latencyFields(perHit)) { $1 }
            .merging([
                "single_median_us": singleFields["median_us"]!, "single_p99_us": singleFields["p99_us"]!,
                "clock_pair_median_us": clockFields["median_us"]!,
            ]) { $1 })
}

// MARK: - Inline threshold sweep

/// For one inline threshold: sets then random gets of `count` items of each size, in one folder,
/// memory tier off.
func measureInline(_ options: ToolOptions) throws {
    let threshold = try options.int("inline", 16 << 10)
    let sizes = try options.ints("sizes", [1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10])
    let count = try options.int("count", 200)
    let ops = try options.int("ops", 500)
    let seed = UInt64(try options.int("seed", 1))
    let store = try ItemStore(
        configuration: configuration(
            folder: try options.string("folder"), inlineThreshold: threshold, memoryTier: false))
    for size in sizes {
        let keys = try itemKeys("inline-\(size)", count: count)
        let sets = try populate(store, keys: keys, values: Values(size: size, seed: seed))
        let gets = try timedGets(store, keys: keys, size: size, ops: ops, seed: seed)
        emit(["measure": "inline", "op": "set", "inline": threshold, "size": size].merging(latencyFields(sets)) { $1 })
        emit(["measure": "inline", "op": "get", "inline": threshold, "size": size].merging(latencyFields(gets)) { $1 })
    }
    try store.closeNow()
}

extension Int {
    /// nil for the "not given" marker -1.
    var nonNegative: Int? { self >= 0 ? self : nil }
}

// MARK: - Keys

/// What making a key from a URL costs, per shape of URL (an app calling `item(for: url)` pays it
/// on every hit): the median over `rounds` of the time per key over `count` URLs, beside
/// `URLComponents` alone (the parse every key starts with), and a memory hit through a key made
/// for it.
func measureKeys(_ options: ToolOptions) throws {
    let count = try options.int("count", 1000)
    let rounds = try options.int("rounds", 200)
    let shapes: [(String, (Int) -> String)] = [
        ("path", { "https://cdn.example.com/images/\($0 % 97)/item-\($0).jpg" }),
        ("query4", { "https://api.example.com/v2/items?page=\($0)&size=50&sort=name&lang=en" }),
        ("secret-query", { "https://api.example.com/v2/items/\($0)?access_token=tok\($0)abc&fields=all" }),
        ("nested-url", { "https://img.example.com/fetch?src=https%3A%2F%2Forigin.example%2Fa\($0).png&w=200" }),
        ("path-parameter", { "https://shop.example.com/cart;jsessionid=ABC\($0)/view?x=1" }),
    ]
    let only = try options.string("shape", "")
    for (shape, make) in shapes where only.isEmpty || only == shape {
        let urls = (0..<count).map { URL(string: make($0))! }
        var parse: [UInt64] = []
        var key: [UInt64] = []
        for _ in 0..<rounds {
            var start = nowNanoseconds()
            var parsed = 0
            for url in urls where URLComponents(url: url, resolvingAgainstBaseURL: true) != nil { parsed += 1 }
            parse.append((nowNanoseconds() - start) / UInt64(count))
            start = nowNanoseconds()
            var length = 0
            for url in urls { length += try CacheKey(url: url).rawValue.utf8.count }
            key.append((nowNanoseconds() - start) / UInt64(count))
            guard parsed == count, length > 0 else { throw ToolFailure("\(shape): a URL did not parse") }
        }
        let keyMedian = key.sorted()[key.count / 2]
        let parseMedian = parse.sorted()[parse.count / 2]
        emit([
            "measure": "keys", "shape": shape, "count": count, "key_ns": keyMedian, "urlcomponents_ns": parseMedian,
            "sample": try CacheKey(url: urls[0]).rawValue,
        ])
    }
    // A memory hit when the app holds only the URL: the key is made for every get.
    let store = try ItemStore(
        configuration: configuration(folder: try options.string("folder"), inlineThreshold: nil, memoryTier: true))
    let urls = (0..<count).map { URL(string: "https://api.example.com/v2/items?page=\($0)&size=50&sort=name")! }
    _ = try populate(
        store, keys: try urls.map { try CacheKey(url: $0) }, values: Values(size: 4096, seed: 1))
    var perHit: [UInt64] = []
    var hits = 0
    for _ in 0..<rounds {
        let start = nowNanoseconds()
        for url in urls where try store.itemNow(for: CacheKey(url: url))?.source == .memory { hits += 1 }
        perHit.append((nowNanoseconds() - start) / UInt64(count))
    }
    guard hits == rounds * count else { throw ToolFailure("\(rounds * count - hits) memory gets by URL missed") }
    try store.closeNow()
    emit(["measure": "keys", "shape": "memhit-by-url", "count": count, "hit_ns": perHit.sorted()[perHit.count / 2]])
}
