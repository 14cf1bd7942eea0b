import Foundation
import ProcessKit
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// ``SignalRelay``: every signal reaches its observers whichever thread the kernel picks, and the
/// previous disposition comes back with the last observer. SIGUSR2 stands in for SIGTERM and
/// SIGHUP (the test runner's own must stay as they are).
@Suite("SignalRelay", .serialized)
struct SignalRelayTests {
    /// The signal's handler as a number (function pointers are not Equatable).
    static func disposition(_ signal: Int32) -> Int {
        var current = sigaction()
        sigaction(signal, nil, &current)
        return unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self)
    }

    static let ignored = unsafeBitCast(SIG_IGN, to: Int.self)

    @Test("30 signals, each waited for, with threads that do not block it: every one arrives")
    func everySignalArrives() async throws {
        let relay = try #require(SignalRelay.shared)
        let count = Mutex(0)
        let token = relay.observe(SIGUSR2) { count.withLock { $0 += 1 } }
        defer { relay.stopObserving(token) }
        // Threads with SIGUSR2 unblocked, as libcurl's or a server's would be.
        let stop = Mutex(false)
        for _ in 0..<4 {
            Thread { while !stop.withLock({ $0 }) { usleep(1_000) } }.start()
        }
        defer { stop.withLock { $0 = true } }
        for sent in 1...30 {
            kill(getpid(), SIGUSR2)
            var waited = 0
            while count.withLock({ $0 }) < sent && waited < 500 {
                try await Task.sleep(for: .milliseconds(10))
                waited += 1
            }
            #expect(count.withLock { $0 } == sent, "signal \(sent) did not arrive within 5 s")
        }
    }

    @Test("the disposition before the first observer comes back after the last one")
    func previousDispositionComesBack() throws {
        let relay = try #require(SignalRelay.shared)
        signal(SIGUSR2, SIG_IGN)
        defer { signal(SIGUSR2, SIG_DFL) }
        let first = relay.observe(SIGUSR2) {}
        let second = relay.observe(SIGUSR2) {}
        #expect(Self.disposition(SIGUSR2) != Self.ignored)
        relay.stopObserving(first)
        #expect(Self.disposition(SIGUSR2) != Self.ignored, "one observer is left")
        relay.stopObserving(second)
        #expect(Self.disposition(SIGUSR2) == Self.ignored)
        // A token stopped twice changes nothing.
        relay.stopObserving(second)
        #expect(Self.disposition(SIGUSR2) == Self.ignored)
    }

    @Test("arrivals(of:) yields each signal and lets it go when its consumer ends")
    func arrivalsStream() async throws {
        let relay = try #require(SignalRelay.shared)
        let before = Self.disposition(SIGUSR2)
        let arrived = Task {
            var seen = 0
            for await _ in relay.arrivals(of: SIGUSR2) {
                seen += 1
                if seen == 2 { break }
            }
            return seen
        }
        // Until the stream observes, a signal would take the default action (end the runner).
        for _ in 0..<500 where Self.disposition(SIGUSR2) == before { try await Task.sleep(for: .milliseconds(2)) }
        try #require(Self.disposition(SIGUSR2) != before)
        kill(getpid(), SIGUSR2)
        try await Task.sleep(for: .milliseconds(100))
        kill(getpid(), SIGUSR2)
        #expect(await arrived.value == 2)
        for _ in 0..<500 where Self.disposition(SIGUSR2) != before { try await Task.sleep(for: .milliseconds(2)) }
        #expect(Self.disposition(SIGUSR2) == before)
    }
}
