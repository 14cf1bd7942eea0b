import ArgumentParser
import Foundation
import StorageServer
import SyncDaemon
import Synchronization
import ThreadKit

/// `sync-agent serve`: a storage folder on loopback, the way GitHub raw serves it.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract:
            "Serve a storage folder on 127.0.0.1 the way GitHub raw does (files only, ETag, Range), for demos and tests.",
        discussion: "Prints the base URL, then serves until interrupted (Ctrl-C or SIGTERM).")

    @Argument(help: "The storage folder (holding RXCacheConfig/ and RXCacheContent/).")
    var directory: String

    @Option(name: .long, parsing: .unconditional, help: "The port, 0 to 65535; 0 picks a free one.")
    var port = "0"

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Append a line per request to FILE (- for stderr), in the common log format plus the If-None-Match and Range headers.",
            valueName: "FILE"))
    var accessLog: String?

    func run() async throws {
        guard !directory.isEmpty else {
            throw CLIFailure(
                code: 6,
                message: "the folder to serve is empty; give a path (an empty one would mean the current folder)")
        }
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isFolder), isFolder.boolValue else {
            throw CLIFailure(code: 6, message: "\(directory) is not a folder; pass the storage folder to serve")
        }
        if !FileManager.default.fileExists(atPath: directory + "/RXCacheConfig/cacheStatus.json") {
            Console.standardError(
                "warning: \(directory) has no RXCacheConfig/cacheStatus.json, so clients will find no storage there; "
                    + "serve the folder `sync-agent publish --storage` wrote\n")
        }
        // Read here, not by the parser: a bad value is a bad option value (exit 6) that says
        // the range, as every other number's.
        guard !port.isEmpty, port.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            let number = UInt16(port)
        else {
            throw CLIFailure(
                code: 6, message: "--port '\(port)' must be a number from 0 to 65535 (0 picks a free port)")
        }
        let server = StorageServer(root: URL(fileURLWithPath: directory), configuration: .init(port: number))
        var writer: AccessLogWriter?
        defer { writer?.flush(within: .seconds(2)) }
        if let accessLog {
            let sink: FileHandle
            if accessLog == "-" {
                sink = FileHandle.standardError
            } else {
                // Appended to, as a log is: created when missing (0644 less the umask), never
                // emptied or replaced (its mode and the lines already there stay).
                // Not blocking at the open: a FIFO without a reader would hold serve before it
                // listens. Its writes block again afterwards, as a log's do.
                let descriptor = open(accessLog, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0o644)
                guard descriptor >= 0 else {
                    let reason =
                        errno == ENXIO
                        ? "a FIFO with no reader; start its reader first"
                        : "\(String(cString: strerror(errno))); pass a writable file or - for stderr"
                    throw CLIFailure(code: 6, message: "--access-log \(accessLog) cannot be written (\(reason))")
                }
                _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
                sink = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
            }
            // The server keeps no request log of its own: a serve that runs for days must not grow.
            // Lines go to a writer thread: a log that stops taking them (a pipe whose reader
            // stalls) costs lines, never answers or a stop. The writer holds the handle.
            let lines = AccessLogWriter(sink)
            writer = lines
            server.observeRequests(keepingLog: false) { record in
                lines.append(Self.accessLogLine(record, at: Date()) + "\n")
            }
        } else {
            server.observeRequests(keepingLog: false) { _ in }
        }
        // The handler is in place before the URL is printed: a script that stops the server as
        // soon as it reads the URL is heard.
        let task = Mutex<Task<Void, any Error>?>(nil)
        let interrupt = InterruptHandler { task.withLock { $0 }?.cancel() }
        defer { interrupt.cancel() }
        let serving = Task {
            try await server.run { url in
                // Unbuffered, so a script reading the URL from a pipe sees it at once.
                Console.standardOutput(url.absoluteString + "\n")
            }
        }
        task.withLock { $0 = serving }
        if interrupt.fired { serving.cancel() }
        do {
            try await serving.value
        } catch is CancellationError {
            return
        } catch {
            // The message alone, as `watch --http` says it: not the failed call's Swift value.
            let message = (error as? StorageServerError)?.message ?? "\(error)"
            throw CLIFailure(code: Self.exitCode(for: error), message: "serving \(directory) failed: \(message)")
        }
    }

    /// 6 when no thread could be started to serve (a task limit, as `sync` exits), else 1.
    static func exitCode(for error: any Error) -> Int32 {
        (error as? StorageServerError)?.underlying is ThreadStartError ? 6 : 1
    }

    /// `127.0.0.1 - - [23/Nov/2026:05:20:00 +0000] "GET /path HTTP/1.1" 200 1234 "-" "agent" inm="…" range="…"`:
    /// the common log format (the server listens on loopback only), plus the two headers that
    /// say whether a client revalidated or resumed.
    static func accessLogLine(_ record: RequestRecord, at date: Date) -> String {
        // strftime, not a DateFormatter per request: this runs for every request served.
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        let length = strftime(&buffer, buffer.count, "%d/%b/%Y:%H:%M:%S +0000", &parts)
        let stamp = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let quoted = { (value: String?) in
            "\"" + LogText.escaped((value ?? "-").replacingOccurrences(of: "\"", with: "\\\"")) + "\""
        }
        // Escaped as a URL escapes: controls (C0, DEL, C1), blanks, line and paragraph
        // separators, and the quote and backslash that would end or escape the quoted field.
        let path = record.path.unicodeScalars.map { scalar -> String in
            let escaped =
                scalar.value < 0x21 || (0x7F...0x9F).contains(scalar.value) || scalar == "\"" || scalar == "\\"
                || scalar.properties.generalCategory == .lineSeparator
                || scalar.properties.generalCategory == .paragraphSeparator
                || scalar.properties.generalCategory == .spaceSeparator
                || scalar.properties.generalCategory == .format
            guard escaped else { return String(scalar) }
            return String(scalar).utf8.map { String(format: "%%%02X", $0) }.joined()
        }.joined()
        return "127.0.0.1 - - [\(stamp)] \"\(record.method) \(path) HTTP/1.1\" \(record.status) \(record.bodyBytes) "
            + "\(quoted(record.header("referer"))) \(quoted(record.header("user-agent"))) inm=\(quoted(record.ifNoneMatch)) range=\(quoted(record.range))"
    }
}

