// image-bench: times ImagePipeline for bench/images_bench.py (`make bench-images`), which runs
// vipsthumbnail and Pillow on the same files, alternating, and writes docs/benchmarks.md.
//
//   image-bench MEASURE --folder DIR [--name value ...]
//
// Each run prints one JSON line on stdout. A run starts from the empty folder it is given.
import Foundation
import ImageCache
import ItemCache
import ToolSupport

#if canImport(Glibc)
    import Glibc
#endif

let usage = """
    usage: image-bench MEASURE --folder DIR [options]
      cold  --list FILE --width 720 --quality 80   every file of FILE (one path a line) as a file://
                                                   source, all at once through one pipeline (its
                                                   processing pool: a thread per core): images/s
      warm  --file F --width 720 --hits 20000      one variant made, then that many hits in turn:
                                                   p50 and p99 in ns
      one   --file F --width 500                   one variant of one (large) file: seconds, and
                                                   the process's peak RSS
    """

/// The process's peak resident set in bytes.
func peakRSS() -> Int {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return usage.ru_maxrss * 1024
}

func pipeline(_ options: ToolOptions) throws -> ImagePipeline {
    var cache = CacheConfiguration(folder: try options.string("folder"))
    cache.diskLimit = 8 << 30
    return try ImagePipeline(cache: cache)
}

func request(_ path: String, _ options: ToolOptions) throws -> ImageRequest {
    var request = ImageRequest(
        source: .url(URL(fileURLWithPath: path)), width: try options.int("width", 720), height: nil)
    request.quality = try options.int("quality", 80)
    request.format = .jpeg
    return request
}

func emit(_ object: [String: Any]) throws {
    let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    print(String(decoding: data, as: UTF8.self))
}

func measureCold(_ options: ToolOptions) async throws {
    let list = try String(contentsOfFile: try options.string("list"), encoding: .utf8)
    let files = list.split(separator: "\n").map(String.init).filter { !$0.isEmpty }
    let pipeline = try pipeline(options)
    let requests = try files.map { try request($0, options) }
    // Enough loads in flight to keep the pool busy while others read and hash their files.
    let inFlight = max(2, 2 * ImagePipeline.sharedProcessingPool.threadCount)
    let started = nowNanoseconds()
    var bytes = 0
    try await withThrowingTaskGroup(of: Int.self) { group in
        var next = 0
        for _ in 0..<min(inFlight, requests.count) {
            let request = requests[next]
            next += 1
            group.addTask { try await pipeline.image(for: request).data.count }
        }
        while let made = try await group.next() {
            bytes += made
            if next < requests.count {
                let request = requests[next]
                next += 1
                group.addTask { try await pipeline.image(for: request).data.count }
            }
        }
    }
    let seconds = Double(nowNanoseconds() - started) / 1e9
    try await pipeline.close()
    try emit([
        "measure": "cold", "images": requests.count, "seconds": seconds, "per_second": Double(requests.count) / seconds,
        "output_bytes": bytes, "made": pipeline.counts.made, "threads": ImagePipeline.sharedProcessingPool.threadCount,
        "peak_rss": peakRSS(),
    ])
}

func measureWarm(_ options: ToolOptions) async throws {
    let pipeline = try pipeline(options)
    let path = try options.string("file")
    // An http-like stored original is what a warm hit looks at: the file is saved under an id.
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    try await pipeline.save(data, id: "bench")
    var request = ImageRequest(source: .id("bench"), width: try options.int("width", 720), height: nil)
    request.quality = try options.int("quality", 80)
    _ = try await pipeline.image(for: request)
    let hits = try options.int("hits", 20_000)
    var samples: [UInt64] = []
    samples.reserveCapacity(hits)
    for _ in 0..<hits {
        let started = nowNanoseconds()
        let image = try await pipeline.image(for: request)
        samples.append(nowNanoseconds() - started)
        precondition(!image.wasMade)
    }
    try await pipeline.close()
    samples.sort()
    try emit([
        "measure": "warm", "hits": hits, "p50_ns": samples[samples.count / 2],
        "p99_ns": samples[min(samples.count - 1, samples.count * 99 / 100)], "made": pipeline.counts.made,
    ])
}

func measureOne(_ options: ToolOptions) async throws {
    let pipeline = try pipeline(options)
    let request = try request(try options.string("file"), options)
    let started = nowNanoseconds()
    let image = try await pipeline.image(for: request)
    let seconds = Double(nowNanoseconds() - started) / 1e9
    try await pipeline.close()
    try emit([
        "measure": "one", "seconds": seconds, "peak_rss": peakRSS(), "width": image.metadata.width,
        "height": image.metadata.height, "bytes": image.data.count,
    ])
}

let arguments = CommandLine.arguments
guard arguments.count >= 2, !["-h", "--help"].contains(arguments[1]) else {
    print(usage)
    exit(arguments.count >= 2 ? 0 : 64)
}

do {
    let options = try ToolOptions(arguments.dropFirst(2), tool: "image-bench")
    switch arguments[1] {
    case "cold": try await measureCold(options)
    case "warm": try await measureWarm(options)
    case "one": try await measureOne(options)
    default: throw ToolFailure("unknown measure '\(arguments[1])'\n\(usage)")
    }
} catch {
    FileHandle.standardError.write(Data("image-bench \(arguments[1]): \(error)\n".utf8))
    exit(1)
}
