import Foundation
import ProcessKit
import Testing
import ThreadKit

@testable import SyncDaemon

/// Where no thread can be made (a task limit: systemd's `TasksMax`, a container's pids limit),
/// the daemon's own threads fall back or fail naming the limit; before, Foundation's
/// `Thread.start()` failed in silence and the caller waited for good.
/// `DetachedThread.simulatedFailure` refuses the threads this task asks for, as
/// `pthread_create` does at the limit.
@Suite("The daemon without threads", .timeLimit(.minutes(3)))
struct DaemonThreadStartFailureTests {
    @Test func aHookIsSupervisedOnTheCallingThread() async throws {
        try await withHookFolder { folder in
            let (logger, store) = CapturingLogHandler.logger()
            let runner = HookRunner(terminationGrace: .seconds(3), outputGrace: .milliseconds(300))
            let outcome = await DetachedThread.$simulatedFailure.withValue(ThreadRefusal()) {
                await runner.run(
                    shellHook("echo one; echo two >&2; exit 3"), environment: [:], workingDirectory: folder,
                    logger: logger)
            }
            #expect(outcome.termination == .exited(3))
            #expect(store.lines("stdout") == ["one"])
            #expect(store.lines("stderr") == ["two"])
            // And a hook past its timeout is still ended: the supervision's deadline holds inline.
            let slow = await DetachedThread.$simulatedFailure.withValue(ThreadRefusal()) {
                await runner.run(
                    shellHook("sleep 30", timeout: .milliseconds(300)), environment: [:], workingDirectory: folder,
                    logger: logger)
            }
            #expect(slow.termination != .exited(0), "\(slow.termination)")
        }
    }

    @Test func aChildIsWaitedForOnTheCallingThread() async throws {
        let child = try ChildProcess("/bin/sh", ["-c", "exit 7"])
        let status = await DetachedThread.$simulatedFailure.withValue(ThreadRefusal()) { await child.exitStatus() }
        #expect(status == 7)
    }

    @Test func theEndpointFailsNamingTheLimit() async throws {
        let endpoint = AgentEndpoint(address: .init(port: 0), metrics: AgentMetrics(), health: AgentHealth())
        await #expect {
            try await DetachedThread.$simulatedFailure.withValue(ThreadRefusal()) {
                try await endpoint.run(onListening: { _ in Issue.record("it listened without a thread") })
            }
        } throws: { error in
            guard let error = error as? AgentEndpointError else { return false }
            return error.code == .serverFailed && error.message.contains("task limit")
                && error.message.contains("agent endpoint")
        }
    }
}
