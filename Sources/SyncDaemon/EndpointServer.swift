import CLinux
import Foundation
import Synchronization
import ThreadKit

import enum Transport.HTTPReasonPhrase

#if canImport(Glibc)
    import Glibc
#endif

/// The endpoint's HTTP/1.1 server: one thread of its own polls the listening socket and the open
/// connections, answers each connection's one request and closes it.
///
/// Everything about it is bounded, so a client (any local user, on loopback) can slow only
/// itself, never the agent: a request head over ``maxHead`` bytes is answered 431, a connection
/// that has not sent its head within ``clientDeadline`` is closed, at most ``maxClients`` are open
/// at once (a new one closes the one open longest), and running out of descriptors pauses
/// accepting instead of ending the server. The storages' work runs on Swift's cooperative threads and is
/// never waited on by this thread. (FlyingFox, used before, read a request line in time
/// quadratic in its length on the cooperative threads, so two 1 MB lines froze the agent, and
/// it stopped serving, and so the agent, when accepting ran out of descriptors.)
final class EndpointServer: Sendable {
    /// A request as the routes see it.
    struct Request: Sendable, Equatable {
        var method: String
        /// The target up to its query.
        var path: String
    }

    /// An answer; `Content-Length` and `Connection: close` are added when it is sent.
    struct Response: Sendable {
        var status: Int
        var headers: [(String, String)]
        var body: [UInt8]
        /// The `Content-Length` to send when it is not the body's (a `HEAD` answer's).
        var length: Int? = nil
    }

    /// The `errno` of the socket call that failed.
    struct SocketFailure: Error {
        var code: Int32
    }

    /// The longest request head read: the request line and every header line.
    static let maxHead = 8192
    /// Connections open at once; a new one beyond closes the one open longest.
    static let maxClients = 64
    /// How long a connection may take to send its head.
    static let clientDeadline: Double = 5
    /// How long a blocked write of an answer may wait for the client to read.
    static let sendTimeout = timeval(tv_sec: 2, tv_usec: 0)

    /// The address listened on, with the port picked for port 0.
    let bound: AgentEndpoint.Address
    private let listener: Int32
    private let wake: (read: Int32, write: Int32)
    private let handler: @Sendable (Request) -> Response
    private let state = Mutex<State>(State())

    private struct State {
        var started = false
        var stopping = false
        var finished = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    /// Binds `address` and listens; `handler` answers each request (on the server's thread).
    init(address: AgentEndpoint.Address, handler: @escaping @Sendable (Request) -> Response) throws(SocketFailure) {
        let (fd, port) = try Self.listen(on: address)
        var pipeEnds: [Int32] = [0, 0]
        guard clinux_pipe_cloexec(&pipeEnds) == 0 else {
            let code = errno
            close(fd)
            throw SocketFailure(code: code)
        }
        for end in pipeEnds { _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK) }
        listener = fd
        wake = (pipeEnds[0], pipeEnds[1])
        bound = AgentEndpoint.Address(host: address.host, port: port)
        self.handler = handler
    }

    /// Starts serving on a thread of its own. Where none can be made (a task limit), the sockets
    /// are closed, the server counts as finished, and the error is thrown.
    func start() throws(ThreadStartError) {
        state.withLock { $0.started = true }
        do {
            try DetachedThread.start(name: "agent endpoint") { [self] in
                self.serve()
                finish()
            }
        } catch {
            close(listener)
            close(wake.read)
            close(wake.write)
            finish()
            throw error
        }
    }

    /// Marks the server finished and wakes whoever waits for that.
    private func finish() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.finished = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Asks the thread to stop; it closes every socket as it ends. Only the first call writes
    /// to the wake pipe, and only while the thread runs (a pipe end it closed may be another
    /// file's descriptor by then).
    func stop() {
        state.withLock { state in
            guard state.started, !state.stopping, !state.finished else { return }
            state.stopping = true
            var byte: UInt8 = 1
            _ = write(wake.write, &byte, 1)
        }
    }

