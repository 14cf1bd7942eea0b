import Foundation
import Testing

import enum Transport.HTTPDate

@testable import StorageServer

#if canImport(Glibc)
    import Glibc
#endif

/// The server's own HTTP/1.1 reading: heads parsed strictly, and every bound a client could push
/// on (head size and time, idle connections, how many are open) holding over real sockets.
@Suite(.timeLimit(.minutes(3)))
struct StorageServerConnectionTests {
    // MARK: Heads, as a table

    @Test(arguments: [
        ("GET /a%20b.zip HTTP/1.1\r\nHost: x\r\nRange: bytes=0-1\r\n\r\n", "GET", "/a%20b.zip", 1, true),
        ("HEAD /a?x=1 HTTP/1.1\nHost: x\n\n", "HEAD", "/a", 1, true),
        ("GET http://127.0.0.1:80/v1/a.txt?q HTTP/1.1\r\n\r\n", "GET", "/v1/a.txt", 1, true),
        ("GET http://127.0.0.1:80 HTTP/1.1\r\n\r\n", "GET", "/", 1, true),
        ("GET / HTTP/1.0\r\n\r\n", "GET", "/", 0, false),
        ("GET / HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n", "GET", "/", 1, false),
    ])
    func headsThatParse(text: String, method: String, path: String, minor: Int, keepsAlive: Bool) throws {
        let head = try RequestHead.parse(ArraySlice(text.utf8))
        #expect(head.method == method)
        #expect(head.path == path)
        #expect(head.minorVersion == minor)
        #expect(head.keepsAlive == keepsAlive)
    }

    @Test func headerLinesKeepTheirOrderAndRepeatedOnesJoin() throws {
        let head = try RequestHead.parse(
            ArraySlice("GET / HTTP/1.1\r\nIf-None-Match: \"a\"\r\nHOST:  x \t\r\nif-none-match: \"b\"\r\n\r\n".utf8))
        #expect(head.headers.map(\.name) == ["if-none-match", "host", "if-none-match"])
        #expect(head.value("host") == "x")
        #expect(head.value("if-none-match") == "\"a\", \"b\"")
        #expect(head.value("range") == nil)
    }

    @Test(arguments: [
        ("GET /\r\n\r\n", 400),
        ("GET  / HTTP/1.1\r\n\r\n", 400),
        ("GET / HTTP/1.1 extra\r\n\r\n", 400),
        ("G(T / HTTP/1.1\r\n\r\n", 400),
        ("GET /a\u{7F} HTTP/1.1\r\n\r\n", 400),
        ("GET * HTTP/1.1\r\n\r\n", 400),
        ("GET ftp://x/a HTTP/1.1\r\n\r\n", 400),
        ("GET / HTTP/2.0\r\n\r\n", 505),
        ("GET / HTTP/0.9\r\n\r\n", 505),
        ("GET / HTTP/1.10\r\n\r\n", 400),
        ("GET / http/1.1\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nno colon\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\n: empty name\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nX: a\u{1}b\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", 400),
    ])
    func headsThatAreRefused(text: String, status: Int) {
        #expect(throws: RequestHead.Refusal.self) { try RequestHead.parse(ArraySlice(text.utf8)) }
        do {
            _ = try RequestHead.parse(ArraySlice(text.utf8))
        } catch {
            #expect(error.status == status)
        }
    }

    @Test(
        arguments: [
            ("GET / HTTP/1.1\r\n\r\n", 18),
            ("GET / HTTP/1.1\n\n", 16),
            ("GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /b", 27),
            ("GET / HTTP/1.1\r\nHost: x\r\n", nil),
            ("GET / HTTP/1.1\r\n\r", nil),
            ("", nil),
        ] as [(String, Int?)])
    func whereAHeadEnds(text: String, end: Int?) {
        let bytes = Array(text.utf8)
        #expect(RequestHead.end(in: bytes, from: 0) == end)
        // Bytes arriving one at a time, each search going on from two before the new byte as the
        // connection's does, find the same end.
        var searched = 0
        var found: Int?
        for count in 0...bytes.count where found == nil {
            found = RequestHead.end(in: Array(bytes.prefix(count)), from: searched)
            searched = max(0, count - 2)
        }
        #expect(found == end)
    }

