import Foundation
import StorageServer
import Testing

@testable import Transport

/// Each transfer learns its connection's socket (to acknowledge what it reads at once), from the
/// loop's record of every socket its multi handle opened; the transport closes those sockets
/// itself, so none may outlive the transport.
@Suite(.timeLimit(.minutes(3)))
struct LoopSocketsTests {
    /// A listening socket on loopback and a client connected to it, closed after `body`.
    static func withConnectedPair(_ body: (_ client: Int32, _ listenPort: Int) throws -> Void) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer {
            close(listener)
            close(client)
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let size = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, size) }
        }
        try #require(bound == 0 && listen(listener, 1) == 0)
        var length = size
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, size) }
        }
        try #require(connected == 0)
        try body(client, Int(UInt16(bigEndian: address.sin_port)))
    }

    @Test func aSocketIsFoundByItsPortsUntilItCloses() throws {
        try Self.withConnectedPair { client, listenPort in
            let ports = try #require(LoopSockets.ports(of: client))
            #expect(ports.remote == listenPort)
            #expect(ports.local != listenPort && ports.local > 0)
            let sockets = LoopSockets()
            sockets.opened(client)
            #expect(sockets.socket(local: ports.local, remote: listenPort + 1) == nil, "another server's port")
            #expect(sockets.socket(local: ports.local, remote: listenPort) == client)
            sockets.closed(client)
            #expect(sockets.socket(local: ports.local, remote: listenPort) == nil)
        }
        // Not connected (or not a socket at all): no ports, so never an answer.
        let loose = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(loose) }
        #expect(LoopSockets.ports(of: loose) == nil)
        #expect(LoopSockets.ports(of: -1) == nil)
    }

    /// Transfers over a few connections: each connection's socket is recorded, looked up by the
    /// transfers that ran on it, and closed by the transport's shutdown (no descriptor leaks,
    /// none is closed twice).
    @Test func everySocketIsLookedUpByItsTransfersAndClosedAtShutdown() async throws {
        try await withServedFixture { server, fixture in
            try fixture.serve("a.bin", randomBytes(300_000))
            let transport = try makeTransport()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<12 {
                    group.addTask {
                        let response = try await transport.data(for: HTTPRequest(url: server.url(for: "a.bin")))
                        #expect(response.body.count == 300_000)
                    }
                }
                try await group.waitForAll()
            }
            let recorded = transport.loops.flatMap { $0.sockets.snapshot }
            #expect(!recorded.isEmpty)
            // A kept connection was looked up by the transfers on it: its ports are known.
            #expect(recorded.allSatisfy { $0.value != nil }, "\(recorded)")
            let inodes = Set(
                recorded.map { socket, _ in
                    var info = stat()
                    return fstat(socket, &info) == 0 ? info.st_ino : 0
                })
            #expect(!inodes.contains(0), "every recorded socket is open")
            await transport.shutdown()
            #expect(transport.loops.allSatisfy { $0.sockets.snapshot.isEmpty })
            let open = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").compactMap {
                try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0)
            }
            let leaked = inodes.filter { open.contains("socket:[\($0)]") }
            #expect(leaked.isEmpty, "sockets still open after shutdown: \(leaked)")
        }
    }
}
