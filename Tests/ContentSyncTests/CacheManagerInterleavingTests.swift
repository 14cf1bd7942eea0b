import Foundation
import Synchronization
import Testing
import ToolSupport

@testable import ContentSync

/// Random sequences of the manager's public calls, made from several tasks at once against a
/// scripted transport that answers after seeded random pauses. Each seed is one test case, so
/// a failure names its seed.
///
/// Calls made in other tasks are ordered: the driver waits until each has arrived (the
/// manager's call count grows) before making the next, so "the last call" is well defined.
@Suite("Random interleavings of the manager's calls keep its promises", .serialized, .timeLimit(.minutes(3)))
struct CacheManagerInterleavingTests {
    enum Intent: CustomStringConvertible {
        case run, suspend, ready
        /// A toggle that answered `resetting`: it played or paused, depending on the calls before.
        case runOrSuspend

        var description: String {
            switch self {
            case .run: "run"
            case .suspend: "suspend"
            case .ready: "ready"
            case .runOrSuspend: "run or suspend"
            }
        }

        func allows(_ state: CacheManagerState) -> Bool {
            switch self {
            case .run: state == .succeeded
            case .suspend: state == .suspended
            case .ready: state == .ready
            case .runOrSuspend: state == .succeeded || state == .suspended
            }
        }
    }

    /// What an observer saw.
    final class Observer: Sendable {
        private let seen = Mutex<[CacheManagerEvent]>([])
        var events: [CacheManagerEvent] { seen.withLock { $0 } }
        var states: [CacheManagerState] {
            events.compactMap { if case .stateChanged(let state) = $0 { state } else { nil } }
        }
        func append(_ event: CacheManagerEvent) { seen.withLock { $0.append(event) } }
    }

