import Foundation
import Glibc
import StorageServer
import Synchronization
import Testing

@testable import SyncAgent

/// A fake systemd: a Unix datagram socket that collects what `watch` sends to `$NOTIFY_SOCKET`.
final class FakeNotifySocket: Sendable {
    let path: String
    private let descriptor: Int32
    private let received = Mutex<[String]>([])
    private let stopped = Atomic(false)

    /// Binds a socket at `name` (a path, or `@name` in the abstract namespace) and collects
    /// datagrams on a thread of its own until ``close()``.
    init(name: String) throws {
        path = name
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var timeout = timeval(tv_sec: 0, tv_usec: 50_000)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(name.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let length = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count + (bytes.first == 0 ? 0 : 1)
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(length)) }
        }
        guard bound == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EINVAL) }
        Thread.detachNewThread { [self] in
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !stopped.load(ordering: .relaxed) {
                let count = recv(descriptor, &buffer, buffer.count, 0)
                if count > 0 { received.withLock { $0.append(String(decoding: buffer[0..<count], as: UTF8.self)) } }
            }
        }
    }

    var messages: [String] { received.withLock { $0 } }

    func close() {
        stopped.store(true, ordering: .relaxed)
        usleep(100_000)
        Glibc.close(descriptor)
        if !path.hasPrefix("@") { unlink(path) }
    }
}

@Suite(
    "systemd notifications: READY, STATUS, WATCHDOG and STOPPING reach a fake NOTIFY_SOCKET", .timeLimit(.minutes(3)))
struct SystemdNotifyTests {
    @Test(
        "watch under Type=notify: READY=1 after the first check, STATUS lines, watchdog pings, STOPPING=1 on SIGTERM",
        arguments: ["path", "abstract"])
    func watchNotifiesSystemd(kind: String) async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.2")) {
                server in
                let name =
                    kind == "path" ? scratch + "/notify.sock" : "@content-sync-test-\(UUID().uuidString.prefix(8))"
                let systemd = try FakeNotifySocket(name: name)
                defer { systemd.close() }
                let process = try SyncAgentBinary.watch(
                    server, scratch: scratch, environment: ["NOTIFY_SOCKET": name, "WATCHDOG_USEC": "200000"])
                async let exitStatus = process.exitStatus()
                var waited = 0
                while !systemd.messages.contains("READY=1"), waited < 300 {
                    try await Task.sleep(for: .milliseconds(50))
                    waited += 1
                }
                try await Task.sleep(for: .milliseconds(350)) // a few watchdog pings
                process.send(SIGTERM)
                #expect(await exitStatus == 0)
                // The receiving thread may read the last datagrams a while after the exit.
                for _ in 0..<200 where !systemd.messages.contains("STOPPING=1") {
                    try await Task.sleep(for: .milliseconds(50))
                }

                let messages = systemd.messages
                let ready = try #require(messages.firstIndex(of: "READY=1"), "no READY=1 in \(messages)")
                let status = try #require(messages.firstIndex { $0.hasPrefix("STATUS=") }, "no STATUS= in \(messages)")
                #expect(status < ready, "the first check's status comes with READY")
                #expect(messages[status].contains("1.2"), "\(messages[status])")
                #expect(messages.filter { $0 == "WATCHDOG=1" }.count >= 2, "pings every 100 ms: \(messages)")
                #expect(messages.last == "STOPPING=1", "\(messages.suffix(3))")
            }
        }
    }

    @Test("the environment: a socket path or @name, the watchdog only for this process")
    func environment() {
        #expect(
            SystemdNotifier.fromEnvironment(["NOTIFY_SOCKET": "/run/systemd/notify"])?.socketPath
                == "/run/systemd/notify")
        #expect(SystemdNotifier.fromEnvironment(["NOTIFY_SOCKET": "@abstract"])?.socketPath == "@abstract")
        #expect(SystemdNotifier.fromEnvironment(["NOTIFY_SOCKET": "relative"]) == nil)
        #expect(SystemdNotifier.fromEnvironment([:]) == nil)
        #expect(SystemdNotifier.watchdogInterval(["WATCHDOG_USEC": "30000000"]) == .seconds(15))
        #expect(
            SystemdNotifier.watchdogInterval(["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"]) == nil,
            "another process's watchdog")
        #expect(SystemdNotifier.watchdogInterval(["WATCHDOG_USEC": "0"]) == nil)
    }
}
