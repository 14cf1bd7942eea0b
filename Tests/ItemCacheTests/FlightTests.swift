import Foundation
import Synchronization
import Testing

@testable import ItemCache

/// A caller counts as a waiter of a flight from its claim on: another caller's cancellation that
/// lands between that claim and its `wait()` must not cancel the fetch under it. (On a loaded CI
/// machine the loader's "a waiter that cancels leaves alone" test saw the kept waiter get the
/// other's cancellation.)
@Suite("A flight's waiters count from their claim")
struct FlightTests {
    @Test("a caller that claimed the flight but has not waited yet keeps it alive when the others cancel")
    func claimCountsAsWaiting() async throws {
        let table = FlightTable<Int>()
        let (flight, isNew) = table.claim("k")
        #expect(isNew)
        table.start(flight, for: "k") {
            try await Task.sleep(for: .milliseconds(300))
            return 7
        }
        let (joined, joinedIsNew) = table.claim("k")
        #expect(!joinedIsNew)
        #expect(joined === flight)
        // The first caller waits and cancels while the second is still on its way to wait().
        let first = Task { try await flight.wait() }
        first.cancel()
        let firstResult = await first.result
        #expect(throws: CancellationError.self) { try firstResult.get() }
        #expect(!flight.isAbandoned)
        #expect(try await joined.wait() == 7)
    }

    @Test("when every caller that claimed it has cancelled, the fetch is cancelled and a new claim starts afresh")
    func lastCancellationStillCancels() async throws {
        let table = FlightTable<Int>()
        let (flight, _) = table.claim("k")
        let bodyCancelled = Mutex(false)
        table.start(flight, for: "k") {
            do {
                try await Task.sleep(for: .seconds(30))
            } catch {
                bodyCancelled.withLock { $0 = true }
                throw error
            }
            return 1
        }
        let (joined, _) = table.claim("k")
        let first = Task { try await flight.wait() }
        let second = Task { try await joined.wait() }
        first.cancel()
        second.cancel()
        _ = await first.result
        _ = await second.result
        await flight.settled()
        #expect(flight.isAbandoned)
        #expect(bodyCancelled.withLock { $0 })
        let (next, nextIsNew) = table.claim("k")
        #expect(nextIsNew)
        #expect(next !== flight)
    }

    @Test("a background refresh that claims a running flight does not hold it alive")
    func backgroundClaimDoesNotJoin() async throws {
        let table = FlightTable<Int>()
        let (flight, _) = table.claim("k")
        table.start(flight, for: "k") {
            try await Task.sleep(for: .seconds(30))
            return 1
        }
        let (background, backgroundIsNew) = table.claim("k", keepAlive: true, waits: false)
        #expect(!backgroundIsNew)
        #expect(background === flight)
        let only = Task { try await flight.wait() }
        only.cancel()
        _ = await only.result
        await flight.settled()
        #expect(flight.isAbandoned)
    }
}
