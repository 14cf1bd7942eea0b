import Foundation
import Testing
import ToolSupport

@testable import ContentSync
@testable import StorageFormat

/// The manager's decisions, driven without any I/O: the tasks are empty ones the test creates.
@Suite("The manager's controls do the right thing from every state", .timeLimit(.minutes(3)))
struct CacheManagerStateMachineTests {
    typealias Machine = CacheManagerStateMachine

    static let report = SyncReport(outcome: .restored, fromVersion: nil, toVersion: try! CacheVersion("1.0"))
    static let cancelled = SyncError(code: .cancelled, message: "cancelled")

    /// Performs a start action the way the manager does: a new task, reported to the machine.
    @discardableResult
    func start(_ action: Machine.Action, _ machine: inout Machine) -> Task<Void, Never>? {
        switch action {
        case .startUpdate:
            let task = Task<Void, Never> {}
            machine.updateStarted(task)
            return task
        case .startReset:
            let task = Task<Void, Never> {}
            machine.resetStarted(task)
            return task
        case .none, .cancelUpdate:
            return nil
        }
    }

    @Test func aCheckStartsOneUpdateOthersJoinAndItSucceeds() throws {
        var machine = Machine()
        #expect(machine.publicState == .ready)
        #expect(machine.checkForUpdates() == .startUpdate(overridingPolicy: false))
        let task = try #require(start(.startUpdate(overridingPolicy: false), &machine))
        #expect(machine.runningTask == task)
        #expect(machine.checkForUpdates() == .none)
        #expect(machine.resume(overridingPolicy: false) == .none)
        let end = machine.updateEnded(.success(Self.report))
        #expect(machine.publicState == .succeeded)
        #expect(machine.runningTask == nil)
        #expect((try? end.outcome?.get()) == Self.report)
        #expect(end.next == .none)
        guard case .finished(let report) = end.event else {
            Issue.record("event \(String(describing: end.event))")
            return
        }
        #expect(report == Self.report)
    }

    /// The first of the issue's two sequences.
    @Test func playPauseAndPlayAgainRestartsOnceTheCancelledUpdateHasStopped() throws {
        var machine = Machine()
        let first = try #require(start(machine.toggle(), &machine))
        #expect(machine.publicState == .working)
        #expect(machine.toggle() == .cancelUpdate(first))
        #expect(machine.publicState == .suspended)
        #expect(machine.toggle() == .none, "the cancelled task cannot be taken back; the next one waits for it to stop")
        #expect(machine.publicState == .working)
        let end = machine.updateEnded(.failure(Self.cancelled))
        #expect(end.outcome == nil, "callers wait for the update that follows")
        #expect(end.event == nil)
        #expect(end.next == .startUpdate(overridingPolicy: false))
        #expect(machine.publicState == .working)
        let second = try #require(start(end.next, &machine))
        #expect(second != first)
        _ = machine.updateEnded(.success(Self.report))
        #expect(machine.publicState == .succeeded)
    }

    @Test func aPauseThatStopsTheUpdateIsItsOwnEvent() throws {
        var machine = Machine()
        let task = try #require(start(machine.checkForUpdates(), &machine))
        #expect(machine.suspend() == .cancelUpdate(task))
        #expect(machine.suspend() == .none)
        let end = machine.updateEnded(.failure(Self.cancelled))
        #expect(machine.publicState == .suspended)
        guard case .suspended = end.event else {
            Issue.record("event \(String(describing: end.event))")
            return
        }
        #expect(throws: SyncError.self) { try end.outcome?.get() }
    }

    @Test func anUpdateThatFinishesDespiteAPauseIsReportedAndTheManagerStaysSuspended() throws {
        var machine = Machine()
        start(machine.checkForUpdates(), &machine)
        _ = machine.suspend()
        let end = machine.updateEnded(.success(Self.report))
        #expect(machine.publicState == .suspended)
        guard case .finished = end.event else {
            Issue.record("event \(String(describing: end.event))")
            return
        }
        #expect((try? end.outcome?.get()) == Self.report)
    }

    /// The second of the issue's two sequences: reset stops the update, runs once it has
    /// stopped, and a resume during all that runs an update after the reset.
    @Test func aResumeDuringAResetRunsAnUpdateAfterIt() throws {
        var machine = Machine()
        let update = try #require(start(machine.checkForUpdates(), &machine))
        #expect(machine.reset() == .cancelUpdate(update))
        #expect(machine.publicState == .resetting)
        #expect(machine.resume(overridingPolicy: true) == .none)
        #expect(machine.publicState == .resetting)
        let ended = machine.updateEnded(.failure(Self.cancelled))
        #expect(ended.outcome == nil, "the caller of resume waits for the update after the reset")
        #expect(ended.next == .startReset)
        let reset = try #require(start(ended.next, &machine))
        #expect(machine.runningTask == reset)
        let done = machine.resetEnded()
        #expect(done.updateOutcome == nil)
        #expect(done.next == .startUpdate(overridingPolicy: true))
        start(done.next, &machine)
        #expect(machine.publicState == .working)
    }

