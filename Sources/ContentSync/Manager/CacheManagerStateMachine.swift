/// The manager's controls as a value-type state machine. Each event returns the action to
/// perform, and ``CacheManager`` performs it after the decision. Tests drive it without any I/O.
///
/// The states carry what they own: the running update's or reset's task, and what to do when it
/// ends. So "working with nothing running" cannot be expressed, and a call that arrives while
/// work winds down is not lost: it changes what happens next. The work slot holds one task at a
/// time; a reset waits for the update it stopped, and an update asked for during a reset starts
/// after it.
struct CacheManagerStateMachine {
    /// What to do when the running update ends, as the calls since it started decided.
    enum AfterUpdate: Equatable {
        /// Report how it ended: nobody asked it to stop.
        case finish
        /// Start another update: paused, then played again before this one had stopped.
        case restart(overridingPolicy: Bool)
        /// Stay suspended: paused by ``CacheManager/suspend()``, the toggle, or a cancelled caller.
        case suspend
        /// Run the reset that stopped it, then do what `then` says.
        case reset(then: AfterReset)
    }

    /// What to do when a reset ends.
    enum AfterReset: Equatable {
        /// Wait for the next call.
        case ready
        /// Start an update: one was asked for while the reset ran.
        case update(overridingPolicy: Bool)
        /// Stay suspended: a pause was asked for while the reset ran.
        case suspend
    }

    /// What the manager does after an event.
    enum Action: Equatable {
        case none
        /// Start an update task, then report it with ``updateStarted(_:)``.
        case startUpdate(overridingPolicy: Bool)
        /// Cancel the running update's task; it reports its end with ``updateEnded(_:)``.
        case cancelUpdate(Task<Void, Never>)
        /// Start a reset task, then report it with ``resetStarted(_:)``.
        case startReset
    }

    /// What the manager does when an update ended.
    struct UpdateEnd {
        /// What the callers waiting for an update get; nil when they wait for the next one.
        var outcome: Result<SyncReport, SyncError>?
        /// The event that tells observers how the update ended, if they are told.
        var event: CacheManagerEvent?
        /// The work to start now.
        var next: Action
    }

    /// What the manager does when a reset ended.
    struct ResetEnd {
        /// What callers still waiting for an update get; nil when an update starts for them.
        var updateOutcome: Result<SyncReport, SyncError>?
        /// The work to start now.
        var next: Action
    }

    private enum State {
        /// Nothing runs: ``CacheManagerState/ready``, ``CacheManagerState/succeeded`` or ``CacheManagerState/failed``.
        case idle(CacheManagerState)
        /// Nothing runs, and nothing starts until a check or resume.
        case suspended
        /// The manager is creating the update's task, in the same actor turn as the decision.
        case startingUpdate
        case updating(Task<Void, Never>, then: AfterUpdate)
        /// The manager is creating the reset's task, in the same actor turn as the decision.
        case startingReset(then: AfterReset)
        case resetting(Task<Void, Never>, then: AfterReset)
    }

    private var state: State = .idle(.ready)

    /// The state an app sees.
    var publicState: CacheManagerState {
        switch state {
        case .idle(let state): state
        case .suspended, .updating(_, then: .suspend): .suspended
        case .startingUpdate, .updating(_, then: .finish), .updating(_, then: .restart): .working
        case .updating(_, then: .reset), .startingReset, .resetting: .resetting
        }
    }

    /// The work running now.
    enum Work: Equatable {
        case update(Task<Void, Never>)
        case reset(Task<Void, Never>)
    }

    /// The update or reset running now, if any.
    var work: Work? {
        switch state {
        case .updating(let task, _): .update(task)
        case .resetting(let task, _): .reset(task)
        case .idle, .suspended, .startingUpdate, .startingReset: nil
        }
    }

    /// The task of the update or reset running now.
    var runningTask: Task<Void, Never>? {
        switch work {
        case .update(let task), .reset(let task): task
        case nil: nil
        }
    }

    // MARK: - Calls

