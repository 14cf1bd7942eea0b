import Foundation
import Testing

@testable import ContentSync

/// The two call sequences that broke the manager before its states carried the running task
/// (issue 10): each is driven deterministically through the scripted transport's gate.
@Suite("Quick play/pause and a reset racing a resume keep the manager's promises", .timeLimit(.minutes(3)))
struct CacheManagerRegressionTests {
    /// Pause cancels the update; play before it has wound down must start it again once it has.
    /// It used to end `suspended`, with nothing running.
    @Test func playPauseAndPlayAgainInQuickSuccessionEndsUpdated() async throws {
        try await withScriptedManager(serving: "1.0") { fixture in
            let manager = fixture.manager
            fixture.transport.hold()
            #expect(await manager.togglePlayPause() == .working)
            try await fixture.waitForHeldRequest()
            #expect(await manager.togglePlayPause() == .suspended)
            #expect(await manager.togglePlayPause() == .working)
            fixture.transport.release()
            let settled = try await fixture.waitForState("play was the last command") { $0 != .working }
            #expect(settled == .succeeded)
            try fixture.expectTree(is: "1.0")
        }
    }

    /// A resume that arrives while a reset waits for the running update to stop: the reset
    /// finishes (it used to be lost, fail as "another update", or crash the process in
    /// `updateEnded`), and the resume then runs an update from scratch.
    @Test(arguments: 0..<8)
    func resetRacingResumeFinishesTheResetThenUpdates(round: Int) async throws {
        try await withScriptedManager(serving: "1.0") { fixture in
            let manager = fixture.manager
            try await manager.checkForUpdates()
            fixture.serve("1.2")
            let update = try await fixture.startHeldUpdate(manager)
            let reset = Task { try await manager.reset() }
            try await fixture.waitForState("reset was called") { $0 != .working }
            for _ in 0..<round { await Task.yield() }
            let resumed = Task { try await manager.resume() }
            for _ in 0..<(round % 3) { await Task.yield() }
            fixture.transport.release()
            _ = try? await update.value
            await #expect(throws: Never.self, "the reset finishes") { try await reset.value }
            // The resume's outcome is the update after the reset.
            _ = try? await resumed.value
            #expect(await manager.state == .succeeded, "resume was the last command")
            try fixture.expectTree(is: "1.2")
        }
    }
}