    @Test func emptyLinesBeforeTheRequestLineAreCounted() {
        #expect(RequestHead.leadingLineEnds(in: Array("\r\n\n\r\nGET".utf8)) == 5)
        #expect(RequestHead.leadingLineEnds(in: Array("GET".utf8)) == 0)
    }

    @Test(
        arguments: [
            ("0", 0), ("512", 512), ("5, 5", 5), ("5,5", 5), ("5, 6", nil), ("+5", nil), ("-1", nil), ("", nil),
            ("0x10", nil), ("1e3", nil), ("99999999999999999999999", nil), (" 7 ", 7),
        ] as [(String, Int?)])
    func contentLengthsAreReadStrictly(value: String, count: Int?) {
        #expect(Connections.contentLength(value) == count)
    }

    // MARK: Bounds, over real sockets

    /// Found by timing 2,000 small files through one curl: 90 s, because Nagle's algorithm held
    /// each body until curl acknowledged its head, 40 ms later.
    @Test func acceptedConnectionsSendWithoutNagleDelayAndTimeOutStalledWrites() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var limits = Connections.Limits()
        limits.sendTimeout = timeval(tv_sec: 7, tv_usec: 0)
        Connections.configure(listener, limits: limits)
        var noDelay: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        #expect(getsockopt(listener, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, &length) == 0)
        #expect(noDelay == 1)
        var timeout = timeval()
        length = socklen_t(MemoryLayout<timeval>.size)
        #expect(getsockopt(listener, SOL_SOCKET, SO_SNDTIMEO, &timeout, &length) == 0)
        #expect(timeout.tv_sec == 7)
    }

    /// An audit: FlyingFox read a head without a bound, in time that grew with the square of a
    /// line's length (38 s of CPU for one 32 KB line on a debug build), while others waited.
    @Test func aHeadOverTheLimitIsAnswered431AtOnceAndOthersAreServed() async throws {
        var configuration = StorageServer.Configuration()
        configuration.limits.maxHead = 8 * 1024
        try await withServedFixture(configuration: configuration, prepare: { try $0.write("a.txt", "a") }) {
            server, fixture in
            let port = try #require(server.baseURL?.port)
            let socket = try RawClient(port: port)
            let long = "GET /a.txt HTTP/1.1\r\nX-Long: " + String(repeating: "x", count: 64 * 1024)
            _ = socket.send(long)
            let answer = socket.readAll()
            #expect(answer.hasPrefix("HTTP/1.1 431 "), "\(answer.prefix(200))")
            #expect(answer.contains("Connection: close"))
            #expect(try await curl(server.url(for: "a.txt"), in: fixture.scratch).status == 200)
            // The refused head was never answered as a request.
            #expect(server.requests().count == 1)

            // A whole head one byte over, in one write, is refused too (it was served when it
            // arrived whole within the last read).
            let exact = try RawClient(port: port)
            let line = "GET /a.txt HTTP/1.1\r\nX: "
            let over = line + String(repeating: "y", count: 8 * 1024 + 1 - line.utf8.count - 4) + "\r\n\r\n"
            #expect(over.utf8.count == 8 * 1024 + 1)
            _ = exact.send(over)
            #expect(exact.readAll().hasPrefix("HTTP/1.1 431 "))
        }
    }

    /// An audit: a connection counted as idle from its accept, and the server made room as
    /// soon as it was full, so a request already sent was closed unanswered, and an idle
    /// client was closed with nobody waiting. Now room is made only for a connection that
    /// waits, and never from one whose request has arrived.
    @Test func roomIsMadeOnlyForAConnectionThatWaits() async throws {
        var configuration = StorageServer.Configuration()
        configuration.limits.maxConnections = 2
        // Long enough that no curl below, however slow to send after it connects, is closed
        // first: room comes from the two idle clients once their grace is over.
        configuration.limits.firstRequestGrace = .seconds(2)
        try await withServedFixture(configuration: configuration, prepare: { try $0.write("a.txt", "a") }) {
            server, fixture in
            let port = try #require(server.baseURL?.port)
            let first = try RawClient(port: port)
            let second = try RawClient(port: port)
            try await Task.sleep(for: .milliseconds(400))
            #expect(first.isOpen && second.isOpen, "an idle client was closed with nobody waiting")
            let results = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<6 {
                    group.addTask { try await curl(server.url(for: "a.txt"), in: fixture.scratch).status }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(results == Array(repeating: 200, count: 6), "a request that had arrived was closed unanswered")
        }
    }

    @Test func aBodyTooLongToDropIsAnswered413Whole() async throws {
        var configuration = StorageServer.Configuration()
        configuration.limits.maxDiscardedBody = 1024
        try await withServedFixture(configuration: configuration, prepare: { try $0.write("a.txt", "a") }) {
            server, _ in
            let socket = try RawClient(port: try #require(server.baseURL?.port))
            _ = socket.send(
                "GET /a.txt HTTP/1.1\r\nContent-Length: 300000\r\n\r\n" + String(repeating: "z", count: 300_000))
            let (answer, closed) = socket.readUntilClosed()
            #expect(answer.hasPrefix("HTTP/1.1 413 "), "\(answer.prefix(100))")
            #expect(answer.hasSuffix("413 Content Too Large\n"), "the answer arrived whole, not cut by a reset")
            #expect(closed)
        }
    }

    @Test func everyAnswerCarriesItsDate() async throws {
        try await withServedFixture(prepare: { try $0.write("a.txt", "a") }) { server, fixture in
            let result = try await curl(server.url(for: "a.txt"), in: fixture.scratch)
            let date = try #require(result.headers["date"])
            let seconds = try #require(HTTPDate.parse(date, currentYear: HTTPDate.currentYear()))
            #expect(abs(seconds - Int64(Date().timeIntervalSince1970)) < 600)
        }
    }

    @Test func aHeadThatTakesTooLongIsAnswered408() async throws {
        var configuration = StorageServer.Configuration()
        configuration.limits.headDeadline = .milliseconds(300)
        try await withServedFixture(configuration: configuration, prepare: { try $0.write("a.txt", "a") }) {
            server, _ in
            let socket = try RawClient(port: try #require(server.baseURL?.port))
            _ = socket.send("GET /a.txt HTTP/1.1\r\nHost: x\r\n")
            let answer = socket.readAll()
            #expect(answer.hasPrefix("HTTP/1.1 408 "), "\(answer)")
            #expect(server.requests().isEmpty)
        }
    }

    @Test func anIdleConnectionIsClosedQuietly() async throws {
        var configuration = StorageServer.Configuration()
        configuration.limits.idleDeadline = .milliseconds(300)
        try await withServedFixture(configuration: configuration, prepare: { try $0.write("a.txt", "a") }) {
            server, _ in
            let socket = try RawClient(port: try #require(server.baseURL?.port))
            _ = socket.send("GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n")
            // The answer, then the close of an idle keep-alive connection: no second answer.
            let (answer, closed) = socket.readUntilClosed()
            #expect(answer.hasPrefix("HTTP/1.1 200 "), "\(answer)")
            #expect(answer.hasSuffix("\r\n\r\na"), "\(answer)")
            #expect(closed, "the server kept an idle connection past its deadline")
        }
    }

    /// Past the cap, the connection idle the longest is closed to make room, so a client that
    /// opens connections and sends nothing cannot lock others out.
    @Test func pastTheCapTheLongestIdleConnectionMakesRoom() async throws {
        var configuration = StorageServer.Configuration()
        configuration.limits.maxConnections = 4
        try await withServedFixture(configuration: configuration, prepare: { try $0.write("a.txt", "a") }) {
            server, fixture in
            let port = try #require(server.baseURL?.port)
            let idle = try (0..<12).map { _ in try RawClient(port: port) }
            let result = try await curl(server.url(for: "a.txt"), in: fixture.scratch)
            #expect(result.status == 200)
            #expect(result.body == Data("a".utf8))
            // The oldest idle ones were closed by the server, unanswered.
            for client in idle.prefix(4) {
                let (text, closed) = client.readUntilClosed()
                #expect(closed && text.isEmpty, "\(text)")
            }
        }
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
        try await withServedFixture(prepare: {
            try $0.write("a.txt", "first")
            try $0.write("b.txt", "second")
        }) { server, _ in
            let socket = try RawClient(port: try #require(server.baseURL?.port))
            _ = socket.send(
                "GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n\r\nGET /b.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            let answers = socket.readAll()
            let first = try #require(answers.range(of: "first"))
            let second = try #require(answers.range(of: "second"))
            #expect(first.upperBound < second.lowerBound)
            #expect(answers.components(separatedBy: "HTTP/1.1 200 OK").count == 3)
            #expect(server.requests().map(\.path) == ["/a.txt", "/b.txt"])
        }
    }

    @Test func aRequestBodyIsReadPastAndTheConnectionKept() async throws {
        try await withServedFixture(prepare: { try $0.write("a.txt", "a") }) { server, _ in
            let socket = try RawClient(port: try #require(server.baseURL?.port))
            _ = socket.send(
                "GET /a.txt HTTP/1.1\r\nContent-Length: 5\r\n\r\nGET /GET /a.txt HTTP/1.1\r\nConnection: close\r\n\r\n")
            let answers = socket.readAll()
            #expect(answers.components(separatedBy: "HTTP/1.1 200 OK").count == 3, "\(answers)")
            #expect(server.requests().map(\.path) == ["/a.txt", "/a.txt"])
        }
    }

    @Test(arguments: [
        "GET /a.txt HTTP/1.1\r\nContent-Length: 5, 6\r\n\r\n",
        "GET /a.txt HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "GET /a.txt HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
        "GET /a.txt HTTP/3.0\r\n\r\n",
    ])
    func aBadHeadIsRefusedAndTheConnectionClosed(head: String) async throws {
        try await withServedFixture(prepare: { try $0.write("a.txt", "a") }) { server, _ in
            let socket = try RawClient(port: try #require(server.baseURL?.port))
            _ = socket.send(head + "GET /a.txt HTTP/1.1\r\n\r\n")
            let answer = socket.readAll()
            #expect(answer.hasPrefix("HTTP/1.1 400 ") || answer.hasPrefix("HTTP/1.1 505 "), "\(answer)")
            #expect(answer.components(separatedBy: "HTTP/1.1 ").count == 2, "one answer, then the close: \(answer)")
            #expect(server.requests().isEmpty)
        }
    }

    @Test func anHTTP10RequestIsAnsweredAndClosed() async throws {
        try await withServedFixture(prepare: { try $0.write("a.txt", "a") }) { server, _ in
            let socket = try RawClient(port: try #require(server.baseURL?.port))
            _ = socket.send("GET /a.txt HTTP/1.0\r\n\r\n")
            let answer = socket.readAll()
            #expect(answer.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(answer)")
            #expect(answer.contains("\r\nConnection: close\r\n"))
            #expect(answer.hasSuffix("\r\n\r\na"))
        }
    }
}

/// A blocking TCP client for heads curl would never send; reads time out after 10 s, so a server
/// that never answers fails the test instead of hanging it.
final class RawClient {
    let descriptor: Int32

    init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EMFILE) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(descriptor)
            throw POSIXError(.ECONNREFUSED)
        }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(descriptor) }

    /// Whether the server has not closed its end (nothing to read and no end seen, now).
    var isOpen: Bool {
        var byte: UInt8 = 0
        let count = recv(descriptor, &byte, 1, Int32(MSG_DONTWAIT | MSG_PEEK))
        return count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
    }

    /// Sends `text`; false when the server closed first.
    func send(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }

    /// Everything the server sends until it closes (or 10 s of silence).
    func readAll() -> String {
        readUntilClosed().text
    }

    /// Everything the server sends, and whether it then closed (false: 10 s of silence).
    func readUntilClosed() -> (text: String, closed: Bool) {
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count == 0 || (count < 0 && errno == ECONNRESET) {
                return (String(decoding: received, as: UTF8.self), true)
            }
            if count < 0 { return (String(decoding: received, as: UTF8.self), false) }
            received += chunk[..<count]
        }
    }
}
