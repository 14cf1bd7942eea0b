import Foundation
import Synchronization
import ThreadKit

import enum Transport.HTTPReasonPhrase

/// A loopback HTTP/1.1 origin whose every answer a test writes byte for byte: header lines
/// repeated, misspelled or malformed as a real server might send them, which
/// ``StorageServer`` (a well-behaved file server) never does. Tests of HTTP caching and of
/// header parsing use it; it serves one request at a time on each connection, with keep-alive.
/// The handler returns an ``Answer`` for each ``Request`` (`HTTPCachingTests` script whole
/// sequences with it); ``stop()`` makes the port refuse connections.
public final class ScriptedOrigin: Sendable {
    /// One request as the origin read it.
    public struct Request: Sendable, Equatable {
        /// The method (`GET`).
        public var method: String
        /// The request target as sent (`/a?b=1`).
        public var target: String
        /// The header lines, names lower-cased, in order.
        public var headers: [(name: String, value: String)]

        /// The value of the first header line named `name` (any case), or nil.
        public func header(_ name: String) -> String? {
            let lowered = name.lowercased()
            return headers.first { $0.name == lowered }?.value
        }

        /// The path of the target, without its query.
        public var path: String { String(target.prefix { $0 != "?" }) }

        public static func == (lhs: Request, rhs: Request) -> Bool {
            lhs.method == rhs.method && lhs.target == rhs.target
                && lhs.headers.map { [$0.name, $0.value] } == rhs.headers.map { [$0.name, $0.value] }
        }
    }

    /// One answer: the status, the header lines as they go on the wire (`Name: value`, without
    /// the line end), and the body. `Content-Length` is added unless a line sets it (or the
    /// status carries no body).
    public struct Answer: Sendable {
        /// The status code.
        public var status: Int
        /// Header lines exactly as sent.
        public var headers: [String]
        /// The body (none goes out for a 204, a 304 or a HEAD).
        public var body: Data
        /// Close the connection after this answer.
        public var closes: Bool
        /// When set, the body goes out at this many bytes a second (at least 1): the head at
        /// once, then a chunk of that many bytes each second. The origin paces it on its own
        /// thread, so no busy task pool can hold it back (``StorageServer``'s
        /// ``Fault/trickle(bytesPerSecond:)`` runs on the pool its tests share).
        public var bytesPerSecond: Int?
        /// With ``bytesPerSecond``, the seconds between chunks (default 1): a chunk of
        /// `bytesPerSecond` bytes every this many seconds, so bursts with silences between them.
        public var chunkInterval: Double
        /// The status line as sent, when not `HTTP/1.1 <status> <reason>` (a misspelled one);
        /// ``status`` still decides whether a body goes out.
        public var statusLine: String?

        /// An answer from its parts.
        public init(
            status: Int = 200, headers: [String] = [], body: Data = Data(), closes: Bool = false,
            bytesPerSecond: Int? = nil, chunkInterval: Double = 1
        ) {
            self.status = status
            self.headers = headers
            self.body = body
            self.closes = closes
            self.bytesPerSecond = bytesPerSecond.map { max(1, $0) }
            self.chunkInterval = max(0.01, chunkInterval)
        }
    }

    private let listener: Int32
    /// The port it listens on.
    public let port: Int
    private let handler: @Sendable (Request) -> Answer
    private let log = Mutex<[Request]>([])
    private let stopped = Atomic<Bool>(false)
    private let connections = Mutex<Set<Int32>>([])