    /// Returns once the thread ended (at once when it never started).
    func finished() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.finished || !state.started { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// A listening socket on `address`, close-on-exec and non-blocking, and its port; throws the
    /// `errno` of the call that failed.
    static func listen(on address: AgentEndpoint.Address) throws(SocketFailure) -> (Int32, UInt16) {
        let family = address.isIPv6 ? AF_INET6 : AF_INET
        let fd = socket(
            family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw SocketFailure(code: errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var result: Int32
        switch address.host {
        case .ipv4(let ip):
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = address.port.bigEndian
            inet_pton(AF_INET, ip, &sin.sin_addr)
            result = withUnsafePointer(to: &sin) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        case .ipv6(let ip):
            // Only IPv6: `[::]` does not also take the IPv4 port.
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = address.port.bigEndian
            inet_pton(AF_INET6, ip, &sin6.sin6_addr)
            result = withUnsafePointer(to: &sin6) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
        }
        if result == 0 { result = Glibc.listen(fd, 64) }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw SocketFailure(code: code)
        }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else {
            let code = errno
            close(fd)
            throw SocketFailure(code: code)
        }
        let port = withUnsafePointer(to: &storage) { pointer -> UInt16 in
            family == AF_INET
                ? pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    UInt16(bigEndian: $0.pointee.sin_port)
                }
                : pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    UInt16(bigEndian: $0.pointee.sin6_port)
                }
        }
        return (fd, port)
    }

    // MARK: - The thread

    private struct Client {
        var buffer: [UInt8] = []
        var deadline: Double
    }

