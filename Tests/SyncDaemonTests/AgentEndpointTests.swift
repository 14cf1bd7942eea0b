import Foundation
import Logging
import ServiceLifecycleTestKit
import Synchronization
import Testing

@testable import SyncDaemon

#if canImport(Glibc)
    import Glibc
#endif

@Suite struct AgentEndpointTests {
    // MARK: Addresses

    @Test(arguments: [
        ("9464", AgentEndpoint.Address.Host.ipv4("127.0.0.1"), UInt16(9464), true, "127.0.0.1:9464"),
        (":9464", .ipv4("127.0.0.1"), 9464, true, "127.0.0.1:9464"),
        ("localhost:9464", .ipv4("127.0.0.1"), 9464, true, "127.0.0.1:9464"),
        ("LocalHost:80", .ipv4("127.0.0.1"), 80, true, "127.0.0.1:80"),
        ("127.0.0.1:9464", .ipv4("127.0.0.1"), 9464, true, "127.0.0.1:9464"),
        ("127.0.0.2:1", .ipv4("127.0.0.2"), 1, true, "127.0.0.2:1"),
        ("[::1]:9464", .ipv6("::1"), 9464, true, "[::1]:9464"),
        ("[0:0:0:0:0:0:0:1]:9464", .ipv6("::1"), 9464, true, "[::1]:9464"),
        ("0.0.0.0:9464", .ipv4("0.0.0.0"), 9464, false, "0.0.0.0:9464"),
        ("[::]:0", .ipv6("::"), 0, false, "[::]:0"),
        ("192.0.2.7:65535", .ipv4("192.0.2.7"), 65535, false, "192.0.2.7:65535"),
        ("[2001:DB8::7]:09464", .ipv6("2001:db8::7"), 9464, false, "[2001:db8::7]:9464"),
    ])
    func parsesAddress(
        text: String, host: AgentEndpoint.Address.Host, port: UInt16, isLoopback: Bool, description: String
    ) throws {
        let address = try AgentEndpoint.Address(parsing: text)
        #expect(address.host == host)
        #expect(address.port == port)
        #expect(address.isLoopback == isLoopback)
        #expect(address.description == description)
    }

