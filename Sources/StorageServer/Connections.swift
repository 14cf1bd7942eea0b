import Foundation
import Synchronization
import ThreadKit

import enum Transport.HTTPDate
import enum Transport.HTTPReasonPhrase

#if canImport(Glibc)
    import Glibc
#endif

/// An answer as the handler gives it; ``Connections`` frames it and writes it.
struct ServedAnswer {
    var status: Int
    /// Header lines in the order sent. A `Content-Length` here is sent as given, and none is
    /// added; otherwise one is added from the body (not for 1xx, 204 and 304).
    var headers: [(name: String, value: String)] = []
    var body = Body.none
    var framing = Framing.contentLength

    enum Body {
        case none
        case bytes(Data)
        case file(FileBytes)

        var count: Int {
            switch self {
            case .none: 0
            case .bytes(let data): data.count
            case .file(let bytes): bytes.range.count
            }
        }
    }

    enum Framing {
        /// A `Content-Length` (from the body, unless the headers set one).
        case contentLength
        /// `Transfer-Encoding: chunked`, beside any `Content-Length` the headers set.
        case chunked
    }

    /// Whether the status carries no body whatever the request (RFC 9110 §6.4.1).
    var isBodyless: Bool { status < 200 || status == 204 || status == 304 }
}

/// One accepted connection, as the handler and the body see it while they answer on it.
struct ConnectionSocket: Sendable {
    let descriptor: Int32
    private let stopping: @Sendable () -> Bool

    init(descriptor: Int32, stopping: @escaping @Sendable () -> Bool) {
        self.descriptor = descriptor
        self.stopping = stopping
    }

    /// Whether the server is stopping: a body or a delay stops at its next step.
    var isStopping: Bool { stopping() }

    /// Writes all of `bytes`; false when the client is gone, stopped reading for
    /// ``Connections/Limits/sendTimeout``, or the server is stopping.
    func send(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = Glibc.send(descriptor, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            if written < 0, errno == EINTR { continue }
            if written <= 0 { return false }
            offset += written
        }
        return true
    }

    func send(_ data: Data) -> Bool {
        data.withUnsafeBytes { send($0) }
    }

    func send(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { send($0) }
    }

    /// Sleeps `duration`, waking early when the server stops; false when it did.
    func sleep(for duration: Duration) -> Bool {
        Self.sleep(for: duration, unless: stopping)
    }

    /// Sleeps `duration` in steps of at most 50 ms, ending early once `stopping()`; false when it did.
    static func sleep(for duration: Duration, unless stopping: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now.advanced(by: duration)
        while !stopping() {
            let left = ContinuousClock.now.duration(to: deadline)
            if left <= .zero { return true }
            let step = min(left, .milliseconds(50))
            let (seconds, attoseconds) = step.components
            var time = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
            nanosleep(&time, nil)
        }
        return false
    }

    /// Makes the close of this connection a TCP reset: `SO_LINGER` with a zero timeout discards
    /// unsent bytes and sends `RST` instead of `FIN`, which the client reads as `ECONNRESET`.
    func armReset() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
    }
}

/// The server's sockets: a listening socket on 127.0.0.1, a thread that accepts, and a thread per
/// open connection that reads request heads and writes the handler's answers (HTTP/1.1, with
/// keep-alive and pipelining).
///
/// Everything a client controls is bounded, so one client (any local user) slows only itself:
/// a head over ``Limits/maxHead`` bytes is answered 431, a head not whole
/// ``Limits/headDeadline`` after its first byte is answered 408, a connection idle for
/// ``Limits/idleDeadline`` is closed, a client that stops reading an answer is dropped after
/// ``Limits/sendTimeout``, and at most ``maxConnections`` are open at once: past that, and whenever accepting runs out of
/// descriptors, the connection idle the longest is closed to make room (as nginx reuses idle
/// keep-alive connections), and accepting pauses while none is idle. (FlyingFox, used before,
/// read a head without a bound, in time that grew with the square of a line's length, and its
/// listener ended for good at the first `EMFILE`.)
final class Connections: Sendable {
    /// The bounds on what a client may make the server hold.
    struct Limits: Sendable {
        /// The longest request head read: the request line and every header line.
        var maxHead = 64 * 1024
        /// How long a head may take to arrive, from its first byte.
        var headDeadline: Duration = .seconds(30)
        /// How long an open connection may wait for its next request.
        var idleDeadline: Duration = .seconds(75)
        /// How long a write may wait for the client to read.
        var sendTimeout = timeval(tv_sec: 60, tv_usec: 0)
        /// The longest request body read and dropped before the answer (a GET has none); a
        /// longer one is answered 413, and the connection closed.
        var maxDiscardedBody = 1 << 20
        /// How long a new connection is spared from being closed to make room, so that its first
        /// request, sent as it connects, can arrive (closed before it was read, it was lost).
        /// Short: a flood of connections that send nothing is closed at the cap's count per
        /// grace, and a request that waited in the queue has arrived before its accept.
        var firstRequestGrace: Duration = .milliseconds(100)
        /// Connections open at once; nil for half the open-file limit (each connection may hold
        /// a served file too), less a reserve, at most 512.
        var maxConnections: Int?
    }

