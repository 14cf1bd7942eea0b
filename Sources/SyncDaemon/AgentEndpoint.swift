import Foundation
import Logging
import ServiceLifecycle
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The agent's HTTP endpoint: `/metrics` for Prometheus, `/healthz` and `/readyz` for probes.
///
/// | Route | Answer |
/// | --- | --- |
/// | `GET /metrics` | 200, every metric of ``metrics`` in the text format (`text/plain; version=0.0.4`). |
/// | `GET /healthz` | 200 `ok` while every running storage's state database answers; 503 naming the storages whose reads have waited longer than ``AgentHealth/stallLimit``. |
/// | `GET /readyz` | 200 `ok` once every storage holds a complete version; otherwise 503 naming the storages that do not. |
///
/// `HEAD` answers as `GET` without the body; other methods get 405, other paths 404.
///
/// It listens only where the config says (see ``Address``), on loopback unless a host is written
/// out. As a `Service` it serves until cancelled or until graceful shutdown reaches it; a
/// `ServiceGroup` shuts its services down last to first, so list the endpoint first to keep
/// `/metrics` up while the storages stop. Tests and the fleet simulation call
/// ``run(onListening:)`` with port 0 to learn the port picked.
public struct AgentEndpoint: Service {
    /// Where to listen.
    public var address: Address
    /// What `/metrics` serves.
    public let metrics: AgentMetrics
    /// What `/readyz` answers from.
    public let health: AgentHealth
    /// Logs where it listens (info). Default: no logging.
    public var logger: Logger

    /// An endpoint for `address`; it listens once run.
    public init(
        address: Address, metrics: AgentMetrics, health: AgentHealth,
        logger: Logger = Logger(label: "sync-agent.endpoint", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.address = address
        self.metrics = metrics
        self.health = health
        self.logger = logger
    }

    /// Serves until the task is cancelled or graceful shutdown is triggered.
    public func run() async throws {
        try await cancelWhenGracefulShutdown {
            try await self.run(onListening: { _ in })
        }
    }

    /// Listens, gives the bound address (with the port picked, for port 0) to `onListening`,
    /// then serves until the task is cancelled, and returns normally then.
    ///
    /// - Throws: ``AgentEndpointError`` with code `listenFailed` when the address cannot be
    ///   bound (the port is in use, say).
    public func run(onListening: @escaping @Sendable (Address) async -> Void) async throws {
        let handler = EndpointHandler(metrics: metrics, health: health)
        let server: EndpointServer
        do {
            server = try EndpointServer(address: address, handler: { handler.answer($0) })
        } catch {
            throw listenFailed(errno: error.code)
        }
        do {
            try server.start()
        } catch {
            throw AgentEndpointError(
                code: .serverFailed, message: "endpoint \(address): \(error)",
                underlying: POSIXError(POSIXErrorCode(rawValue: error.errno) ?? .EAGAIN))
        }
        await withTaskCancellationHandler {
            logger.info("serving /metrics, /healthz and /readyz", metadata: ["http": "http://\(server.bound)"])
            await onListening(server.bound)
            await server.finished()
        } onCancel: {
            server.stop()
        }
    }

    /// Binds and listens on the address once, then lets go: a port in use (or an address not
    /// this machine's) is found before any storage starts, as a one-line configuration problem.
    ///
    /// - Throws: ``AgentEndpointError`` with code `listenFailed`, naming the address and the fix.
    public func checkCanListen() throws(AgentEndpointError) {
        do {
            let (fd, _) = try EndpointServer.listen(on: address)
            close(fd)
        } catch {
            throw listenFailed(errno: error.code)
        }
    }

    private func listenFailed(errno code: Int32) -> AgentEndpointError {
        let remedy: String
        switch code {
        case EADDRINUSE: remedy = "another process listens on that port; stop it or pick another port"
        case EADDRNOTAVAIL:
            remedy = "the address is not one of this machine's; pick one of its addresses, or 0.0.0.0 for all"
        case EACCES: remedy = "ports below 1024 need privileges; pick a port above 1023"
        default: remedy = "check that the address is one of this machine's and the port is free"
        }
        return AgentEndpointError(
            code: .listenFailed, message: "endpoint \(address): could not listen; \(remedy)",
            underlying: POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO))
    }
}