    /// ``CacheManager/checkForUpdates()``: start an update, join the running one, or make
    /// sure one runs after the work in progress.
    mutating func checkForUpdates() -> Action {
        play(overridingPolicy: false)
    }

    /// ``CacheManager/resume(overridingPolicy:)``: the same as a check, except that an update
    /// it starts may ignore the connection policy.
    mutating func resume(overridingPolicy: Bool) -> Action {
        play(overridingPolicy: overridingPolicy)
    }

    private mutating func play(overridingPolicy override: Bool) -> Action {
        switch state {
        case .idle, .suspended:
            state = .startingUpdate
            return .startUpdate(overridingPolicy: override)
        case .updating(_, then: .finish):
            return .none
        case .updating(let task, then: .restart(let overriding)):
            state = .updating(task, then: .restart(overridingPolicy: overriding || override))
            return .none
        case .updating(let task, then: .suspend):
            // Already cancelled: it cannot be taken back, so a new update follows it.
            state = .updating(task, then: .restart(overridingPolicy: override))
            return .none
        case .updating(let task, then: .reset(let after)):
            state = .updating(task, then: .reset(then: after.playing(overridingPolicy: override)))
            return .none
        case .resetting(let task, let after):
            state = .resetting(task, then: after.playing(overridingPolicy: override))
            return .none
        case .startingUpdate, .startingReset:
            preconditionFailure("invalid state \(state): a call arrived while the manager was starting work")
        }
    }

    /// ``CacheManager/suspend()``: stop the running update, or hold off the next one.
    mutating func suspend() -> Action {
        switch state {
        case .idle:
            state = .suspended
            return .none
        case .suspended, .updating(_, then: .suspend):
            return .none
        case .updating(let task, then: .finish):
            state = .updating(task, then: .suspend)
            return .cancelUpdate(task)
        case .updating(let task, then: .restart):
            state = .updating(task, then: .suspend)
            return .none
        case .updating(let task, then: .reset):
            state = .updating(task, then: .reset(then: .suspend))
            return .none
        case .resetting(let task, _):
            state = .resetting(task, then: .suspend)
            return .none
        case .startingUpdate, .startingReset:
            preconditionFailure("invalid state \(state): a call arrived while the manager was starting work")
        }
    }

    /// The play/pause button: pause what is (or is about to be) running, resume what is
    /// suspended, and check from any other state.
    mutating func toggle() -> Action {
        switch state {
        case .updating(_, then: .finish), .updating(_, then: .restart),
            .updating(_, then: .reset(then: .update)), .resetting(_, then: .update):
            return suspend()
        case .suspended, .updating(_, then: .suspend),
            .updating(_, then: .reset(then: .suspend)), .resetting(_, then: .suspend):
            return resume(overridingPolicy: false)
        case .idle, .updating(_, then: .reset(then: .ready)), .resetting(_, then: .ready):
            return checkForUpdates()
        case .startingUpdate, .startingReset:
            preconditionFailure("invalid state \(state): a call arrived while the manager was starting work")
        }
    }

    /// ``CacheManager/reset()``: stop the running update, then forget everything. The reset
    /// overrides earlier calls: afterwards the manager is ready and nothing runs.
    mutating func reset() -> Action {
        switch state {
        case .idle, .suspended:
            state = .startingReset(then: .ready)
            return .startReset
        case .updating(let task, then: .finish):
            state = .updating(task, then: .reset(then: .ready))
            return .cancelUpdate(task)
        case .updating(let task, then: .restart), .updating(let task, then: .suspend),
            .updating(let task, then: .reset):
            state = .updating(task, then: .reset(then: .ready))
            return .none
        case .resetting(let task, _):
            state = .resetting(task, then: .ready)
            return .none
        case .startingUpdate, .startingReset:
            preconditionFailure("invalid state \(state): a call arrived while the manager was starting work")
        }
    }

    // MARK: - Work