    private static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    private func serve() {
        var clients: [Int32: Client] = [:]
        // Out of descriptors: accepting waits until then (the connection stays queued).
        var acceptAfter = 0.0
        defer {
            for fd in clients.keys { close(fd) }
            close(listener)
            close(wake.read)
            close(wake.write)
        }
        var chunk = [UInt8](repeating: 0, count: Self.maxHead + 1)
        while true {
            let now = Self.now()
            var fds = [pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
            let accepting = now >= acceptAfter
            fds.append(pollfd(fd: accepting ? listener : -1, events: Int16(POLLIN), revents: 0))
            let order = Array(clients.keys)
            for fd in order { fds.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0)) }
            var wait = accepting ? 1.0 : min(1.0, acceptAfter - now)
            for client in clients.values { wait = min(wait, client.deadline - now) }
            let ready = poll(&fds, nfds_t(fds.count), Int32(max(0, wait) * 1000) + 1)
            if ready < 0 {
                if errno != EINTR { usleep(10_000) }
                continue
            }
            if fds[0].revents != 0 { return }
            if accepting, fds[1].revents != 0 {
                while true {
                    // The listener is close-on-exec and non-blocking, and so, set at once, is each
                    // connection (hooks are spawned closing every inherited descriptor too).
                    let fd = accept(listener, nil, nil)
                    if fd >= 0 {
                        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
                        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
                    }
                    if fd < 0 {
                        if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM {
                            acceptAfter = Self.now() + 0.1
                        }
                        break
                    }
                    // Full: the connection open longest goes, unless its request has come by
                    // now (a burst accepted whole before any read): then it is answered.
                    if clients.count >= Self.maxClients,
                        let oldest = clients.min(by: { $0.value.deadline < $1.value.deadline })
                    {
                        clients[oldest.key] = nil
                        if advance(oldest.key, oldest.value, &chunk) != nil { close(oldest.key) }
                    }
                    clients[fd] = Client(deadline: Self.now() + Self.clientDeadline)
                }
            }
            for (index, fd) in order.enumerated() where fds[index + 2].revents != 0 {
                guard let client = clients[fd] else { continue }
                clients[fd] = advance(fd, client, &chunk)
            }
            let late = Self.now()
            for (fd, client) in clients where client.deadline <= late {
                close(fd)
                clients[fd] = nil
            }
        }
    }

    /// Reads what `fd` has for `client` (without waiting) and answers it once its head is whole
    /// or too long. Returns the client while it waits for more; nil when it is done: answered,
    /// or closed at its end.
    private func advance(_ fd: Int32, _ client: Client, _ chunk: inout [UInt8]) -> Client? {
        var client = client
        let room = Self.maxHead + 1 - client.buffer.count
        let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, room) }
        if count < 0 && (errno == EAGAIN || errno == EINTR) { return client }
        if count <= 0 {
            close(fd)
            return nil
        }
        client.buffer += chunk[0..<count]
        if let request = Self.request(in: client.buffer) {
            answer(fd, request.map(handler) ?? Self.plain(400, "bad request: send GET /metrics HTTP/1.1\n"))
            return nil
        }
        if client.buffer.count > Self.maxHead {
            answer(fd, Self.plain(431, "request head over \(Self.maxHead) bytes\n"))
            return nil
        }
        return client
    }

    /// Sends `response` on `fd` (blocking, for at most ``sendTimeout`` at a time) and closes it.
    private func answer(_ fd: Int32, _ response: Response) {
        defer { close(fd) }
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK)
        var timeout = Self.sendTimeout
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var head = "HTTP/1.1 \(response.status) \(Self.reason(response.status))\r\n"
        for (name, value) in response.headers { head += "\(name): \(value)\r\n" }
        head += "Content-Length: \(response.length ?? response.body.count)\r\nConnection: close\r\n\r\n"
        var bytes = Array(head.utf8)
        bytes += response.body
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return }
            sent += count
        }
        // Closing with unread bytes sends a reset, which can destroy the answer before the
        // client reads it (a 431's request is longer than what was read): what has already
        // arrived, up to 64 KiB, is read and dropped first.
        shutdown(fd, Int32(SHUT_WR))
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var drained = 0
        var sink = [UInt8](repeating: 0, count: 16384)
        while drained < 65536 {
            let count = sink.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            drained += count
        }
    }

    // MARK: - Parsing

    /// The request in `head` once its end (an empty line) is in: nil while it is not, `.some(nil)`
    /// for one that is not `METHOD TARGET HTTP/1.x`.
    static func request(in head: [UInt8]) -> Request?? {
        guard let end = endOfHead(head) else { return nil }
        let lineEnd = head[..<end].firstIndex(of: UInt8(ascii: "\n")) ?? end
        var line = head[..<lineEnd]
        if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
        let parts = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, parts[0].allSatisfy({ (0x41...0x5A).contains($0) }),
            parts[2].elementsEqual("HTTP/1.1".utf8) || parts[2].elementsEqual("HTTP/1.0".utf8),
            parts[1].first == UInt8(ascii: "/")
        else { return .some(nil) }
        let target = parts[1]
        let path = target.prefix { $0 != UInt8(ascii: "?") }
        return Request(method: String(decoding: parts[0], as: UTF8.self), path: String(decoding: path, as: UTF8.self))
    }

    /// Where the head's empty line starts (`\r\n\r\n` or `\n\n`), or nil.
    private static func endOfHead(_ bytes: [UInt8]) -> Int? {
        var index = 0
        while index + 1 < bytes.count {
            if bytes[index] == UInt8(ascii: "\n") {
                if bytes[index + 1] == UInt8(ascii: "\n") { return index }
                if bytes[index + 1] == UInt8(ascii: "\r"), index + 2 < bytes.count,
                    bytes[index + 2] == UInt8(ascii: "\n")
                {
                    return index
                }
            }
            index += 1
        }
        return nil
    }

    static func plain(_ status: Int, _ text: String) -> Response {
        Response(status: status, headers: [("Content-Type", EndpointHandler.textContentType)], body: Array(text.utf8))
    }

    static func reason(_ status: Int) -> String {
        HTTPReasonPhrase.phrase(for: status) ?? "Status"
    }
}