// MARK: - Address

extension AgentEndpoint {
    /// An IP address and port to listen on, as the config file writes it.
    ///
    /// | Written | Listens on |
    /// | --- | --- |
    /// | `9464` or `:9464` | `127.0.0.1:9464`: loopback when no host is written |
    /// | `localhost:9464` | `127.0.0.1:9464` (not looked up) |
    /// | `127.0.0.1:9464`, `[::1]:9464` | that loopback address |
    /// | `0.0.0.0:9464`, `[::]:9464` | every interface: others can scrape it |
    /// | `192.0.2.7:9464`, `[2001:db8::7]:9464` | that interface |
    ///
    /// Host names other than `localhost` are refused: the agent does not resolve names to pick
    /// an interface. Port 0 picks any free port (for tests).
    public struct Address: Sendable, Hashable, CustomStringConvertible {
        /// An IP address in its canonical text.
        public enum Host: Sendable, Hashable {
            /// Dotted decimal, such as `127.0.0.1`.
            case ipv4(String)
            /// Without brackets, such as `::1`.
            case ipv6(String)
        }

        /// Where to listen.
        public var host: Host
        /// The TCP port; 0 picks a free one.
        public var port: UInt16

        /// `port` on `host`; default host: IPv4 loopback.
        public init(host: Host = .ipv4("127.0.0.1"), port: UInt16) {
            self.host = host
            self.port = port
        }

        /// Parses an address as written in the config file or on the command line (see the table
        /// above).
        ///
        /// - Throws: ``AgentEndpointError`` with code `invalidAddress`, naming `text` and a form
        ///   that works.
        public init(parsing text: String) throws(AgentEndpointError) {
            func invalid(_ problem: String) -> AgentEndpointError {
                AgentEndpointError(code: .invalidAddress, message: "endpoint address '\(text)': \(problem)")
            }
            guard !text.isEmpty else {
                throw invalid("empty; write a port (9464) to listen on loopback, or host:port (127.0.0.1:9464)")
            }
            guard !text.contains(where: \.isWhitespace) else {
                throw invalid("contains a space; write it without spaces, such as 127.0.0.1:9464")
            }
            if text.contains("://") {
                throw invalid("give the address alone, without a scheme or path, such as 127.0.0.1:9464")
            }
            let hostText: Substring
            let portText: Substring
            if text.allSatisfy({ $0.isASCII && $0.isNumber }) {
                hostText = ""
                portText = Substring(text)
            } else if text.hasPrefix("[") {
                guard let close = text.firstIndex(of: "]") else {
                    throw invalid("no ']' after the IPv6 address; write it as [::1]:9464")
                }
                let rest = text[text.index(after: close)...]
                guard rest.first == ":" else {
                    throw invalid(
                        rest.isEmpty
                            ? "no port; write [::1]:9464" : "expected ':' and a port after ']'; write [::1]:9464")
                }
                hostText = text[text.index(after: text.startIndex)..<close]
                portText = rest.dropFirst()
                guard let ip = Self.canonical(hostText, family: AF_INET6) else {
                    throw invalid("'\(hostText)' is not an IPv6 address; write one in brackets, such as [::1]:9464")
                }
                self.init(host: .ipv6(ip), port: try Self.port(portText, invalid))
                return
            } else {
                guard let colon = text.lastIndex(of: ":") else {
                    throw invalid("no port; write \(text):9464, or a port alone (9464) to listen on loopback")
                }
                hostText = text[..<colon]
                portText = text[text.index(after: colon)...]
                if hostText.contains(":") {
                    throw invalid("an IPv6 address goes in brackets, such as [::1]:9464")
                }
            }
            let port = try Self.port(portText, invalid)
            if hostText.isEmpty || hostText.lowercased() == "localhost" {
                self.init(host: .ipv4("127.0.0.1"), port: port)
            } else if let ip = Self.canonical(hostText, family: AF_INET) {
                self.init(host: .ipv4(ip), port: port)
            } else {
                throw invalid(
                    "'\(hostText)' is not an IP address; write one (127.0.0.1, [::1], or 0.0.0.0 for every interface) or localhost; host names are not looked up"
                )
            }
        }