    @Test(arguments: [
        ("", "empty; write a port (9464)"),
        ("example.com:9464", "'example.com' is not an IP address; write one (127.0.0.1, [::1], or 0.0.0.0"),
        ("256.0.0.1:9464", "'256.0.0.1' is not an IP address"),
        ("localhost", "no port; write localhost:9464"),
        ("127.0.0.1", "no port; write 127.0.0.1:9464"),
        ("127.0.0.1:", "no port after ':'"),
        ("127.0.0.1:http", "port 'http' is not a number; write 0 to 65535"),
        ("127.0.0.1:65536", "port 65536 is out of range; write 0 to 65535"),
        ("99999", "port 99999 is out of range"),
        ("0000009464", "port 0000009464 is out of range"),
        ("::1:9464", "an IPv6 address goes in brackets, such as [::1]:9464"),
        ("[::1", "no ']' after the IPv6 address"),
        ("[::1]", "no port; write [::1]:9464"),
        ("[::1]9464", "expected ':' and a port after ']'"),
        ("[127.0.0.1]:9464", "'127.0.0.1' is not an IPv6 address"),
        (" 9464", "contains a space"),
    ])
    func refusesAddressNamingItAndTheFix(text: String, problem: String) {
        #expect {
            try AgentEndpoint.Address(parsing: text)
        } throws: { error in
            guard let error = error as? AgentEndpointError else { return false }
            return error.code == .invalidAddress
                && error.message.hasPrefix("endpoint address '\(text)': ")
                && error.message.contains(problem)
        }
    }

    // MARK: Routes over HTTP

    @Test func servesMetricsInTheTextFormat() async throws {
        let metrics = AgentMetrics()
        metrics.storage(named: "alpha").checkFailed(code: "network", consecutiveFailures: 2)
        try await withEndpoint(metrics: metrics) { address in
            let get = try await RawHTTP.send(method: "GET", path: "/metrics", to: address)
            #expect(get.status == 200)
            #expect(get.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8")
            let scrape = try Exposition(text: get.body)
            #expect(scrape.value("sync_agent_check_failures_total", ["storage": "alpha", "code": "network"]) == 1)
            #expect(scrape.value("sync_agent_consecutive_failures", ["storage": "alpha"]) == 2)

            // Each scrape is fresh.
            metrics.storage(named: "alpha").checkFailed(code: "network", consecutiveFailures: 3)
            let again = try Exposition(
                text: try await RawHTTP.send(method: "GET", path: "/metrics?x=1", to: address).body)
            #expect(again.value("sync_agent_check_failures_total", ["storage": "alpha", "code": "network"]) == 2)

            let head = try await RawHTTP.send(method: "HEAD", path: "/metrics", to: address)
            #expect(head.status == 200)
            #expect(head.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8")
            #expect(head.headers["content-length"] == String(metrics.exposition().count))
            #expect(head.body.isEmpty)
        }
    }

    @Test func healthzAnswersOk() async throws {
        try await withEndpoint { address in
            let response = try await RawHTTP.send(method: "GET", path: "/healthz", to: address)
            #expect(response.status == 200)
            #expect(response.body == "ok\n")
            #expect(response.headers["content-type"] == "text/plain; charset=utf-8")
        }
    }

    @Test func readyzWaitsForEveryStorage() async throws {
        let health = AgentHealth()
        try await withEndpoint(health: health) { address in
            var response = try await RawHTTP.send(method: "GET", path: "/readyz", to: address)
            #expect(response.status == 503)
            #expect(response.body == "not ready: no storages yet\n")

            health.setReady(storage: "beta", false)
            health.setReady(storage: "alpha", false)
            health.setReady(storage: "gamma", true)
            response = try await RawHTTP.send(method: "GET", path: "/readyz", to: address)
            #expect(response.status == 503)
            #expect(response.body == "not ready: alpha, beta\n")

            health.setReady(storage: "beta", true)
            health.remove(storage: "alpha")
            response = try await RawHTTP.send(method: "GET", path: "/readyz", to: address)
            #expect(response.status == 200)
            #expect(response.body == "ok\n")

            health.setReady(storage: "gamma", false)
            response = try await RawHTTP.send(method: "HEAD", path: "/readyz", to: address)
            #expect(response.status == 503)
            #expect(response.body.isEmpty)
        }
    }

    /// A running storage beats each time its database answers; one silent for longer than the
    /// stall limit makes `/healthz` 503 and is named, until it answers again or its loop ends.
    @Test func healthzNamesTheStoragesWhoseDatabaseStoppedAnswering() async throws {
        let clock = Mutex(ContinuousClock.now)
        let health = AgentHealth(stallLimit: .seconds(60), now: { clock.withLock { $0 } })
        func advance(_ seconds: Int) { clock.withLock { $0 += .seconds(seconds) } }
        #expect(health.beatInterval == .seconds(5))
        try await withEndpoint(health: health) { address in
            func healthz() async throws -> (Int, String) {
                let response = try await RawHTTP.send(method: "GET", path: "/healthz", to: address)
                return (response.status, response.body)
            }
            health.setReady(storage: "gamma", false) // known, but no loop beats for it
            let alpha = health.register(storage: "alpha")
            let beta = health.register(storage: "beta")
            health.startBeats(alpha)
            health.startBeats(beta)
            advance(60)
            #expect(try await healthz() == (200, "ok\n"), "60 s is the limit, not past it")
            advance(1)
            let (status, body) = try await healthz()
            #expect(status == 503)
            #expect(
                body.hasPrefix(
                    "unhealthy: the state databases of storages alpha (61.0 s), beta (61.0 s) have not answered (their reads wait for a thread:"
                ),
                "\(body)")
            #expect(body.contains("docs/operations.md"))

            health.beat(alpha)
            advance(9)
            #expect(
                try await healthz().1.hasPrefix(
                    "unhealthy: the state database of storage beta has not answered for 70.0 s (its reads wait for a thread"
                )
            )
            #expect(health.stalledStorages().map(\.storage) == ["beta"])
            let head = try await RawHTTP.send(method: "HEAD", path: "/healthz", to: address)
            #expect(head.status == 503 && head.body.isEmpty)

            // Its loop ended (an error stopped it): not stalled; /readyz still knows it.
            health.stopBeats(beta)
            #expect(try await healthz() == (200, "ok\n"))
            health.beat(beta)
            health.remove(storage: "alpha")
            health.beat(alpha)
            health.setReady(alpha, false)
            health.startBeats(alpha)
            advance(120)
            #expect(
                try await healthz() == (200, "ok\n"),
                "a removed storage is forgotten, and a late beat does not bring it back")
            #expect(health.notReadyStorages == ["beta", "gamma"], "nor do its other reports")

            // A replacement's registration is the only one that counts; it keeps the readiness.
            health.setReady(beta, true)
            let beta2 = health.register(storage: "beta")
            health.setReady(beta, false)
            #expect(health.notReadyStorages == ["gamma"])
            health.startBeats(beta)
            advance(61)
            #expect(try await healthz() == (200, "ok\n"), "the old loop's beats do not count")
            health.startBeats(beta2)
            advance(61)
            #expect(try await healthz().1.contains("storage beta has not answered for 61.0 s"))
        }
    }

    /// The watchdog is pinged while no storage is stalled, and not while one is, so systemd
    /// restarts a stalled agent; the stall and the recovery are logged once each.
    @Test func aStallStopsTheWatchdogAndIsLogged() async throws {
        let clock = Mutex(ContinuousClock.now)
        let health = AgentHealth(stallLimit: .milliseconds(120), now: { clock.withLock { $0 } })
        final class Counter: Sendable { let value = Mutex(0) }
        let counter = Counter()
        let (logger, log) = CapturingLogHandler.logger()
        let watchdog = Task {
            await Agent.feedWatchdog(
                { if $0 == "WATCHDOG=1" { counter.value.withLock { $0 += 1 } } }, every: .milliseconds(5),
                unlessStalled: health
            )
        }
        let reporter = Task { await Agent.reportStalls(health, watchdog: true, to: logger) }
        defer {
            watchdog.cancel()
            reporter.cancel()
        }
        func pingsDuring(_ wait: Duration) async throws -> Int {
            let before = counter.value.withLock { $0 }
            try await Task.sleep(for: wait)
            return counter.value.withLock { $0 } - before
        }
        let docs = health.register(storage: "docs")
        health.startBeats(docs)
        #expect(try await pingsDuring(.milliseconds(200)) > 0)
        clock.withLock { $0 += .seconds(1) }
        try await Task.sleep(for: .milliseconds(20)) // a ping that had passed the test may still land
        #expect(try await pingsDuring(.milliseconds(200)) == 0, "pinged through a stall")
        for _ in 0..<200 where !log.all.contains(where: { $0.level == .error }) {
            try await Task.sleep(for: .milliseconds(10))
        }
        let stall = try #require(log.all.first { $0.level == .error }, "\(log.all)")
        #expect(
            stall.message.hasPrefix("the state database of storage docs has not answered for 1.0 s"), "\(stall.message)"
        )
        #expect(stall.message.hasSuffix("; systemd's watchdog is not pinged while it lasts"))
        #expect(stall.metadata["stalled"] == "docs")

        health.beat(docs)
        #expect(try await pingsDuring(.milliseconds(200)) > 0, "pings again once the database answers")
        for _ in 0..<200 where !log.all.contains(where: { $0.level == .info }) {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(
            log.all.map(\.level) == [.error, .info] && log.all.last?.metadata["storage"] == "docs",
            "one line each way: \(log.all)")
    }

    @Test func otherPathsAre404AndOtherMethods405() async throws {
        try await withEndpoint { address in
            let missing = try await RawHTTP.send(method: "GET", path: "/metric", to: address)
            #expect(missing.status == 404)
            #expect(missing.body == "not found: /metric; the endpoint serves /metrics, /healthz and /readyz\n")

            for (method, path) in [("POST", "/metrics"), ("DELETE", "/healthz"), ("PUT", "/readyz")] {
                let refused = try await RawHTTP.send(method: method, path: path, to: address)
                #expect(refused.status == 405, "\(method) \(path)")
                #expect(refused.headers["allow"] == "GET, HEAD")
                #expect(refused.body == "\(method) not allowed on \(path); use GET or HEAD\n")
            }
        }
    }

    @Test func servesOnIPv6Loopback() async throws {
        try await withEndpoint(address: "[::1]:0") { address in
            #expect(address.host == .ipv6("::1"))
            #expect(address.port != 0)
            let response = try await RawHTTP.send(method: "GET", path: "/healthz", to: address)
            #expect(response.status == 200)
        }
    }

    // MARK: Hostile clients

    /// Clients that send request lines of a megabyte, while others hold 100 idle connections:
    /// neither keeps /healthz from answering at once, and each huge line's connection is ended
    /// after 8 KiB. (FlyingFox spent minutes of CPU on two such lines and ran out of descriptors
    /// at a thousand idle ones, stopping the agent.)
    @Test func hugeRequestsAndIdleConnectionsDoNotStopTheEndpoint() async throws {
        try await withEndpoint { address in
            let idle = try (0..<100).map { _ in try RawHTTP.connected(to: address) }
            defer { for fd in idle { close(fd) } }
            let huge = Array("GET /".utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: 1 << 20)
            let ended = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        try await withCheckedThrowingContinuation { continuation in
                            Thread {
                                continuation.resume(
                                    with: Result {
                                        let fd = try RawHTTP.connected(to: address)
                                        defer { close(fd) }
                                        var sent = 0
                                        while sent < huge.count {
                                            let count = huge[sent...].withUnsafeBytes {
                                                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                                            }
                                            // The server closed it: what this test wants.
                                            if count <= 0 { return true }
                                            sent += count
                                        }
                                        var byte: UInt8 = 0
                                        return recv(fd, &byte, 1, 0) >= 0
                                    })
                            }.start()
                        }
                    }
                }
                let health = try await RawHTTP.send(method: "GET", path: "/healthz", to: address)
                #expect(health.status == 200 && health.body == "ok\n")
                return try await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(ended == [true, true, true, true], "each huge line's connection was ended")
            let after = try await RawHTTP.send(method: "GET", path: "/metrics", to: address)
            #expect(after.status == 200)
        }
    }

    /// A burst of clients that each send a request as they connect, behind a full table of idle
    /// connections: every request is answered. (The accept loop took the whole burst before
    /// reading any, and made room by closing the oldest, whose request had come: a reset.)
    @Test func aBurstBehindIdleConnectionsIsAnsweredWhole() async throws {
        try await withEndpoint { address in
            let idle = try (0..<64).map { _ in try RawHTTP.connected(to: address) }
            defer { for fd in idle { close(fd) } }
            let request = Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
            var burst: [Int32] = []
            defer { for fd in burst { close(fd) } }
            for _ in 0..<200 {
                let fd = try RawHTTP.connected(to: address)
                burst.append(fd)
                _ = request.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
            var answered = 0
            for fd in burst {
                var buffer = [UInt8](repeating: 0, count: 512)
                let count = recv(fd, &buffer, buffer.count, 0)
                if count > 0, String(decoding: buffer[..<count], as: UTF8.self).hasPrefix("HTTP/1.1 200") {
                    answered += 1
                }
            }
            #expect(answered == 200)
        }
    }

    /// A request head past 8 KiB, ended in time, is answered 431; a malformed request line 400.
    @Test func anOverlongHeadIs431AndAMalformedLine400() async throws {
        try await withEndpoint { address in
            let long = try await RawHTTP.send(
                method: "GET", path: "/healthz?" + String(repeating: "q", count: 9000), to: address)
            #expect(long.status == 431)
            let bad = try await RawHTTP.send(method: "get", path: "/healthz", to: address)
            #expect(bad.status == 400)
        }
    }

    // MARK: Lifecycle

    @Test func aPortInUseFailsNamingTheAddress() async throws {
        try await withEndpoint { taken in
            let second = AgentEndpoint(address: taken, metrics: AgentMetrics(), health: AgentHealth())
            await #expect {
                try await second.run(onListening: { _ in })
            } throws: { error in
                guard let error = error as? AgentEndpointError else { return false }
                return error.code == .listenFailed
                    && error.message
                        == "endpoint \(taken): could not listen; another process listens on that port; stop it or pick another port"
            }
        }
    }

    @Test func cancellingStopsListeningSoThePortIsFreeAgain() async throws {
        let used = try await withEndpoint { $0 }
        // Bound again at the same port: the first endpoint closed its socket.
        let again = try await withEndpoint(address: used.description) { $0 }
        #expect(again == used)
    }

    @Test func runAsAServiceEndsOnGracefulShutdown() async throws {
        let port = try await withEndpoint { $0.port }
        let endpoint = AgentEndpoint(
            address: AgentEndpoint.Address(port: port), metrics: AgentMetrics(), health: AgentHealth())
        try await testGracefulShutdown { trigger in
            let service = Task { try await endpoint.run() }
            // Until it answers; a never-answering endpoint fails at the last attempt.
            var answered: RawHTTP.Response?
            for attempt in 1...200 where answered == nil {
                do {
                    answered = try await RawHTTP.send(method: "GET", path: "/healthz", to: endpoint.address)
                } catch  where attempt < 200 {
                    try await Task.sleep(for: .milliseconds(25))
                }
            }
            #expect(answered?.status == 200)
            trigger.triggerGracefulShutdown()
            try await service.value
        }
    }

    // MARK: Helpers

    /// Runs an endpoint at `address` (default: loopback, any free port) while `body` runs with
    /// the bound address, then cancels it and checks that it ended without error.
    func withEndpoint<T: Sendable>(
        address: String = "127.0.0.1:0", metrics: AgentMetrics = AgentMetrics(), health: AgentHealth = AgentHealth(),
        _ body: (AgentEndpoint.Address) async throws -> T
    ) async throws -> T {
        let endpoint = AgentEndpoint(
            address: try AgentEndpoint.Address(parsing: address), metrics: metrics, health: health)
        let (listening, continuation) = AsyncStream<AgentEndpoint.Address>.makeStream()
        let server = Task {
            defer { continuation.finish() }
            try await endpoint.run(onListening: { continuation.yield($0) })
        }
        var addresses = listening.makeAsyncIterator()
        guard let bound = await addresses.next() else {
            try await server.value
            throw RawHTTP.Failure(message: "the endpoint at \(address) returned without listening")
        }
        let result: Result<T, any Error>
        do {
            result = .success(try await body(bound))
        } catch {
            result = .failure(error)
        }
        server.cancel()
        try await server.value
        return try result.get()
    }
}