    let limits: Limits
    /// The port listened on (the one picked, for port 0).
    let port: UInt16
    /// At most this many connections are open at once.
    let maxConnections: Int

    private let listener: Int32
    private let handler: @Sendable (RequestHead, ConnectionSocket) -> ServedAnswer
    private let table = Mutex(Table())

    private struct Table {
        var open: [Int32: Entry] = [:]
        var stopping = false
        var acceptRunning = false
        var listenerClosed = false
        /// Why accepting ended by itself, when it did.
        var acceptFailure: Int32?
        var endWaiters: [CheckedContinuation<Void, Never>] = []

        var isDone: Bool { !acceptRunning && open.isEmpty }
    }

    private struct Entry {
        /// When it began waiting for its next head, or nil while answering.
        var idleSince: ContinuousClock.Instant?
        var evicted = false
        /// Whether a request has come on it: until then it is spared for
        /// ``Limits/firstRequestGrace``.
        var hadRequest = false
        let acceptedAt = ContinuousClock.now
    }

    /// Why the listening socket could not be made.
    struct ListenFailure: Error {
        var call: String
        var code: Int32
    }

    /// Listens on 127.0.0.1:`port`; nothing is accepted before ``start()``.
    init(
        port: UInt16, limits: Limits = Limits(),
        handler: @escaping @Sendable (RequestHead, ConnectionSocket) -> ServedAnswer
    ) throws(ListenFailure) {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socket >= 0 else { throw ListenFailure(call: "socket", code: errno) }
        var yes: Int32 = 1
        setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            let code = errno
            close(socket)
            throw ListenFailure(call: "bind", code: code)
        }
        guard listen(socket, SOMAXCONN) == 0 else {
            let code = errno
            close(socket)
            throw ListenFailure(call: "listen", code: code)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        self.listener = socket
        self.port = UInt16(bigEndian: address.sin_port)
        self.handler = handler
        var limit = rlimit()
        let descriptors = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 ? Int(clamping: limit.rlim_cur) : 1024
        self.limits = limits
        self.maxConnections = limits.maxConnections ?? min(512, max(4, (descriptors - 32) / 2))
    }

    /// Starts accepting on a thread of its own; throws when no thread could be made (the
    /// listening socket is then closed).
    func start() throws(ThreadStartError) {
        table.withLock { $0.acceptRunning = true }
        do {
            try DetachedThread.start(name: "serve.accept", stackSize: 1 << 20) { [self] in acceptLoop() }
        } catch {
            finish { table in
                close(listener)
                table.listenerClosed = true
                table.acceptRunning = false
            }
            throw error
        }
    }

    /// Stops accepting, closes every connection (ends their bodies, delays and stalls) and
    /// returns once every thread of the server has ended.
    func stop() async {
        table.withLock { table in
            guard !table.stopping else { return }
            table.stopping = true
            // Wakes the accepting thread (accept fails with EINVAL), which closes the socket.
            if !table.listenerClosed { shutdown(listener, Int32(SHUT_RDWR)) }
            for descriptor in table.open.keys { shutdown(descriptor, Int32(SHUT_RDWR)) }
        }
        await ended()
    }