        /// Whether only this machine can connect: `127.0.0.0/8` or `::1`.
        public var isLoopback: Bool {
            switch host {
            case .ipv4(let ip): ip.hasPrefix("127.")
            case .ipv6(let ip): ip == "::1"
            }
        }

        /// `127.0.0.1:9464` or `[::1]:9464`.
        public var description: String {
            switch host {
            case .ipv4(let ip): "\(ip):\(port)"
            case .ipv6(let ip): "[\(ip)]:\(port)"
            }
        }

        /// Whether the host is an IPv6 address.
        var isIPv6: Bool {
            if case .ipv6 = host { return true }
            return false
        }

        private static func port(_ text: Substring, _ invalid: (String) -> AgentEndpointError)
            throws(AgentEndpointError) -> UInt16
        {
            guard !text.isEmpty else {
                throw invalid("no port after ':'; write one, such as 9464")
            }
            guard text.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                throw invalid("port '\(text)' is not a number; write 0 to 65535 (0 picks a free port)")
            }
            guard text.count <= 5, let port = UInt16(text) else {
                throw invalid("port \(text) is out of range; write 0 to 65535 (0 picks a free port)")
            }
            return port
        }

        /// The address in `inet_ntop`'s canonical text, or nil when `inet_pton` refuses it.
        private static func canonical(_ text: Substring, family: Int32) -> String? {
            var bytes = [UInt8](repeating: 0, count: 16)
            guard inet_pton(family, String(text), &bytes) == 1 else { return nil }
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            guard inet_ntop(family, bytes, &buffer, socklen_t(buffer.count)) != nil else { return nil }
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }
}

// MARK: - Errors

/// Why the endpoint's address was refused or it could not serve.
public struct AgentEndpointError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case invalidAddress
            case listenFailed
            case serverFailed
        }

        private let value: Value

        /// The address text is not one ``AgentEndpoint/Address/init(parsing:)`` reads.
        public static let invalidAddress = Code(value: .invalidAddress)
        /// The socket could not be bound or did not start listening.
        public static let listenFailed = Code(value: .listenFailed)
        /// The server could not start serving (no thread could be made for it).
        public static let serverFailed = Code(value: .serverFailed)

        public var description: String { "\(value)" }
    }

    /// The kind of failure.
    public var code: Code
    /// What went wrong, naming the address, and how to fix it.
    public var message: String
    /// The error underneath, such as the `POSIXError` of the call that failed.
    public var underlying: (any Error)?

    /// An error of `code` with `message`, wrapping `underlying` when there is one.
    public init(code: Code, message: String, underlying: (any Error)? = nil) {
        self.code = code
        self.message = message
        self.underlying = underlying
    }

    public var description: String {
        guard let underlying else { return "\(code): \(message)" }
        return "\(code): \(message) (\(underlying))"
    }
}

// MARK: - Health

