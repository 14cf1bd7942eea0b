import Foundation
import ProcessKit
import Testing

@testable import StorageServer
@testable import SyncAgent

/// `serve --access-log` and the warning for a folder that is not a storage.
@Suite("serve: an access log, and a warning when the folder is not a storage", .timeLimit(.minutes(3)))
struct ServeAccessLogTests {
    @Test("a sync through serve --access-log leaves one common-log line per request, revalidations visible")
    func accessLog() async throws {
        try await withScratch { scratch in
            let log = scratch + "/access.log"
            let (server, url) = try await SyncAgentBinary.serve(
                SyncAgentCLITests.exampleStorage + "/1.4", scratch: scratch,
                arguments: ["--access-log", log], stderr: scratch + "/serve.err")
            defer { server.send(SIGTERM) }
            for _ in 0..<2 {
                let sync = try await SyncAgentBinary.run(
                    [
                        "sync", "--base-url", url.absoluteString, "--dir", scratch + "/content",
                        "--state", scratch + "/state.sqlite", "--quiet",
                    ], scratch: scratch)
                #expect(sync.status == 0, "\(sync.stderr)")
            }
            try await Task.sleep(for: .milliseconds(100))
            let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
            let status = lines.filter { $0.contains("\"GET /RXCacheConfig/cacheStatus.json HTTP/1.1\"") }
            #expect(status.count == 2, "\(lines)")
            #expect(
                status.first?.contains("\" 200 ") == true && status.last?.contains("\" 304 0 ") == true,
                "the second sync revalidates: \(status)")
            #expect(lines.allSatisfy { $0.hasPrefix("127.0.0.1 - - [") }, "\(lines)")
            #expect(lines.contains { $0.contains("RXCacheContent.zip") }, "the first sync restored from the archive")
            #expect(
                ((try? String(contentsOfFile: scratch + "/serve.err", encoding: .utf8)) ?? "").isEmpty,
                "a storage: no warning")
        }
    }

    @Test("a folder without RXCacheConfig/cacheStatus.json is served with a warning")
    func notAStorage() async throws {
        try await withScratch { scratch in
            try FileManager.default.createDirectory(atPath: scratch + "/plain", withIntermediateDirectories: true)
            let (server, _) = try await SyncAgentBinary.serve(
                scratch + "/plain", scratch: scratch, stderr: scratch + "/serve.err")
            server.send(SIGTERM)
            _ = await server.exitStatus()
            let warning = (try? String(contentsOfFile: scratch + "/serve.err", encoding: .utf8)) ?? ""
            #expect(warning.hasPrefix("warning: ") && warning.contains("RXCacheConfig/cacheStatus.json"), "\(warning)")
        }
    }

    @Test("the line escapes quotes and control characters")
    func lineFormat() {
        let record = RequestRecord(
            method: "GET", path: "/a b\n.json", headers: ["user-agent": "x\"y", "if-none-match": "\"e1\""], status: 304,
            bodyBytes: 0, fault: nil)
        let line = ServeCommand.accessLogLine(record, at: Date(timeIntervalSince1970: 0))
        #expect(
            line
                == #"127.0.0.1 - - [01/Jan/1970:00:00:00 +0000] "GET /a%20b%0A.json HTTP/1.1" 304 0 "-" "x\"y" inm="\"e1\"" range="-""#
        )
    }

    /// An audit: a `"` in a path ended the quoted request field, and a line separator (U+2028)
    /// or NEL went out raw, which log viewers split lines on.
    @Test("a path's quote, backslash and separators are escaped in the line")
    func pathsAreEscapedForTheLine() {
        let record = RequestRecord(
            method: "GET", path: "/q\"x\\y\u{2028}z\u{85}\u{A0}.json", headers: [:], status: 404, bodyBytes: 0,
            fault: nil)
        let line = ServeCommand.accessLogLine(record, at: Date(timeIntervalSince1970: 0))
        #expect(line.contains(#""GET /q%22x%5Cy%E2%80%A8z%C2%85%C2%A0.json HTTP/1.1" 404"#), "\(line)")
    }

    /// An audit: with the log on a pipe whose reader stopped, every answer waited on its log
    /// line, so the server answered nobody and a SIGTERM could not stop it.
    @Test("a log that takes nothing costs lines, never a request's answer")
    func aStalledLogDropsLinesInsteadOfBlocking() throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let writer = AccessLogWriter(FileHandle(fileDescriptor: ends[1], closeOnDealloc: true))
        let line = String(repeating: "x", count: 255) + "\n"
        // Past what the pipe holds, and past twice the queue (the writer's first batch takes at
        // most a queue's worth), so lines are dropped however late the writer starts.
        let total = 2 * AccessLogWriter.maxQueued + 5_000
        for _ in 0..<total { writer.append(line) }
        // Returning at all is the point: nothing above waited on the pipe. Now read until every
        // line is accounted for, written or counted as dropped (a count may come amid the lines,
        // when the writer took a batch late), or nothing comes for a minute.
        var written = 0
        var dropped = 0
        var partial: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while written + dropped < total {
            var entry = pollfd(fd: ends[0], events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 60_000) > 0 else { break }
            let count = Glibc.read(ends[0], &chunk, chunk.count)
            guard count > 0 else { break }
            partial += chunk[..<count]
            while let end = partial.firstIndex(of: UInt8(ascii: "\n")) {
                let text = String(decoding: partial[..<end], as: UTF8.self)
                partial.removeSubrange(...end)
                if text.hasPrefix("# ") {
                    dropped += Int(text.dropFirst(2).prefix { $0.isNumber }) ?? 0
                } else {
                    #expect(text.utf8.count == 255)
                    written += 1
                }
            }
        }
        #expect(written + dropped == total)
        #expect(dropped > 0)
    }

    /// An audit: the log was created anew (`createFile`) before the seek to its end, so a
    /// restart emptied it, gave it a new inode and mode 0644. "Append" means append.
    @Test("--access-log appends to the file there: earlier lines, inode and mode stay")
    func accessLogIsAppendedTo() async throws {
        try await withScratch { scratch in
            let log = scratch + "/access.log"
            try Data("earlier line\n".utf8).write(to: URL(fileURLWithPath: log))
            chmod(log, 0o640)
            var before = stat()
            stat(log, &before)
            let (server, url) = try await SyncAgentBinary.serve(
                SyncAgentCLITests.exampleStorage + "/1.4", scratch: scratch, arguments: ["--access-log", log])
            let sync = try await SyncAgentBinary.run(
                [
                    "sync", "--base-url", url.absoluteString, "--dir", scratch + "/content", "--state",
                    scratch + "/state.sqlite", "--quiet",
                ], scratch: scratch)
            #expect(sync.status == 0, "\(sync.stderr)")
            server.send(SIGTERM)
            _ = await server.exitStatus()
            let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n")
            #expect(lines.first == "earlier line" && lines.count > 2, "\(lines)")
            var after = stat()
            stat(log, &after)
            #expect(after.st_ino == before.st_ino && after.st_mode & 0o777 == 0o640)
        }
    }

    /// A re-audit: a FIFO without a reader held `serve` in `open` forever, before it listened.
    @Test("--access-log on a FIFO with no reader exits 6 at once, naming it")
    func accessLogOnAFIFOWithoutReader() async throws {
        try await withScratch { scratch in
            let fifo = scratch + "/log.fifo"
            #expect(mkfifo(fifo, 0o600) == 0)
            let result = try await SyncAgentBinary.run(
                ["serve", SyncAgentCLITests.exampleStorage + "/1.4", "--access-log", fifo], scratch: scratch)
            #expect(result.status == 6, "\(result.stderr)")
            #expect(result.stderr.contains("FIFO with no reader"), "\(result.stderr)")
        }
    }

    /// An audit: `--port` was parsed by the argument parser, so a bad value exited 64 without
    /// the range; every other number is a bad option value (exit 6) that names its range.
    @Test(arguments: ["65536", "-1", "0x10", "1e3", "+80", " 80", "99999999999999999999999"])
    func aBadPortIsABadOptionValue(port: String) async throws {
        try await withScratch { scratch in
            let result = try await SyncAgentBinary.run(
                ["serve", SyncAgentCLITests.exampleStorage + "/1.4", "--port=" + port], scratch: scratch)
            #expect(result.status == 6, "\(result.stderr)")
            #expect(result.stderr.contains("--port") && result.stderr.contains("0 to 65535"), "\(result.stderr)")
        }
    }

    /// An audit: once out of descriptors, FlyingFox's listener ended and `serve` exited 0
    /// without a word, its port closed (then, exit 1 with a message). `serve` now keeps serving:
    /// connections that only sit open are closed to make room, oldest first.
    @Test("serve with more connections open than descriptors keeps serving a sync")
    func outOfDescriptorsKeepsServing() async throws {
        try await withScratch { scratch in
            let (server, url) = try await SyncAgentBinary.serve(
                SyncAgentCLITests.exampleStorage + "/1.4", scratch: scratch, stderr: scratch + "/serve.err",
                openFiles: 96)
            defer {
                server.send(SIGKILL)
            }
            let port = UInt16(url.port ?? 0)
            var sockets: [Int32] = []
            defer { for socket in sockets { close(socket) } }
            for _ in 0..<400 {
                let socket = Self.connect(port: port)
                guard socket >= 0 else { break }
                sockets.append(socket)
            }
            #expect(sockets.count == 400)
            let sync = try await SyncAgentBinary.run(
                [
                    "sync", "--base-url", url.absoluteString, "--dir", scratch + "/content",
                    "--state", scratch + "/state.sqlite", "--quiet",
                ], scratch: scratch)
            #expect(sync.status == 0, "\(sync.stderr)")
            #expect(await Self.exitStatus(of: server, within: .milliseconds(500)) == nil, "serve ended")
            server.send(SIGTERM)
            let status = await Self.exitStatus(of: server, within: .seconds(20))
            let stderr = (try? String(contentsOfFile: scratch + "/serve.err", encoding: .utf8)) ?? ""
            #expect(status == 0, "\(String(describing: status)): \(stderr)")
        }
    }

    /// A TCP connection to 127.0.0.1:`port`, or -1.
    static func connect(port: UInt16) -> Int32 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return -1 }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(socket)
            return -1
        }
        return socket
    }

    /// The process's exit status once it ends within `limit`, else nil (still running): its
    /// state in `/proc` is read until it is a zombie, so the wait never blocks past the limit.
    static func exitStatus(of process: ChildProcess, within limit: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            let stat = (try? String(contentsOfFile: "/proc/\(process.pid)/stat", encoding: .utf8)) ?? ""
            if let close = stat.lastIndex(of: ")"), stat[stat.index(close, offsetBy: 2)...].hasPrefix("Z") {
                return await process.exitStatus()
            }
            try? await Task.sleep(for: .milliseconds(100))
        }
        return nil
    }
}
