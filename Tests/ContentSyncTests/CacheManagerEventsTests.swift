import Foundation
import Testing

@testable import ContentSync

/// What observers are told, and what callers get back.
@Suite("The manager tells observers everything once, and callers their outcome", .timeLimit(.minutes(3)))
struct CacheManagerEventsTests {
    /// The events of `stream` up to and including the first that `isLast` accepts.
    func events(_ stream: AsyncStream<CacheManagerEvent>, through isLast: (CacheManagerEvent) -> Bool) async
        -> [CacheManagerEvent]
    {
        var seen: [CacheManagerEvent] = []
        for await event in stream {
            seen.append(event)
            if isLast(event) { break }
        }
        return seen
    }

    /// The events without progress, as comparable text.
    func outline(_ events: [CacheManagerEvent]) -> [String] {
        events.compactMap { event in
            switch event {
            case .stateChanged(let state): "state \(state)"
            case .progress: nil
            case .connectionNotAllowed: "connectionNotAllowed"
            case .finished(let report): "finished \(report.outcome) \(report.toVersion)"
            case .failed(let error): "failed \(error.code)"
            case .suspended: "suspended"
            }
        }
    }

    @Test func aStreamStartsWithTheCurrentState() async throws {
        try await withScriptedManager(serving: "1.0") { fixture in
            let manager = fixture.manager
            #expect(outline(await events(await manager.events()) { _ in true }) == ["state ready"])
            try await manager.checkForUpdates()
            #expect(outline(await events(await manager.events()) { _ in true }) == ["state succeeded"])
        }
    }

    /// An observer that subscribes just before the check sees it all, each state once.
    @Test func anObserverSubscribedJustBeforeACheckMissesNothing() async throws {
        try await withScriptedManager(serving: "1.0") { fixture in
            let manager = fixture.manager
            let stream = await manager.events()
            let report = try await manager.checkForUpdates()
            // Sent before the caller got the report: already in the stream's buffer.
            let seen = await events(stream) { if case .finished = $0 { true } else { false } }
            #expect(outline(seen) == ["state ready", "state working", "state succeeded", "finished restored 1.0"])
            #expect(seen.contains { if case .progress = $0 { true } else { false } })
            #expect(report.toVersion.text == "1.0")
        }
    }

    /// Pausing is not a failure: observers get `.suspended`, and the caller a `cancelled` error.
    @Test func aPauseIsItsOwnEventAndNoStateIsSentTwice() async throws {
        try await withScriptedManager(serving: "1.0") { fixture in
            let manager = fixture.manager
            let stream = await manager.events()
            let update = try await fixture.startHeldUpdate(manager)
            await manager.suspend()
            await manager.suspend()
            let error = await #expect(throws: SyncError.self) { try await update.value }
            #expect(error?.code == .cancelled)
            #expect(await manager.state == .suspended)
            let seen = await events(stream) { if case .suspended = $0 { true } else { false } }
            #expect(outline(seen) == ["state ready", "state working", "state suspended", "suspended"])
            // Play and pause again: each state once more, and the second stop its own event too.
            #expect(await manager.togglePlayPause() == .working)
            try await fixture.waitForHeldRequest()
            #expect(await manager.togglePlayPause() == .suspended)
            await manager.waitUntilIdle()
            fixture.transport.release()
            let again = await events(stream) { if case .suspended = $0 { true } else { false } }
            #expect(outline(again) == ["state working", "state suspended", "suspended"])
        }
    }

    /// `resume()` returns the outcome of the update it continues.
    @Test func resumeCanBeAwaitedForTheOutcome() async throws {
        try await withScriptedManager(serving: "1.0") { fixture in
            let manager = fixture.manager
            let update = try await fixture.startHeldUpdate(manager)
            await manager.suspend()
            _ = try? await update.value
            fixture.transport.release()
            let report = try await manager.resume()
            #expect(report.outcome == .restored && report.toVersion.text == "1.0")
            #expect(await manager.state == .succeeded)
            try fixture.expectTree(is: "1.0")
        }
    }

    /// A caller joining an update that is paused and played again gets the outcome of the update
    /// that finishes, not the cancellation in between.
    @Test func aCallerOfAnUpdatePlayedAgainGetsTheFinalOutcome() async throws {
        try await withScriptedManager(serving: "1.0") { fixture in
            let manager = fixture.manager
            let update = try await fixture.startHeldUpdate(manager)
            #expect(await manager.togglePlayPause() == .suspended)
            #expect(await manager.togglePlayPause() == .working)
            fixture.transport.release()
            let report = try await update.value
            #expect(report.toVersion.text == "1.0")
        }
    }

    /// Cancelling the task that awaits a check suspends the update; the caller returns at once.
    @Test func cancellingTheCallerSuspendsTheUpdate() async throws {
        try await withScriptedManager(serving: "1.0") { fixture in
            let manager = fixture.manager
            let update = try await fixture.startHeldUpdate(manager)
            update.cancel()
            let error = await #expect(throws: SyncError.self) { try await update.value }
            #expect(error?.code == .cancelled)
            #expect(await manager.state == .suspended)
            fixture.transport.release()
            await manager.waitUntilIdle()
            let attempt = try await manager.history().first
            #expect(attempt?.outcome == .cancelled)
        }
    }

    /// A reset waits for the update it stops, and the update's caller learns it was stopped.
    @Test func aResetStopsTheUpdateFirstAndEndsReady() async throws {
        try await withScriptedManager(serving: "1.0") { fixture in
            let manager = fixture.manager
            try await manager.checkForUpdates()
            fixture.serve("1.2")
            let stream = await manager.events()
            let update = try await fixture.startHeldUpdate(manager)
            let reset = Task { try await manager.reset() }
            try await fixture.waitForState { $0 == .resetting }
            fixture.transport.release()
            try await reset.value
            let error = await #expect(throws: SyncError.self) { try await update.value }
            #expect(error?.code == .cancelled)
            #expect(await manager.state == .ready)
            #expect(!FileManager.default.fileExists(atPath: fixture.content))
            let seen = await events(stream) { if case .stateChanged(.ready) = $0 { true } else { false } }
            #expect(outline(seen) == ["state succeeded", "state working", "state resetting", "state ready"])
        }
    }
}