/// Which storages hold a complete version, for `/readyz`, and whether each running storage's
/// work still moves, for `/healthz` and systemd's watchdog. Storage loops report here; a reload
/// removes the storages it drops.
///
/// **Liveness.** A running storage reads its state database every ``beatInterval`` and calls
/// ``beat(storage:)`` when the read comes back. A storage whose last beat is older than
/// ``stallLimit`` is *stalled*. The read goes through the queue that all of the storage's work
/// goes through (GRDB's dispatch queues), so it stops when that work stops: at a task limit
/// reached after the start, libdispatch waits for a thread for ever while Swift's own threads
/// and the endpoint's go on, so a beat from the scheduler alone said "ok" through the stall.
public final class AgentHealth: Sendable {
    private struct Entry {
        var ready = false
        /// When the storage's database last answered; nil while no loop runs for it.
        var lastBeat: ContinuousClock.Instant?
        /// The ``Registration`` whose reports count; 0 for none.
        var owner = 0
    }

    /// A storage loop's right to report: what a loop reports after its storage was removed, or
    /// registered again by its replacement, is ignored (a reload's removed storage stayed in
    /// `/readyz` as not ready when its loop's first report came after the removal).
    public struct Registration: Sendable {
        let storage: String
        let owner: Int
    }

    private let storages = Mutex<[String: Entry]>([:])
    private let registrations = Mutex(0)
    /// How long a running storage's database may go without answering before it is stalled.
    public let stallLimit: Duration
    /// How often a running storage reads its database: a twelfth of ``stallLimit``, 5 s by
    /// default, so that one slow read is never a stall.
    public let beatInterval: Duration
    private let now: @Sendable () -> ContinuousClock.Instant

    /// The default stall limit: long enough for the slowest read of a busy machine, short
    /// enough for a probe to restart a stalled agent within minutes.
    public static let defaultStallLimit: Duration = .seconds(60)

    /// No storages yet: not ready. `now` is the clock the beats are read on (tests move it).
    public init(
        stallLimit: Duration = AgentHealth.defaultStallLimit,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }
    ) {
        self.stallLimit = max(stallLimit, .milliseconds(12))
        self.beatInterval = self.stallLimit / 12
        self.now = now
    }

    /// Records whether `storage` holds a complete version; the first call makes it known.
    public func setReady(storage: String, _ ready: Bool) {
        storages.withLock { $0[storage, default: Entry()].ready = ready }
    }

    /// Forgets `storage`.
    public func remove(storage: String) {
        storages.withLock { _ = $0.removeValue(forKey: storage) }
    }

    /// Makes `storage` known (not ready when it was not; a replacement keeps its readiness) and
    /// returns the only registration whose reports count from now on.
    public func register(storage: String) -> Registration {
        let owner = registrations.withLock { count in
            count += 1
            return count
        }
        storages.withLock { storages in
            storages[storage, default: Entry()].owner = owner
            storages[storage]?.lastBeat = nil
        }
        return Registration(storage: storage, owner: owner)
    }

    /// ``setReady(storage:_:)`` from a storage loop: ignored when `registration` no longer counts.
    public func setReady(_ registration: Registration, _ ready: Bool) {
        update(registration) { $0.ready = ready }
    }

    /// Starts watching the storage's beats, as if its database had answered now.
    public func startBeats(_ registration: Registration) {
        let instant = now()
        update(registration) { $0.lastBeat = instant }
    }

    /// Records that the storage's database answered now (while its beats are watched).
    public func beat(_ registration: Registration) {
        let instant = now()
        update(registration) { entry in
            if entry.lastBeat != nil { entry.lastBeat = instant }
        }
    }

    /// Stops watching the storage's beats (its loop ended: stopped by an error, or by a
    /// reload); its readiness stays.
    public func stopBeats(_ registration: Registration) {
        update(registration) { $0.lastBeat = nil }
    }

    private func update(_ registration: Registration, _ change: (inout Entry) -> Void) {
        storages.withLock { storages in
            guard var entry = storages[registration.storage], entry.owner == registration.owner else { return }
            change(&entry)
            storages[registration.storage] = entry
        }
    }

    /// The storages whose database has not answered for longer than ``stallLimit``, sorted by
    /// name, each with how long it has not.
    public func stalledStorages() -> [(storage: String, silent: Duration)] {
        let instant = now()
        return storages.withLock { storages in
            storages.compactMap { name, entry -> (storage: String, silent: Duration)? in
                guard let last = entry.lastBeat else { return nil }
                let silent = last.duration(to: instant)
                return silent > stallLimit ? (name, silent) : nil
            }
        }.sorted { $0.storage < $1.storage }
    }

    /// The `/healthz` answer and the stall's log line: nil when nothing is stalled.
    public func stallDescription() -> String? {
        let stalled = stalledStorages()
        guard !stalled.isEmpty else { return nil }
        let which =
            if let only = stalled.first, stalled.count == 1 {
                "the state database of storage \(only.storage) has not answered for \(ReportText.seconds(only.silent)) (its"
            } else {
                "the state databases of storages "
                    + stalled.map { "\($0.storage) (\(ReportText.seconds($0.silent)))" }.joined(separator: ", ")
                    + " have not answered (their"
            }
        return which
            + " reads wait for a thread: the process is at a task limit reached after the start, or every thread is"
            + " busy; if it lasts, raise the limit and restart the agent, see docs/operations.md, \"Threads and task"
            + " limits\")"
    }

    /// True when at least one storage is known and every known storage is ready.
    public var isReady: Bool {
        snapshot().isReady
    }

    /// The known storages that are not ready, sorted.
    public var notReadyStorages: [String] {
        snapshot().notReady
    }

    /// Both at one instant, for `/readyz`.
    func snapshot() -> (isReady: Bool, notReady: [String]) {
        storages.withLock { storages in
            let notReady = storages.filter { !$0.value.ready }.keys.sorted()
            return (!storages.isEmpty && notReady.isEmpty, notReady)
        }
    }
}

