import Foundation
import PercentDecoding
import Synchronization
import ToolSupport

/// A loopback HTTP server that serves a folder the way GitHub raw or nginx serve static content,
/// with a request log and injectable faults for tests.
///
/// It answers GET and HEAD for regular files below ``root`` only, with `ETag`, `Last-Modified`,
/// `If-None-Match`, `If-Modified-Since`, single byte ranges, `If-Range`, streamed bodies and any
/// caching headers a test sets (``setResponseHeaders(_:forPath:)``). Folders, missing files and
/// any path that would leave the root answer 404.
///
/// The StorageServer guide shows it in compiled tests: publishing versions, faults, serving
/// from a command.
///
/// For a long-running process, ``start()`` returns the base URL and ``stop()`` ends the
/// connections; ``run(onListening:)`` does both around a wait for cancellation.
public final class StorageServer: Sendable {
    /// How the server listens, streams and misbehaves, fixed at init.
    public let configuration: Configuration

    let state: ServerState
    private let lifecycle = Mutex(Lifecycle.idle)

    /// A server for the files below `root`; it listens once ``start()`` is called.
    public init(root: URL, configuration: Configuration = Configuration()) {
        self.configuration = configuration
        self.state = ServerState(root: root.standardizedFileURL)
    }

    // MARK: Root

    /// The folder being served.
    public var root: URL {
        state.root
    }

    /// Serves `root` from the next request on; requests already streaming finish from the old one.
    /// A missing folder is allowed here and answers every request with 404.
    public func setRoot(_ root: URL) {
        state.root = root.standardizedFileURL
    }

    // MARK: Addresses

    /// `http://127.0.0.1:PORT/` while running, otherwise `nil`.
    public var baseURL: URL? {
        lifecycle.withLock { $0.baseURL }
    }

    /// The URL of `path` (decoded, with or without a leading `/`, such as `v2/a b.zip`) on the
    /// running server, percent-encoded.
    ///
    /// - Precondition: The server is running.
    public func url(for path: String) -> URL {
        guard let baseURL else {
            preconditionFailure(
                "StorageServer.url(for: \"\(path)\") called while the server is not running; call start() first")
        }
        // baseURL ends with "/"; the encoded path holds no characters URL(string:) rejects.
        let relative = Self.percentEncodedPath(path).dropFirst()
        return URL(string: baseURL.absoluteString + relative) ?? baseURL
    }

    /// `path` with a leading `/` and each component percent-encoded, so `/` inside the string
    /// always separates components.
    static func percentEncodedPath(_ path: String) -> String {
        let relative = path.utf8.first == UInt8(ascii: "/") ? Substring(path.utf8.dropFirst()) : Substring(path)
        // Split on the "/" byte: "/" plus a combining mark is a single Character.
        let encoded = relative.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
            .map { PercentEncoding.encodeComponent(Substring($0)) }
        return "/" + encoded.joined(separator: "/")
    }

    /// `path` as the log and the rules spell it: with one leading `/`.
    static func decodedPath(_ path: String) -> String {
        path.utf8.first == UInt8(ascii: "/") ? path : "/" + path
    }

    // MARK: Request log

    /// Every request answered since start or the last ``resetLog()``, oldest first.
    public func requests() -> [RequestRecord] {
        state.log
    }

    /// The most requests this server was answering at once (from a request's arrival to its
    /// answer's head, a ``Fault/delay(seconds:)`` included), since it started or since
    /// ``resetLog()``. With delayed answers, that is how many connections a client kept busy at once.
    public var peakConcurrentRequests: Int {
        state.peakAnswering
    }

    /// How many requests for `path` (decoded, with or without a leading `/`) have arrived and are
    /// not answered yet: a request held by a ``Fault/delay(seconds:)`` shows here at once, while
    /// ``requests()`` logs it only when it is answered.
    public func requestsInProgress(forPath path: String) -> Int {
        state.answering(path: Self.decodedPath(path))
    }

    /// Forgets the logged requests (and the peak of ``peakConcurrentRequests``).
    public func resetLog() {
        state.resetLog()
    }

    /// Calls `observer` with every request once it is answered (an access log, say). With
    /// `keepingLog: false` the requests are not kept for ``requests()`` as well, so a server that
    /// runs for days does not grow.
    public func observeRequests(keepingLog: Bool = true, _ observer: @escaping @Sendable (RequestRecord) -> Void) {
        state.observe(keepingLog: keepingLog, observer)
    }

    /// How many logged requests asked for `path` (decoded, with or without a leading `/`, such as
    /// `/a b.json`), whatever their method or answer. Names are compared byte for byte.
    public func requestCount(forPath path: String) -> Int {
        state.requestCount(for: Self.decodedPath(path))
    }

    /// The number of logged requests for each decoded path asked for, such as `["/a b.json": 2]`.
    ///
    /// Paths that differ only in Unicode normalization share a key, as `String` keys compare
    /// canonically; ``requestCount(forPath:)`` tells them apart.
    public func requestCounts() -> [String: Int] {
        state.requestCounts()
    }

    /// Body bytes sent for logged requests whose decoded path ends with `suffix`.
    public func bytesServed(forPathSuffix suffix: String) -> Int {
        state.log.lazy.filter { $0.path.hasSuffix(suffix) }.reduce(0) { $0 + $1.bodyBytes }
    }

    // MARK: Faults

    /// Applies `fault` to requests whose decoded path equals `path` (such as `/v2/a b.zip`),
    /// to the next `times` of them, or to all of them when `times` is `nil`.
    ///
    /// Rules are tried in the order added; the first live one that matches applies.
    public func injectFault(_ fault: Fault, forPath path: String, times: Int? = nil) {
        addRule(FaultRule(match: .path(Self.decodedPath(path)), fault: fault, remaining: times))
    }

    /// Applies `fault` to requests whose decoded path satisfies `matches`, to the next `times` of
    /// them, or to all of them when `times` is `nil`.
    ///
    /// `matches` runs under the server's lock: it must be quick and must not call the server.
    public func injectFault(_ fault: Fault, times: Int? = nil, where matches: @escaping @Sendable (String) -> Bool) {
        addRule(FaultRule(match: .predicate(matches), fault: fault, remaining: times))
    }

    /// Gives each request whose decoded path satisfies `matches`, and that no explicit rule
    /// catches, one of `faults` with probability `rate` (0...1), drawn from a generator seeded
    /// with `seed`. Replaces any earlier random faults; ``clearFaults()`` removes them.
    ///
    /// `matches` runs under the server's lock: it must be quick and must not call the server.
    public func injectRandomFaults(
        rate: Double, seed: UInt64, from faults: [Fault],
        where matches: @escaping @Sendable (String) -> Bool = { _ in true }
    ) {
        state.setRandomFaults(
            RandomFaults(rate: min(max(rate, 0), 1), faults: faults, matches: matches, random: SplitMix64(seed: seed)))
    }

    /// Removes every fault rule and releases responses currently stalled by ``Fault/stall``.
    public func clearFaults() {
        state.clearFaults()
    }

    private func addRule(_ rule: FaultRule) {
        if let remaining = rule.remaining, remaining <= 0 { return }
        state.addRule(rule)
    }

    var handler: StorageHandler {
        StorageHandler(state: state, configuration: configuration)
    }

    func withLifecycle<T>(_ body: (inout Lifecycle) -> T) -> T {
        lifecycle.withLock { body(&$0) }
    }
}