    /// Returns once accepting has ended and every connection is closed: after ``stop()``, or
    /// when accepting failed by itself (``acceptFailure``).
    func ended() async {
        await withCheckedContinuation { continuation in
            let done = table.withLock { table -> Bool in
                if table.isDone { return true }
                table.endWaiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    /// The `errno` that ended accepting by itself, or nil (still accepting, or stopped).
    var acceptFailure: Int32? {
        table.withLock { $0.acceptFailure }
    }

    private var isStopping: Bool {
        table.withLock { $0.stopping }
    }

    // MARK: Accepting

    private func acceptLoop() {
        defer {
            finish { table in
                close(listener)
                table.listenerClosed = true
                table.acceptRunning = false
            }
        }
        while !isStopping {
            let full = table.withLock { $0.open.count >= maxConnections }
            // Full: room is made only for a connection that is waiting, and only from one that
            // is idle with nothing sent.
            if full {
                if waitForConnection(), evictLongestIdle() {
                    awaitFewer(than: maxConnections)
                } else {
                    pause()
                }
                continue
            }
            // Children (a gzip fault's) close every descriptor past stderr as they start
            // (ProcessKit); close-on-exec as well, for any other spawn in the process.
            let connection = accept(listener, nil, nil)
            if connection >= 0 { _ = fcntl(connection, F_SETFD, FD_CLOEXEC) }
            guard connection >= 0 else {
                let code = errno
                switch code {
                case EINTR, ECONNABORTED, EPROTO, EAGAIN, EPERM, ENETDOWN, ENOPROTOOPT, EHOSTDOWN, ENONET,
                    EHOSTUNREACH, EOPNOTSUPP, ENETUNREACH:
                    continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors or memory: make room by closing the connection idle the
                    // longest, or wait for one to end. The server never stops over it.
                    let open = table.withLock { $0.open.count }
                    if evictLongestIdle() { awaitFewer(than: open) } else { pause() }
                    continue
                default:
                    table.withLock { table in
                        if !table.stopping { table.acceptFailure = code }
                    }
                    return
                }
            }
            let admitted = table.withLock { table -> Bool in
                guard !table.stopping else { return false }
                table.open[connection] = Entry(idleSince: .now)
                return true
            }
            guard admitted else {
                close(connection)
                return
            }
            do {
                try DetachedThread.start(name: "serve.conn", stackSize: 1 << 20) { [self] in
                    serve(connection)
                    end(connection)
                }
            } catch {
                // No thread to serve it (a task limit): say so in one write that cannot block,
                // close it, and wait a little, as for a shortage of descriptors.
                let refusal = Array(
                    "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        .utf8)
                _ = refusal.withUnsafeBytes {
                    Glibc.send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
                }
                end(connection)
                pause()
            }
        }
    }

    /// Forgets a connection and closes it, under the lock: shutdown(2) from stop() or an
    /// eviction never meets a number already reused by another open.
    private func end(_ connection: Int32) {
        finish { table in
            table.open[connection] = nil
            close(connection)
        }
    }

    /// Waits a little before accepting again, unless stopping.
    private func pause() {
        _ = ConnectionSocket.sleep(for: .milliseconds(100)) { isStopping }
    }

    /// Waits (a second at most) until fewer than `count` connections are open: an evicted
    /// connection's thread closes its socket a moment after the eviction, and accepting before
    /// then would hold one descriptor more than the cap allows.
    private func awaitFewer(than count: Int) {
        let deadline = ContinuousClock.now.advanced(by: .seconds(1))
        while ContinuousClock.now < deadline {
            let (open, stopping) = table.withLock { ($0.open.count, $0.stopping) }
            if open < count || stopping { return }
            var step = timespec(tv_sec: 0, tv_nsec: 2_000_000)
            nanosleep(&step, nil)
        }
    }

    /// Whether a connection waits to be accepted, within a moment.
    private func waitForConnection() -> Bool {
        var entry = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 100) > 0
    }

    /// Closes the open connection that has waited longest for its next head with nothing
    /// unread (one whose request has arrived is about to be answered: closing it would drop
    /// the request); false when there is none.
    private func evictLongestIdle() -> Bool {
        let spared = ContinuousClock.now.advanced(by: .zero - limits.firstRequestGrace)
        return table.withLock { table -> Bool in
            let candidates = table.open.filter { entry in
                !entry.value.evicted && entry.value.idleSince != nil
                    && (entry.value.hadRequest || entry.value.acceptedAt < spared)
            }
            .sorted { $0.value.idleSince! < $1.value.idleSince! }
            for (descriptor, _) in candidates {
                var unread: Int32 = 0
                guard ioctl(descriptor, UInt(FIONREAD), &unread) == 0, unread == 0 else { continue }
                table.open[descriptor]?.evicted = true
                shutdown(descriptor, Int32(SHUT_RDWR))
                return true
            }
            return false
        }
    }

    /// Applies `change` to the table and wakes the waiters of ``ended()`` when all is done.
    private func finish(_ change: (inout Table) -> Void) {
        let waiters = table.withLock { table -> [CheckedContinuation<Void, Never>] in
            change(&table)
            guard table.isDone else { return [] }
            defer { table.endWaiters = [] }
            return table.endWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    private func setIdle(_ connection: Int32, _ idle: Bool) {
        table.withLock { table in
            table.open[connection]?.idleSince = idle ? .now : nil
            if !idle { table.open[connection]?.hadRequest = true }
        }
    }

    // MARK: One connection

    /// Sets an accepted connection's options: the send timeout, and no Nagle delay.
    static func configure(_ connection: Int32, limits: Limits) {
        var timeout = limits.sendTimeout
        setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        // A head and its body go out in separate writes: with Nagle's algorithm, the body waited
        // until the client acknowledged the head, which a client that delays its
        // acknowledgements (curl, libcurl) did 40 ms later, on every request of a kept-alive
        // connection: 2,000 small files took 90 s in one curl, 0.6 s without it.
        var noDelay: Int32 = 1
        setsockopt(connection, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
    }

    private func serve(_ connection: Int32) {
        Self.configure(connection, limits: limits)
        let socket = ConnectionSocket(descriptor: connection, stopping: { [self] in isStopping })
        var buffer: [UInt8] = []
        while !socket.isStopping {
            setIdle(connection, true)
            guard let headEnd = readHead(into: &buffer, on: socket) else { return }
            setIdle(connection, false)
            let head: RequestHead
            do {
                head = try RequestHead.parse(buffer[..<headEnd])
            } catch {
                refuse(error.status, on: socket)
                return
            }
            buffer.removeFirst(headEnd)
            let keepsAlive = head.keepsAlive
            if head.value("transfer-encoding") != nil {
                // A body in chunks, which no GET or HEAD needs: refused rather than misread.
                refuse(501, on: socket)
                return
            } else if let length = head.value("content-length") {
                guard let count = Self.contentLength(length) else {
                    refuse(400, on: socket)
                    return
                }
                // Read and dropped before the answer: a client still sending its body while
                // the answer fills its buffer would otherwise wait on the server as the server
                // waits on it.
                if count > limits.maxDiscardedBody {
                    refuse(413, on: socket)
                    return
                }
                guard discard(count, from: &buffer, on: socket) else { return }
            }
            let answer = handler(head, socket)
            guard write(answer, for: head, keepsAlive: keepsAlive, on: socket) else { return }
            guard keepsAlive else {
                lingeringClose(socket)
                return
            }
        }
    }

    /// Reads until `buffer` holds a whole head; returns where it ends, or nil when the connection
    /// is to close (the client left, a deadline passed, the head grew too long: those two are
    /// answered first).
    private func readHead(into buffer: inout [UInt8], on socket: ConnectionSocket) -> Int? {
        var searched = 0
        var deadline = ContinuousClock.now.advanced(by: limits.idleDeadline)
        var started = false
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let blank = RequestHead.leadingLineEnds(in: buffer)
            if blank > 0 {
                buffer.removeFirst(blank)
                searched = 0
            }
            if !buffer.isEmpty, !started {
                started = true
                deadline = ContinuousClock.now.advanced(by: limits.headDeadline)
            }
            if let end = RequestHead.end(in: buffer, from: searched) {
                guard end <= limits.maxHead else {
                    refuse(431, on: socket)
                    return nil
                }
                return end
            }
            searched = max(0, buffer.count - 2)
            if buffer.count > limits.maxHead {
                refuse(431, on: socket)
                return nil
            }
            guard wait(forReadable: socket, until: deadline) else {
                if started { refuse(408, on: socket) }
                return nil
            }
            let count = chunk.withUnsafeMutableBytes { read(socket.descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return nil }
            buffer.append(contentsOf: chunk[..<count])
        }
    }

    /// Drops `count` bytes of request body, from `buffer` first; false when the client left or
    /// was too slow.
    private func discard(_ count: Int, from buffer: inout [UInt8], on socket: ConnectionSocket) -> Bool {
        let buffered = min(count, buffer.count)
        buffer.removeFirst(buffered)
        var left = count - buffered
        let deadline = ContinuousClock.now.advanced(by: limits.headDeadline)
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while left > 0 {
            guard wait(forReadable: socket, until: deadline) else { return false }
            let read = chunk.withUnsafeMutableBytes {
                Glibc.read(socket.descriptor, $0.baseAddress, min(left, $0.count))
            }
            if read < 0, errno == EINTR { continue }
            guard read > 0 else { return false }
            left -= read
        }
        return true
    }

    /// Whether the socket has bytes (or its end) before `deadline`.
    private func wait(forReadable socket: ConnectionSocket, until deadline: ContinuousClock.Instant) -> Bool {
        while true {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { return false }
            let (seconds, attoseconds) = left.components
            let milliseconds = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
            var entry = pollfd(fd: socket.descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&entry, 1, milliseconds)
            if ready < 0, errno == EINTR { continue }
            return ready > 0
        }
    }

    /// A `Content-Length` read strictly: digits only, and every line the same (RFC 9112 §6.3).
    static func contentLength(_ value: String) -> Int? {
        var count: Int?
        for part in value.split(separator: ",", omittingEmptySubsequences: false) {
            let digits = part.trimmingCharacters(in: .whitespaces)
            guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let parsed = Int(digits),
                count == nil || count == parsed
            else { return nil }
            count = parsed
        }
        return count
    }

    /// Answers a head that cannot be served with `status` and a line saying why, then the
    /// connection closes.
    private func refuse(_ status: Int, on socket: ConnectionSocket) {
        let text = "\(status) \(Self.reasonPhrase(for: status))\n"
        let answer = ServedAnswer(
            status: status, headers: [("Content-Type", "text/plain; charset=utf-8")], body: .bytes(Data(text.utf8)))
        guard write(answer, for: nil, keepsAlive: false, on: socket) else { return }
        lingeringClose(socket)
    }

    /// Before a close: a close with unread bytes queued sends RST, which can reach the client
    /// before it has read the answer. Say that nothing more comes, then read and drop what the
    /// client still sends, for a few seconds at most, as nginx's lingering close does.
    private func lingeringClose(_ socket: ConnectionSocket) {
        shutdown(socket.descriptor, Int32(SHUT_WR))
        let deadline = ContinuousClock.now.advanced(by: .seconds(5))
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while !socket.isStopping, wait(forReadable: socket, until: deadline) {
            let count = chunk.withUnsafeMutableBytes { read(socket.descriptor, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return }
        }
    }

    /// Writes `answer`'s head and body; false when the connection is to close (a client gone, a
    /// body cut short by a fault).
    private func write(_ answer: ServedAnswer, for head: RequestHead?, keepsAlive: Bool, on socket: ConnectionSocket)
        -> Bool
    {
        var text = "HTTP/1.1 \(answer.status) \(Self.reasonPhrase(for: answer.status))\r\n"
        // RFC 9110 §6.6.1: an origin with a clock sends the time of its answer.
        text += "Date: \(HTTPDate.format(Int64(time(nil))))\r\n"
        var setsLength = false
        for (name, value) in answer.headers {
            if name.lowercased() == "content-length" { setsLength = true }
            text += "\(name): \(value)\r\n"
        }
        switch answer.framing {
        case .contentLength:
            if !setsLength, !answer.isBodyless { text += "Content-Length: \(answer.body.count)\r\n" }
        case .chunked:
            text += "Transfer-Encoding: chunked\r\n"
        }
        if !keepsAlive { text += "Connection: close\r\n" }
        text += "\r\n"
        var bytes = Array(text.utf8)
        let sendsBody = head?.method != "HEAD" && !answer.isBodyless
        switch answer.body {
        case .bytes(let data) where sendsBody:
            if answer.framing == .chunked {
                if !data.isEmpty {
                    bytes.append(contentsOf: (String(data.count, radix: 16) + "\r\n").utf8)
                    bytes.append(contentsOf: data)
                    bytes.append(contentsOf: "\r\n".utf8)
                }
                bytes.append(contentsOf: "0\r\n\r\n".utf8)
            } else {
                bytes.append(contentsOf: data)
            }
            return socket.send(bytes)
        case .file(let file) where sendsBody:
            guard socket.send(bytes) else { return false }
            do {
                try file.stream(to: socket, chunked: answer.framing == .chunked)
                return true
            } catch {
                return false
            }
        default:
            return socket.send(bytes)
        }
    }

    static func reasonPhrase(for code: Int) -> String {
        HTTPReasonPhrase.phrase(for: code) ?? "Status \(code)"
    }
}