// MARK: - Routes

/// Answers the endpoint's three routes.
struct EndpointHandler: Sendable {
    let metrics: AgentMetrics
    let health: AgentHealth

    static let metricsContentType = "text/plain; version=0.0.4; charset=utf-8"
    static let textContentType = "text/plain; charset=utf-8"

    /// The answer to `request`: a `HEAD` gets the `GET` answer's headers and length, no body.
    func answer(_ request: EndpointServer.Request) -> EndpointServer.Response {
        let (status, contentType, body) = answer(path: request.path, method: request.method)
        var headers = [("Content-Type", contentType)]
        if status == 405 { headers.append(("Allow", "GET, HEAD")) }
        guard request.method != "HEAD" else {
            return EndpointServer.Response(status: status, headers: headers, body: [], length: body.count)
        }
        return EndpointServer.Response(status: status, headers: headers, body: body)
    }

    private func answer(path: String, method: String) -> (Int, String, [UInt8]) {
        guard ["/metrics", "/healthz", "/readyz"].contains(path) else {
            return (
                404, Self.textContentType,
                Array("not found: \(path); the endpoint serves /metrics, /healthz and /readyz\n".utf8)
            )
        }
        guard method == "GET" || method == "HEAD" else {
            return (405, Self.textContentType, Array("\(method) not allowed on \(path); use GET or HEAD\n".utf8))
        }
        switch path {
        case "/metrics":
            return (200, Self.metricsContentType, metrics.exposition())
        case "/readyz":
            let (isReady, notReady) = health.snapshot()
            if isReady {
                return (200, Self.textContentType, Array("ok\n".utf8))
            }
            let why = notReady.isEmpty ? "not ready: no storages yet" : "not ready: " + notReady.joined(separator: ", ")
            return (503, Self.textContentType, Array("\(why)\n".utf8))
        default:
            if let stall = health.stallDescription() {
                return (503, Self.textContentType, Array("unhealthy: \(stall)\n".utf8))
            }
            return (200, Self.textContentType, Array("ok\n".utf8))
        }
    }
}