    @Test(arguments: UInt64(0)..<200)
    func randomCallsEndWhereTheLastCallMeantAndNeverOverlapAResetWithAnUpdate(seed: UInt64) async throws {
        try await withScriptedManager(serving: "1.0") { fixture in
            var rng = SplitMix64(seed: seed)
            let manager = fixture.manager
            let transport = fixture.transport
            transport.requireUpdateLock(statePath: fixture.state)
            var version = "1.0"
            if rng.next() % 2 == 0 {
                // Half the seeds update a synced 1.0 (replays or a restore); the rest restore.
                try await manager.checkForUpdates()
                version = ["1.1", "1.2", "1.4"][Int(rng.next() % 3)]
                fixture.serve(version)
            }
            transport.delays(seed: seed, maxMicroseconds: 400)
            let initialState = await manager.state
            let observer = Observer()
            let events = await manager.events()
            let watcher = Task { for await event in events { observer.append(event) } }

            var callers: [(String, Task<Result<SyncReport, SyncError>, Never>)] = []
            var resets: [Task<Result<Void, SyncError>, Never>] = []
            var suspends: [Task<Void, Never>] = []
            var log: [String] = []
            var intent = Intent.ready

            /// Starts `call` in a task of its own and waits until it has reached the manager.
            func arrive<T>(_ call: @escaping @Sendable () async -> T) async -> Task<T, Never> {
                let before = await manager.controlCalls
                let task = Task { await call() }
                while await manager.controlCalls == before { await Task.yield() }
                return task
            }

            let steps = 8 + Int(rng.next() % 8)
            for step in 0..<steps {
                let last = step == steps - 1
                switch rng.next() % (last ? 5 : 7) {
                case 0:
                    let task = await arrive {
                        await Result.of { () async throws(SyncError) in try await manager.checkForUpdates() }
                    }
                    callers.append(("check #\(step)", task))
                    intent = .run
                    log.append("check")
                case 1:
                    let overriding = rng.next() % 2 == 0
                    let task = await arrive {
                        await Result.of { () async throws(SyncError) in
                            try await manager.resume(overridingPolicy: overriding)
                        }
                    }
                    callers.append(("resume #\(step)", task))
                    intent = .run
                    log.append("resume")
                case 2:
                    if rng.next() % 2 == 0 {
                        await manager.suspend()
                        log.append("suspend (awaited)")
                    } else {
                        suspends.append(await arrive { await manager.suspend() })
                        log.append("suspend")
                    }
                    intent = .suspend
                case 3:
                    let state = await manager.togglePlayPause()
                    intent =
                        switch state {
                        case .working: .run
                        case .suspended: .suspend
                        default: .runOrSuspend
                        }
                    log.append("toggle → \(state)")
                case 4:
                    if rng.next() % 2 == 0 {
                        let result = await Result.of { () async throws(SyncError) in try await manager.reset() }
                        #expect(throws: Never.self, "seed \(seed): reset after \(log)") { try result.get() }
                        log.append("reset (awaited)")
                    } else {
                        resets.append(
                            await arrive { await Result.of { () async throws(SyncError) in try await manager.reset() } }
                        )
                        log.append("reset")
                    }
                    intent = .ready
                case 5:
                    guard !callers.isEmpty else { continue }
                    let (label, task) = callers[Int(rng.next() % UInt64(callers.count))]
                    task.cancel()
                    // The caller suspends the update if it was still waiting; not the last call.
                    log.append("cancel \(label)")
                default:
                    let pause = rng.next() % 4
                    if pause == 0 {
                        try await Task.sleep(for: .microseconds(rng.next() % 3_000))
                    } else {
                        for _ in 0..<pause { await Task.yield() }
                    }
                    log.append("pause")
                }
            }

            await manager.waitUntilIdle()
            for (label, task) in callers {
                if case .failure(let error) = await task.value {
                    #expect(
                        error.code == .cancelled,
                        "seed \(seed): \(label) failed with \(error.code): \(error.message); calls: \(log)")
                }
            }
            for task in resets {
                if case .failure(let error) = await task.value {
                    Issue.record("seed \(seed): a reset failed with \(error.code): \(error.message); calls: \(log)")
                }
            }
            for task in suspends { await task.value }

            let final = await manager.state
            #expect(intent.allows(final), "seed \(seed): ended \(final), the last call meant \(intent); calls: \(log)")
            #expect(
                transport.unlockedRequests.isEmpty,
                "seed \(seed): requests outside the update lock: \(transport.unlockedRequests)")
            switch final {
            case .succeeded:
                try fixture.expectTree(is: version, "seed \(seed)")
                let latest = try await manager.history(limit: 1).first
                #expect(
                    latest?.outcome.isSuccess == true, "seed \(seed): the last attempt is \(String(describing: latest))"
                )
            case .ready:
                #expect(
                    !FileManager.default.fileExists(atPath: fixture.content),
                    "seed \(seed): reset left the content folder")
                #expect(try await manager.history().isEmpty, "seed \(seed): reset left history")
            default:
                break
            }

            // Observers: the current state first, no state twice in a row, and the final one last.
            // (Up to 3 minutes, a hang detector: the watcher's task may wait long for a thread on a
            // loaded machine.)
            let deadline = ContinuousClock.now + .seconds(180)
            while observer.states.last != final, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(2))
            }
            watcher.cancel()
            let states = observer.states
            #expect(
                states.first == initialState, "seed \(seed): the stream began with \(String(describing: states.first))")
            #expect(
                states.last == final,
                "seed \(seed): the last state event is \(String(describing: states.last)), not \(final)")
            let repeats = zip(states, states.dropFirst()).filter { $0 == $1 }
            #expect(repeats.isEmpty, "seed \(seed): states sent twice in a row: \(states)")
            let failures = observer.events.compactMap { if case .failed(let error) = $0 { error } else { nil } }
            #expect(failures.isEmpty, "seed \(seed): a stop was reported as a failure: \(failures.map(\.message))")
        }
    }
}

extension Result where Failure == SyncError {
    /// The outcome of a typed-throwing async call.
    static func of(_ body: () async throws(SyncError) -> Success) async -> Self {
        do {
            return .success(try await body())
        } catch {
            return .failure(error)
        }
    }
}
