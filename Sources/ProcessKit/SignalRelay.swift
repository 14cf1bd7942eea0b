import CLinux
import Foundation
import Synchronization
import ThreadKit

#if canImport(Glibc)
    import Glibc
#endif

/// The write end of the relay's pipe: set once, before any handler is installed, and only read
/// afterwards (in the handler, where nothing may lock).
nonisolated(unsafe) private var relayPipeWrite: Int32 = -1

/// The one `sigaction` handler: the signal's number, one byte, into the pipe. `write` is
/// async-signal-safe, and nothing else runs here.
private func relaySignalHandler(_ signal: Int32) {
    let saved = errno
    var byte = UInt8(truncatingIfNeeded: signal)
    _ = write(relayPipeWrite, &byte, 1)
    errno = saved
}

/// Delivers signals (SIGINT, SIGTERM, SIGHUP) to callbacks, whichever thread the kernel picks.
///
/// A plain `sigaction` handler writes the signal's number to a pipe, and a thread of its own
/// reads the pipe and calls the callbacks (the self-pipe way). A Dispatch signal source, which
/// swift-service-lifecycle's `UnixSignalsSequence` uses, loses signals on Linux: it sets the
/// signal to `SIG_IGN` and reads a `signalfd`, which sees a signal only while every thread blocks
/// it, so one delivered to a thread that does not (a thread libcurl, a server or the test runner
/// started) is dropped. `serve` once kept serving after a SIGTERM that way, and `watch` could.
///
/// Process-wide, like signal dispositions: ``shared``. While a signal has an observer, its
/// handler is installed; when its last observer goes, its previous disposition comes back.
public final class SignalRelay: Sendable {
    /// An observation; pass it to ``stopObserving(_:)``.
    public struct Token: Hashable, Sendable {
        fileprivate let id: UInt64
        fileprivate let signal: Int32
    }

    private struct State {
        var nextID: UInt64 = 1
        var observers: [Int32: [UInt64: @Sendable () -> Void]] = [:]
        /// Each observed signal's disposition before the relay took it over.
        var previous: [Int32: sigaction] = [:]
    }

    private let state = Mutex(State())
    private let readEnd: Int32

    /// The process's relay; nil only if no pipe or no reading thread could be made (out of
    /// descriptors, or at a task limit, at start): signals then keep their default action.
    public static let shared: SignalRelay? = SignalRelay()

    private init?() {
        var ends: [Int32] = [-1, -1]
        guard clinux_pipe_cloexec(&ends) == 0 else { return nil }
        // A flood of signals must never block the handler: a full pipe drops the extra bytes,
        // and one byte per signal number already pending is enough.
        _ = fcntl(ends[1], F_SETFL, fcntl(ends[1], F_GETFL) | O_NONBLOCK)
        readEnd = ends[0]
        // The handler writes only once a thread reads: a caught signal nobody reads would end
        // nothing (SIGTERM ignored for good).
        do {
            try DetachedThread.start(name: "signal relay") { [self] in readLoop() }
        } catch {
            close(ends[0])
            close(ends[1])
            return nil
        }
        relayPipeWrite = ends[1]
    }

    private func readLoop() {
        var bytes = [UInt8](repeating: 0, count: 64)
        while true {
            let count = bytes.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return }
            for byte in bytes.prefix(count) {
                let signal = Int32(byte)
                let actions = state.withLock { $0.observers[signal].map { Array($0.values) } ?? [] }
                for action in actions { action() }
            }
        }
    }

    /// Calls `action` (on the relay's thread) each time `signal` arrives, until
    /// ``stopObserving(_:)``. Installs the relay's handler for `signal` with the first observer.
    public func observe(_ signal: Int32, _ action: @escaping @Sendable () -> Void) -> Token {
        state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            if state.observers[signal, default: [:]].isEmpty {
                var handling = sigaction()
                handling.__sigaction_handler.sa_handler = relaySignalHandler
                handling.sa_flags = SA_RESTART
                sigemptyset(&handling.sa_mask)
                var old = sigaction()
                sigaction(signal, &handling, &old)
                state.previous[signal] = old
            }
            state.observers[signal, default: [:]][id] = action
            return Token(id: id, signal: signal)
        }
    }

    /// Ends an observation. The signal's previous disposition comes back with its last observer.
    public func stopObserving(_ token: Token) {
        state.withLock { state in
            guard state.observers[token.signal]?.removeValue(forKey: token.id) != nil else { return }
            if state.observers[token.signal]?.isEmpty ?? true,
                var old = state.previous.removeValue(forKey: token.signal)
            {
                sigaction(token.signal, &old, nil)
            }
        }
    }

    /// `signal`'s arrivals as a stream; the observation ends with the stream's consumer.
    public func arrivals(of signal: Int32) -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let token = observe(signal) { continuation.yield() }
        continuation.onTermination = { [self] _ in stopObserving(token) }
        return stream
    }
}
