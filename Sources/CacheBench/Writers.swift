import Foundation
import ItemCache
import ToolSupport

/// Several processes setting into one shared folder. The parent starts `procs` copies of this
/// binary as `writer-child`; each opens the store (opening, migrating and reconciling at once
/// is part of the test, untimed), prints `ready`, and waits for `go` on stdin, so the timed sets
/// of all children overlap. Reports every set's latency and the errors (thrown sets plus failed
/// children), which must be 0.
func runWriters(_ options: ToolOptions) throws {
    let folder = try options.string("folder")
    let procs = try options.int("procs", 8)
    let ops = try options.int("ops", 250)
    let size = try options.int("size", 4096)
    let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    var children: [(process: Process, input: Pipe, output: Pipe)] = []
    for index in 0..<procs {
        let process = Process()
        process.executableURL = executable
        process.arguments = [
            "writer-child", "--folder", folder, "--index", "\(index)", "--ops", "\(ops)", "--size", "\(size)",
        ]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        children.append((process, input, output))
    }
    var readers: [LineReader] = children.map { LineReader($0.output.fileHandleForReading) }
    var failed = 0
    for index in readers.indices where readers[index].next() != "ready" { failed += 1 }
    let start = nowNanoseconds()
    for child in children { child.input.fileHandleForWriting.write(Data("go\n".utf8)) }
    var latencies: [UInt64] = []
    var errors = 0
    var messages: [String] = []
    for index in readers.indices {
        while let line = readers[index].next() {
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                continue
            }
            latencies += (object["lat_ns"] as? [NSNumber] ?? []).map(\.uint64Value)
            errors += object["errors"] as? Int ?? 0
            if let message = object["first_error"] as? String { messages.append(message) }
        }
        children[index].process.waitUntilExit()
        if children[index].process.terminationStatus != 0 { failed += 1 }
    }
    let wall = nowNanoseconds() - start
    var fields: [String: Any] = [
        "measure": "writers", "procs": procs, "ops": ops, "size": size, "errors": errors + failed,
        "failed_processes": failed, "wall_ns": wall,
    ]
    if let message = messages.first { fields["first_error"] = message }
    emit(fields.merging(latencyFields(latencies)) { $1 })
}

/// One writer process: open, say `ready`, wait for `go`, then `ops` timed sets of new keys.
func runWriterChild(_ options: ToolOptions) throws {
    let index = try options.int("index", 0)
    let ops = try options.int("ops", 250)
    let size = try options.int("size", 4096)
    let store = try ItemStore(
        configuration: configuration(folder: try options.string("folder"), inlineThreshold: nil, memoryTier: false))
    let keys = try itemKeys("writer\(index)", count: ops)
    let values = Values(size: size, seed: UInt64(index + 1))
    FileHandle.standardOutput.write(Data("ready\n".utf8))
    guard readLine() == "go" else { throw ToolFailure("writer \(index): no 'go' on stdin") }
    var latencies: [UInt64] = []
    var errors = 0
    var firstError: String?
    for (offset, key) in keys.enumerated() {
        let value = values.value(offset)
        let start = nowNanoseconds()
        do {
            try store.storeNow(value, for: key)
        } catch {
            errors += 1
            firstError = firstError ?? "\(error)"
        }
        latencies.append(nowNanoseconds() - start)
    }
    try store.closeNow()
    var fields: [String: Any] = ["measure": "writer-child", "index": index, "errors": errors]
    if let firstError { fields["first_error"] = firstError }
    emit(fields.merging(latencyFields(latencies)) { $1 })
}

/// Lines from a pipe, read as they come (a child's `ready` arrives long before its results).
struct LineReader {
    private let handle: FileHandle
    private var buffer = Data()

    init(_ handle: FileHandle) { self.handle = handle }

    mutating func next() -> String? {
        while true {
            if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
                let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
                buffer.removeSubrange(buffer.startIndex...newline)
                return line
            }
            let chunk = handle.availableData
            if chunk.isEmpty {
                guard !buffer.isEmpty else { return nil }
                defer { buffer.removeAll() }
                return String(decoding: buffer, as: UTF8.self)
            }
            buffer.append(chunk)
        }
    }
}