/// Writes access-log lines on a thread of its own, so that a log that stops taking them (a
/// pipe or FIFO whose reader stalls) never holds a request's answer or the server's stop.
/// At most ``maxQueued`` lines wait; past that, lines are dropped and counted, and the count
/// is written once the log takes lines again.
final class AccessLogWriter: Sendable {
    static let maxQueued = 10_000

    private struct Queue {
        var lines: [String] = []
        var dropped = 0
        var writing = false
    }

    private let queue = Mutex(Queue())
    private let ready = DispatchSemaphore(value: 0)
    /// The log, held open for as long as the writer lives.
    private let sink: FileHandle
    /// Set when no writer thread could be made: lines are then written as they come.
    private let direct = Atomic<Bool>(false)

    init(_ sink: FileHandle) {
        self.sink = sink
        // Started once every property is set; without a thread (a task limit), lines are
        // written as they come, as before.
        if (try? DetachedThread.start(name: "serve.log", { [self] in write() })) == nil {
            direct.store(true, ordering: .releasing)
        }
    }

    /// The writer thread: each batch of queued lines in one write, forever.
    private func write() {
        while true {
            ready.wait()
            let (lines, dropped) = queue.withLock { queue -> ([String], Int) in
                defer {
                    queue.lines = []
                    queue.dropped = 0
                    queue.writing = true
                }
                return (queue.lines, queue.dropped)
            }
            var text = lines.joined()
            if dropped > 0 { text += "# \(dropped) lines dropped: the log did not take them in time\n" }
            if !text.isEmpty { Console.write(text, to: sink.fileDescriptor) }
            queue.withLock { $0.writing = false }
        }
    }

    /// Waits until every queued line is written, or `limit` passes (a log that takes nothing).
    func flush(within limit: Duration) {
        let deadline = ContinuousClock.now.advanced(by: limit)
        while ContinuousClock.now < deadline {
            if queue.withLock({ $0.lines.isEmpty && !$0.writing }) { return }
            Thread.sleep(forTimeInterval: 0.01)
        }
    }

    /// Queues `line` (ending in a line feed), or counts it as dropped when the queue is full.
    func append(_ line: String) {
        if direct.load(ordering: .acquiring) {
            Console.write(line, to: sink.fileDescriptor)
            return
        }
        let wake = queue.withLock { queue -> Bool in
            guard queue.lines.count < Self.maxQueued else {
                queue.dropped += 1
                return false
            }
            queue.lines.append(line)
            return queue.lines.count == 1
        }
        if wake { ready.signal() }
    }
}