    /// The manager started the update that ``Action/startUpdate(overridingPolicy:)`` asked for.
    mutating func updateStarted(_ task: Task<Void, Never>) {
        guard case .startingUpdate = state else {
            preconditionFailure("invalid state \(state): no update was being started")
        }
        state = .updating(task, then: .finish)
    }

    /// The manager started the reset that ``Action/startReset`` asked for.
    mutating func resetStarted(_ task: Task<Void, Never>) {
        guard case .startingReset(let after) = state else {
            preconditionFailure("invalid state \(state): no reset was being started")
        }
        state = .resetting(task, then: after)
    }

    /// The running update ended with `result`. A success is reported whatever was asked
    /// meanwhile (the content is at the new version); otherwise the calls decide.
    mutating func updateEnded(_ result: Result<SyncReport, SyncError>) -> UpdateEnd {
        guard case .updating(_, let after) = state else {
            preconditionFailure("invalid state \(state): an update ended that was never started")
        }
        let stopped: SyncError.Code? =
            switch result {
            case .success: nil
            case .failure(let error) where error.code == .cancelled || error.code == .connectionNotAllowed: error.code
            case .failure: nil
            }
        switch after {
        case .finish:
            switch result {
            case .success(let report):
                state = .idle(.succeeded)
                return UpdateEnd(outcome: result, event: .finished(report), next: .none)
            case .failure(let error) where stopped != nil:
                // The policy turned false mid-update (the only stop nobody asked for).
                state = .suspended
                return UpdateEnd(
                    outcome: result, event: error.code == .connectionNotAllowed ? .connectionNotAllowed : .suspended,
                    next: .none)
            case .failure(let error):
                state = .idle(.failed)
                return UpdateEnd(outcome: result, event: .failed(error), next: .none)
            }
        case .restart(let overriding):
            if case .success(let report) = result {
                state = .idle(.succeeded)
                return UpdateEnd(outcome: result, event: .finished(report), next: .none)
            }
            state = .startingUpdate
            return UpdateEnd(outcome: nil, event: nil, next: .startUpdate(overridingPolicy: overriding))
        case .suspend:
            state = .suspended
            switch result {
            case .success(let report): return UpdateEnd(outcome: result, event: .finished(report), next: .none)
            case .failure where stopped != nil: return UpdateEnd(outcome: result, event: .suspended, next: .none)
            case .failure(let error): return UpdateEnd(outcome: result, event: .failed(error), next: .none)
            }
        case .reset(let then):
            state = .startingReset(then: then)
            // Callers who asked for an update after the reset wait for that one.
            if case .update = then { return UpdateEnd(outcome: nil, event: nil, next: .startReset) }
            switch result {
            case .success(let report): return UpdateEnd(outcome: result, event: .finished(report), next: .startReset)
            case .failure where stopped != nil: return UpdateEnd(outcome: result, event: nil, next: .startReset)
            case .failure(let error): return UpdateEnd(outcome: result, event: .failed(error), next: .startReset)
            }
        }
    }

    /// The running reset ended (its callers get its own result).
    mutating func resetEnded() -> ResetEnd {
        guard case .resetting(_, let after) = state else {
            preconditionFailure("invalid state \(state): a reset ended that was never started")
        }
        let stopped = Result<SyncReport, SyncError>.failure(
            SyncError(
                code: .cancelled,
                message: "the update was stopped by reset(); check for updates again to restore the content"))
        switch after {
        case .ready:
            state = .idle(.ready)
            return ResetEnd(updateOutcome: stopped, next: .none)
        case .suspend:
            state = .suspended
            return ResetEnd(updateOutcome: stopped, next: .none)
        case .update(let overriding):
            state = .startingUpdate
            return ResetEnd(updateOutcome: nil, next: .startUpdate(overridingPolicy: overriding))
        }
    }
}

extension CacheManagerStateMachine.AfterReset {
    /// After a reset, run an update: what a check, resume or play during the reset asks for.
    func playing(overridingPolicy override: Bool) -> Self {
        if case .update(let overriding) = self { return .update(overridingPolicy: overriding || override) }
        return .update(overridingPolicy: override)
    }
}