    @Test func aResetOverridesTheCallsBeforeItAndEndsReady() throws {
        var machine = Machine()
        start(machine.reset(), &machine)
        #expect(machine.checkForUpdates() == .none)
        #expect(machine.reset() == .none)
        let done = machine.resetEnded()
        #expect(machine.publicState == .ready)
        #expect(done.next == .none)
        #expect(throws: SyncError.self, "a caller still waiting for an update is told it was stopped") {
            try done.updateOutcome?.get()
        }
    }

    @Test func aPauseDuringAResetHoldsAfterIt() throws {
        var machine = Machine()
        start(machine.reset(), &machine)
        #expect(machine.toggle() == .none, "play during a reset: an update after it")
        #expect(machine.toggle() == .none, "pause again")
        let done = machine.resetEnded()
        #expect(done.next == .none)
        #expect(machine.publicState == .suspended)
    }

    @Test func suspendingWhileIdleHoldsUntilResumed() throws {
        var machine = Machine()
        #expect(machine.suspend() == .none && machine.publicState == .suspended)
        #expect(machine.resume(overridingPolicy: false) == .startUpdate(overridingPolicy: false))
        start(.startUpdate(overridingPolicy: false), &machine)
        #expect(machine.resume(overridingPolicy: false) == .none)
    }

    @Test func aPolicyDenialSuspendsAndSaysSo() throws {
        var machine = Machine()
        start(machine.checkForUpdates(), &machine)
        let end = machine.updateEnded(.failure(SyncError(code: .connectionNotAllowed, message: "no")))
        #expect(machine.publicState == .suspended)
        guard case .connectionNotAllowed = end.event else {
            Issue.record("event \(String(describing: end.event))")
            return
        }
        #expect(machine.resume(overridingPolicy: true) == .startUpdate(overridingPolicy: true))
    }

    @Test func aFailureIsReportedAsFailed() throws {
        var machine = Machine()
        start(machine.checkForUpdates(), &machine)
        let end = machine.updateEnded(.failure(SyncError(code: .network, message: "down")))
        #expect(machine.publicState == .failed)
        guard case .failed(let error) = end.event else {
            Issue.record("event \(String(describing: end.event))")
            return
        }
        #expect(error.code == .network)
        #expect(machine.toggle() == .startUpdate(overridingPolicy: false))
    }

    /// Random calls and random ends of the running work, 2,000 seeds: the machine never reaches
    /// a `preconditionFailure` (the test process would crash), "working" always has a task, and
    /// once the work runs out the state is what the last call meant.
    @Test func randomCallSequencesEndWhereTheLastCallMeant() throws {
        enum Intent: String { case run, suspend, ready }
        for seed in UInt64(0)..<2_000 {
            var rng = SplitMix64(seed: seed)
            var machine = Machine()
            var cancelled: Set<Task<Void, Never>> = []
            var intent = Intent.ready
            var log: [String] = []

            func apply(_ action: Machine.Action) {
                if case .cancelUpdate(let task) = action { cancelled.insert(task) }
                start(action, &machine)
            }
            /// Ends the running work as it would end: a cancelled update mostly ends cancelled.
            func endWork() {
                switch machine.work {
                case nil:
                    return
                case .reset:
                    log.append("reset ended")
                    apply(machine.resetEnded().next)
                case .update(let task):
                    let stoppedLate = rng.next() % 5 == 0
                    let result: Result<SyncReport, SyncError> =
                        cancelled.contains(task) && !stoppedLate ? .failure(Self.cancelled) : .success(Self.report)
                    log.append("update ended \((try? result.get()) == nil ? "cancelled" : "ok")")
                    apply(machine.updateEnded(result).next)
                }
            }

            for _ in 0..<(4 + rng.next() % 12) {
                switch rng.next() % 7 {
                case 0:
                    apply(machine.checkForUpdates())
                    intent = .run
                    log.append("check")
                case 1:
                    apply(machine.resume(overridingPolicy: rng.next() % 2 == 0))
                    intent = .run
                    log.append("resume")
                case 2:
                    apply(machine.suspend())
                    intent = .suspend
                    log.append("suspend")
                case 3:
                    let before = machine.publicState
                    apply(machine.toggle())
                    switch before {
                    case .working: intent = .suspend
                    case .resetting: intent = intent == .run ? .suspend : .run
                    default: intent = .run
                    }
                    log.append("toggle")
                case 4:
                    apply(machine.reset())
                    intent = .ready
                    log.append("reset")
                default: endWork()
                }
                if machine.publicState == .working || machine.publicState == .resetting {
                    #expect(
                        machine.runningTask != nil,
                        "seed \(seed): \(machine.publicState) with nothing running after \(log)")
                }
            }
            for _ in 0..<20 where machine.runningTask != nil { endWork() }
            #expect(machine.runningTask == nil, "seed \(seed): work never ran out: \(log)")
            let expected: CacheManagerState =
                switch intent {
                case .run: .succeeded
                case .suspend: .suspended
                case .ready: .ready
                }
            // An update asked to run that was already done stays where it ended.
            #expect(
                machine.publicState == expected,
                "seed \(seed): ended \(machine.publicState), the last call meant \(intent): \(log)")
        }
    }
}