    /// Starts listening on 127.0.0.1 at a free port; `handler` answers every request (on the
    /// origin's own threads).
    public init(handler: @escaping @Sendable (Request) -> Answer) throws {
        self.handler = handler
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw ScriptedOriginError.socket(errno) }
        var yes: Int32 = 1
        setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(socket, 64) == 0 else {
            let code = errno
            close(socket)
            throw ScriptedOriginError.socket(code)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) }
        }
        listener = socket
        port = Int(UInt16(bigEndian: address.sin_port))
        do {
            try DetachedThread.start(name: "origin.\(port)") { [self] in acceptLoop() }
        } catch {
            // The listener is closed by deinit's stop(), which runs as this init throws.
            throw ScriptedOriginError.thread(error)
        }
    }

    deinit { stop() }

    /// The URL of `path` (with its query, if any) on this origin.
    public func url(_ path: String) -> URL {
        URL(string: "http://127.0.0.1:\(port)" + (path.hasPrefix("/") ? path : "/" + path))!
    }

    /// Every request so far, in order.
    public var requests: [Request] { log.withLock { $0 } }

    /// How many requests named `path` (without its query).
    public func requestCount(forPath path: String) -> Int {
        log.withLock { $0.filter { $0.path == path }.count }
    }

    /// Stops listening and closes every open connection: later requests are refused.
    public func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        connections.withLock { open in
            for connection in open { shutdown(connection, Int32(SHUT_RDWR)) }
        }
    }

    private func acceptLoop() {
        while !stopped.load(ordering: .acquiring) {
            let connection = accept(listener, nil, nil)
            if connection < 0 {
                if errno == EINTR { continue }
                return
            }
            // As the storage server's: a head and its body go out in two writes, which Nagle's
            // algorithm would space 40 ms apart on a kept-alive connection.
            Connections.configure(connection, limits: Connections.Limits())
            connections.withLock { _ = $0.insert(connection) }
            do {
                try DetachedThread.start(name: "origin.conn") { [self] in
                    serve(connection)
                    connections.withLock { _ = $0.remove(connection) }
                    close(connection)
                }
            } catch {
                // No thread to serve it (a task limit): the client sees the connection closed.
                connections.withLock { _ = $0.remove(connection) }
                close(connection)
            }
        }
    }

    private func serve(_ connection: Int32) {
        var buffer = Data()
        var chunk = [UInt8](repeating: 0, count: 8192)
        while !stopped.load(ordering: .acquiring) {
            guard let end = buffer.range(of: Data("\r\n\r\n".utf8)) else {
                let count = read(connection, &chunk, chunk.count)
                if count <= 0 { return }
                buffer.append(contentsOf: chunk[0..<count])
                if buffer.count > 1 << 20 { return }
                continue
            }
            let head = String(decoding: buffer[buffer.startIndex..<end.lowerBound], as: UTF8.self)
            buffer.removeSubrange(buffer.startIndex..<end.upperBound)
            guard let request = Self.parse(head) else { return }
            log.withLock { $0.append(request) }
            let answer = handler(request)
            var text = (answer.statusLine ?? "HTTP/1.1 \(answer.status) \(Self.reason(answer.status))") + "\r\n"
            for line in answer.headers { text += line + "\r\n" }
            let bodyless = answer.status == 204 || answer.status == 304 || answer.status < 200
            let setsLength = answer.headers.contains { $0.lowercased().hasPrefix("content-length:") }
            if !bodyless, !setsLength { text += "Content-Length: \(answer.body.count)\r\n" }
            if answer.closes { text += "Connection: close\r\n" }
            text += "\r\n"
            let body = !bodyless && request.method != "HEAD" ? answer.body : Data()
            var sent = Self.send(Data(text.utf8), on: connection)
            if let pace = answer.bytesPerSecond {
                var offset = 0
                while sent, offset < body.count, !stopped.load(ordering: .acquiring) {
                    if offset > 0 { Thread.sleep(forTimeInterval: answer.chunkInterval) }
                    let end = min(body.count, offset + pace)
                    sent = Self.send(body[body.startIndex + offset..<body.startIndex + end], on: connection)
                    offset = end
                }
            } else {
                sent = sent && Self.send(body, on: connection)
            }
            if !sent || answer.closes { return }
        }
    }

    /// Writes all of `bytes`; false when the client is gone.
    private static func send(_ bytes: Data, on connection: Int32) -> Bool {
        bytes.withUnsafeBytes { raw -> Bool in
            var offset = 0
            while offset < raw.count {
                let written = Glibc.send(connection, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                if written <= 0 { return false }
                offset += written
            }
            return true
        }
    }

    private static func parse(_ head: String) -> Request? {
        let lines = head.components(separatedBy: "\r\n")
        let start = lines[0].split(separator: " ")
        guard start.count >= 2 else { return nil }
        let headers = lines.dropFirst().compactMap { line -> (name: String, value: String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (
                line[..<colon].lowercased(),
                line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            )
        }
        return Request(method: String(start[0]), target: String(start[1]), headers: headers)
    }

    private static func reason(_ status: Int) -> String {
        HTTPReasonPhrase.phrase(for: status) ?? "Status"
    }
}

/// Why a ``ScriptedOrigin`` could not start.
public enum ScriptedOriginError: Error, CustomStringConvertible {
    /// A socket call failed with this errno.
    case socket(Int32)
    /// No thread could be made to accept connections.
    case thread(any Error)

    public var description: String {
        switch self {
        case .socket(let code): "the scripted origin could not listen on 127.0.0.1: \(String(cString: strerror(code)))"
        case .thread(let error): "the scripted origin could not start: \(error)"
        }
    }
}
