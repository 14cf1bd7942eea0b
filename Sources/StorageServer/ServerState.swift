import Foundation
import Synchronization

/// The state every request reads: the root, the fault rules, the extra response headers and the
/// request log.
///
/// Handlers run concurrently on the server's connection threads and only need short, synchronous
/// reads and writes, so a `Mutex` fits better than an actor hop per request.
final class ServerState: Sendable {
    private struct Values {
        var root: URL
        var rules: [FaultRule] = []
        var log: [RequestRecord] = []
        /// Bumped by `clearFaults()`; stalls started under an older value give up.
        var faultGeneration = 0
        var randomFaults: RandomFaults?
        /// Extra headers by decoded path (`/a b.json`), names as the test spelled them.
        var responseHeaders: [String: [String: String]] = [:]
        var defaultCacheControl: String?
        /// Told of every answered request (an access log), if set.
        var observer: (@Sendable (RequestRecord) -> Void)?
        /// Whether answered requests are kept in `log` (a long-running `serve` keeps none).
        var keepsLog = true
        /// Requests being answered now, and the most at once since the log was last reset.
        var answering = 0
        var peakAnswering = 0
        /// Requests being answered now, by logged path.
        var answeringPaths: [String: Int] = [:]
    }

    private let values: Mutex<Values>

    init(root: URL) {
        values = Mutex(Values(root: root))
    }

    var root: URL {
        get { values.withLock { $0.root } }
        set { values.withLock { $0.root = newValue } }
    }

    // MARK: Faults

    func addRule(_ rule: FaultRule) {
        values.withLock { $0.rules.append(rule) }
    }

    func setRandomFaults(_ faults: RandomFaults?) {
        values.withLock { $0.randomFaults = faults }
    }

    /// The first live rule matching `path`, counted as used. Rules are tried in the order added;
    /// without one, the random faults (if any) draw.
    func takeFault(for path: String) -> Fault? {
        values.withLock { values in
            guard let index = values.rules.firstIndex(where: { $0.match.matches(path) }) else {
                return values.randomFaults?.draw(for: path)
            }
            let fault = values.rules[index].fault
            if let remaining = values.rules[index].remaining {
                if remaining <= 1 {
                    values.rules.remove(at: index)
                } else {
                    values.rules[index].remaining = remaining - 1
                }
            }
            return fault
        }
    }

    func clearFaults() {
        values.withLock {
            $0.rules.removeAll()
            $0.randomFaults = nil
            $0.faultGeneration += 1
        }
    }

    var faultGeneration: Int {
        values.withLock { $0.faultGeneration }
    }

    // MARK: Response headers

    func setResponseHeaders(_ headers: [String: String], for path: String) {
        values.withLock { $0.responseHeaders[path] = headers.isEmpty ? nil : headers }
    }

    func responseHeaders(for path: String) -> [String: String] {
        values.withLock { $0.responseHeaders[path] ?? [:] }
    }

    /// Sets or, for `nil`, removes header `name` of `path`, whatever case an earlier one was
    /// spelled in.
    func setResponseHeader(_ name: String, to value: String?, for path: String) {
        values.withLock { values in
            var headers = values.responseHeaders[path] ?? [:]
            for key in headers.keys where key.lowercased() == name.lowercased() {
                headers[key] = nil
            }
            headers[name] = value
            values.responseHeaders[path] = headers.isEmpty ? nil : headers
        }
    }

    var defaultCacheControl: String? {
        get { values.withLock { $0.defaultCacheControl } }
        set { values.withLock { $0.defaultCacheControl = newValue } }
    }

    /// The extra headers a file answer for `path` carries: the path's own, plus the default
    /// `Cache-Control` when the path sets none.
    func extraHeaders(for path: String) -> [String: String] {
        values.withLock { values in
            var headers = values.responseHeaders[path] ?? [:]
            if let fallback = values.defaultCacheControl,
                !headers.keys.contains(where: { $0.lowercased() == "cache-control" })
            {
                headers["Cache-Control"] = fallback
            }
            return headers
        }
    }

    // MARK: Log

    func record(_ record: RequestRecord) {
        let observer = values.withLock { values in
            if values.keepsLog { values.log.append(record) }
            return values.observer
        }
        observer?(record)
    }

    func observe(keepingLog: Bool, _ observer: (@Sendable (RequestRecord) -> Void)?) {
        values.withLock { values in
            values.observer = observer
            values.keepsLog = keepingLog
        }
    }

    var log: [RequestRecord] {
        values.withLock { $0.log }
    }

    func requestCount(for path: String) -> Int {
        values.withLock { values in
            // Bytes, not String ==: names that differ only in normalization are different files.
            values.log.reduce(0) { $1.path.utf8.elementsEqual(path.utf8) ? $0 + 1 : $0 }
        }
    }

    func requestCounts() -> [String: Int] {
        values.withLock { values in
            values.log.reduce(into: [:]) { $0[$1.path, default: 0] += 1 }
        }
    }

    func resetLog() {
        values.withLock { values in
            values.log.removeAll()
            values.peakAnswering = values.answering
        }
    }

    /// A request for `path` (as logged) arrived: counted as being answered until ``answered(_:)``.
    func answering(_ path: String) {
        values.withLock { values in
            values.answering += 1
            values.peakAnswering = max(values.peakAnswering, values.answering)
            values.answeringPaths[path, default: 0] += 1
        }
    }

    func answered(_ path: String) {
        values.withLock { values in
            values.answering -= 1
            values.answeringPaths[path, default: 1] -= 1
            if values.answeringPaths[path] == 0 { values.answeringPaths[path] = nil }
        }
    }

    func answering(path: String) -> Int {
        values.withLock { $0.answeringPaths[path] ?? 0 }
    }

    var peakAnswering: Int {
        values.withLock { $0.peakAnswering }
    }
}