/// HTTP/1.1 over a plain socket, one request per connection, on a thread of its own (blocking
/// calls stay off the cooperative pool): the bytes the endpoint sends, not a client's reading of them.
enum RawHTTP {
    struct Response: Sendable {
        var status: Int
        /// Names lower-cased.
        var headers: [String: String]
        var body: String
    }

    struct Failure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    static func send(method: String, path: String, to address: AgentEndpoint.Address) async throws -> Response {
        let request = "\(method) \(path) HTTP/1.1\r\nHost: \(address)\r\nConnection: close\r\n\r\n"
        return try await withCheckedThrowingContinuation { continuation in
            // A thread of its own: on Linux Dispatch's global queues are the cooperative pool.
            Thread {
                continuation.resume(with: Result { try parse(exchange(Array(request.utf8), with: address)) })
            }.start()
        }
    }

    private static func exchange(_ request: [UInt8], with address: AgentEndpoint.Address) throws -> [UInt8] {
        func failure(_ call: String) -> Failure {
            Failure(message: "\(call) \(address): \(String(cString: strerror(errno)))")
        }
        let fd = try connected(to: address)
        defer { close(fd) }
        var sent = 0
        while sent < request.count {
            let count = request[sent...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard count > 0 else { throw failure("send") }
            sent += count
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count >= 0 else { throw failure("recv") }
            if count == 0 { return received }
            received += buffer[..<count]
        }
    }

    /// A blocking socket connected to `address`, reads timing out after 10 s; the caller closes it.
    static func connected(to address: AgentEndpoint.Address) throws -> Int32 {
        func failure(_ call: String) -> Failure {
            Failure(message: "\(call) \(address): \(String(cString: strerror(errno)))")
        }
        let family: Int32
        switch address.host {
        case .ipv4: family = AF_INET
        case .ipv6: family = AF_INET6
        }
        let fd = socket(family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw failure("socket") }
        var keep = false
        defer { if !keep { close(fd) } }
        // A server that never answers fails the test instead of hanging it.
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        guard setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size)) == 0 else {
            throw failure("setsockopt")
        }

