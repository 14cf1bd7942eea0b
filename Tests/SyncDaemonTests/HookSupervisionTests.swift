import Testing

@testable import SyncDaemon

/// The hook supervisor's decisions, driven without processes or a real clock.
@Suite struct HookSupervisionTests {
    typealias Action = HookSupervision.Action
    typealias Ending = HookSupervision.Ending

    /// What the supervisor loop can observe.
    enum Event {
        case tick(Int)
        case cancel(Int)
        case exited(Int)
        case outputClosed
    }

    static let start = ContinuousClock.now
    static let limits = HookSupervision.Limits(
        timeout: .seconds(10), terminationGrace: .seconds(2), outputGrace: .seconds(1))

    /// Feeds `events` (times in seconds from the start) and returns the actions taken and the ending.
    func drive(_ events: [Event]) -> (actions: [Action], ending: Ending?) {
        var machine = HookSupervision(start: Self.start, limits: Self.limits)
        var actions: [Action] = []
        for event in events {
            let action: Action
            switch event {
            case .tick(let second): action = machine.tick(Self.start + .seconds(second))
            case .cancel(let second): action = machine.cancel(Self.start + .seconds(second))
            case .exited(let second): action = machine.exited(Self.start + .seconds(second))
            case .outputClosed:
                machine.outputClosed()
                action = .none
            }
            if action != .none { actions.append(action) }
        }
        return (actions, machine.ending)
    }

    @Test func aHookThatExitsInTimeIsNeverSignalled() {
        let run = drive([.tick(1), .outputClosed, .exited(2)])
        #expect(run.actions == [])
        #expect(run.ending == Ending(stopped: nil, killed: false))
    }

    @Test func outputIsReadUntilItClosesAfterTheExit() {
        #expect(drive([.exited(2)]).ending == nil, "still reading its output")
        #expect(drive([.exited(2), .outputClosed]).ending == Ending(stopped: nil, killed: false))
    }

    @Test func outputStillOpenAfterTheGraceIsAbandoned() {
        #expect(drive([.exited(2), .tick(2)]).ending == nil)
        #expect(drive([.exited(2), .tick(3)]).ending == Ending(stopped: nil, killed: false))
    }

    @Test func aTimeoutSendsSIGTERMThenSIGKILLAfterTheGrace() {
        let run = drive([.tick(9), .tick(10), .tick(11), .tick(12), .exited(12), .outputClosed])
        #expect(run.actions == [.terminate, .kill])
        #expect(run.ending == Ending(stopped: .timedOut, killed: true))
    }

    @Test func aHookEndingOnSIGTERMTakesItsLeftoversWithIt() {
        // SIGKILL after the exit goes to what it left in its group, not to the hook.
        let run = drive([.tick(10), .exited(11), .outputClosed])
        #expect(run.actions == [.terminate, .kill])
        #expect(run.ending == Ending(stopped: .timedOut, killed: false))
    }

    @Test func cancellingStopsTheHookLikeATimeoutAndOnlyOnce() {
        let run = drive([.cancel(1), .cancel(2), .tick(3), .exited(3), .outputClosed])
        #expect(run.actions == [.terminate, .kill])
        #expect(run.ending == Ending(stopped: .cancelled, killed: true))
        #expect(
            drive([.exited(1), .cancel(1), .outputClosed]).ending == Ending(stopped: nil, killed: false),
            "a cancellation after the exit changes nothing")
    }

    @Test func theLoopNeverWaitsPastADeadline() {
        var machine = HookSupervision(start: Self.start, limits: Self.limits)
        #expect(machine.wait(Self.start) == .milliseconds(100))
        #expect(machine.wait(Self.start + .milliseconds(9_950)) == .milliseconds(50))
        machine.outputClosed()
        #expect(machine.wait(Self.start) == .milliseconds(20))
        _ = machine.exited(Self.start + .seconds(1))
        #expect(machine.isFinished)
        #expect(machine.wait(Self.start + .seconds(1)) == .zero)
    }
}
