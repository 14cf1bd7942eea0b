import FileKit
import StorageFormat
/// The manager's controls as a value-type state machine: each event returns the action to
/// perform, and the actor performs it after the decision. Tests drive it without any I/O.
struct CacheManagerStateMachine: Equatable {
    enum Action: Equatable {
        case none
        case startUpdate
        case cancelUpdate
    }

    private(set) var state: CacheManagerState = .unknown

    /// The manager read its stored state.
    mutating func loaded() {
        guard state == .unknown else { return }
        state = .ready
    }

    mutating func checkForUpdates() -> Action {
        switch state {
        case .working: return .none
        case .unknown, .ready, .succeeded, .failed, .suspended:
            state = .working
            return .startUpdate
        }
    }

    mutating func suspend() -> Action {
        switch state {
        case .working:
            state = .suspended
            return .cancelUpdate
        case .suspended:
            return .none
        case .unknown, .ready, .succeeded, .failed:
            state = .suspended
            return .none
        }
    }

    mutating func resume() -> Action {
        guard state == .suspended else { return .none }
        state = .working
        return .startUpdate
    }

    /// The play/pause button: pause a running update, resume a suspended one, start otherwise.
    mutating func toggle() -> Action {
        switch state {
        case .working: return suspend()
        case .suspended: return resume()
        case .unknown, .ready, .succeeded, .failed: return checkForUpdates()
        }
    }

    /// The connection policy forbade transfers mid-update.
    mutating func connectionNotAllowed() -> Action {
        guard state == .working else { return .none }
        state = .suspended
        return .cancelUpdate
    }

    /// The running update ended. A cancelled update ends in whatever state cancelled it.
    mutating func updateEnded(succeeded: Bool, cancelled: Bool) {
        switch state {
        case .working:
            state = cancelled ? .suspended : (succeeded ? .succeeded : .failed)
        case .suspended:
            break
        case .unknown, .ready, .succeeded, .failed:
            preconditionFailure("invalid state \(state): an update ended that was never started")
        }
    }

    /// Everything was forgotten.
    mutating func reset() {
        state = .ready
    }
}