        let connected: Int32
        switch address.host {
        case .ipv4(let ip):
            var socketAddress = sockaddr_in()
            socketAddress.sin_family = sa_family_t(AF_INET)
            socketAddress.sin_port = address.port.bigEndian
            guard inet_pton(AF_INET, ip, &socketAddress.sin_addr) == 1 else { throw failure("inet_pton") }
            connected = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        case .ipv6(let ip):
            var socketAddress = sockaddr_in6()
            socketAddress.sin6_family = sa_family_t(AF_INET6)
            socketAddress.sin6_port = address.port.bigEndian
            guard inet_pton(AF_INET6, ip, &socketAddress.sin6_addr) == 1 else { throw failure("inet_pton") }
            connected = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        }
        guard connected == 0 else { throw failure("connect") }
        keep = true
        return fd
    }

    private static func parse(_ bytes: [UInt8]) throws -> Response {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let end = text.range(of: "\r\n\r\n") else { throw Failure(message: "no end of headers in: \(text)") }
        let lines = text[..<end.lowerBound].components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, statusParts[0] == "HTTP/1.1", let status = Int(statusParts[1]) else {
            throw Failure(message: "not an HTTP/1.1 status line: \(lines[0])")
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { throw Failure(message: "not a header line: \(line)") }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        return Response(status: status, headers: headers, body: String(text[end.upperBound...]))
    }
}
