import ContentSync
import Foundation
import Logging
import StorageFormat
import Testing

@testable import SyncDaemon

/// The two adapters the poll loop calls: pre-switch hooks as a `beforeSwitch` veto, post-update
/// hooks after an update. Real processes, fake switches and reports.
@Suite("Pre-switch and post-update hooks", .timeLimit(.minutes(3)))
struct HookAdapterTests {
    /// A grace long enough that a hook ending on SIGTERM does so before SIGKILL on a loaded machine.
    let runner = HookRunner(terminationGrace: .seconds(3), outputGrace: .milliseconds(300))

    /// A hook that writes its SYNC_AGENT_ variables and working folder to `$1/<name>.env`, then runs `then`.
    func recordingHook(_ folder: String, name: String, then: String = "exit 0", timeout: Duration = .seconds(30))
        -> Hook
    {
        shellHook(
            "{ env | grep '^SYNC_AGENT_' | sort; echo \"PWD=$(pwd -P)\"; } > \"$1/\(name).env\"; \(then)", folder,
            timeout: timeout, name: name)
    }

    func recorded(_ folder: String, _ name: String) throws -> [String: String] {
        let text = try String(contentsOfFile: folder + "/\(name).env", encoding: .utf8)
        var values: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            values[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
        }
        return values
    }

    func pending(_ folder: String, from: String?) throws -> PendingSwitch {
        try FileManager.default.createDirectory(
            atPath: folder + "/.content.content-sync/next", withIntermediateDirectories: true)
        return PendingSwitch(
            kind: from == nil ? .restore : .replay, fromVersion: try from.map { try CacheVersion($0) },
            toVersion: try CacheVersion("1.4"), contentDirectory: folder + "/content",
            stagedDirectory: folder + "/.content.content-sync/next",
            bytesDownloaded: 1234, filesDownloaded: 5, filesReused: 7, changeListsApplied: 2)
    }

    @Test func preSwitchHooksSeeTheStagedTreeAndTheCounts() async throws {
        try await withHookFolder { folder in
            let (logger, _) = CapturingLogHandler.logger()
            let hooks = [recordingHook(folder, name: "first"), recordingHook(folder, name: "second")]
            let approve = HookRunner.beforeSwitch(
                hooks, storage: "docs", directory: folder + "/content", logger: logger, runner: runner)
            let switching = try pending(folder, from: "1.2")
            try await approve(switching)
            let seen = try recorded(folder, "first")
            #expect(
                seen == [
                    "SYNC_AGENT_HOOK": "pre-switch", "SYNC_AGENT_STORAGE": "docs",
                    "SYNC_AGENT_DIR": folder + "/content",
                    "SYNC_AGENT_STAGED_DIR": switching.stagedDirectory, "SYNC_AGENT_OLD_VERSION": "1.2",
                    "SYNC_AGENT_NEW_VERSION": "1.4",
                    "SYNC_AGENT_OUTCOME": "replayed", "SYNC_AGENT_FILES_DOWNLOADED": "5",
                    "SYNC_AGENT_FILES_REUSED": "7",
                    "SYNC_AGENT_BYTES_DOWNLOADED": "1234", "SYNC_AGENT_CHANGE_LISTS": "2",
                    "PWD": switching.stagedDirectory,
                ])
            #expect(try recorded(folder, "second") == seen, "every hook runs when all succeed")
        }
    }

    @Test func aFirstRestoreHasAnEmptyOldVersion() async throws {
        try await withHookFolder { folder in
            let (logger, _) = CapturingLogHandler.logger()
            let approve = HookRunner.beforeSwitch(
                [recordingHook(folder, name: "first")], storage: "docs", directory: folder + "/content",
                logger: logger, runner: runner)
            try await approve(try pending(folder, from: nil))
            let seen = try recorded(folder, "first")
            #expect(seen["SYNC_AGENT_OLD_VERSION"] == "" && seen["SYNC_AGENT_OUTCOME"] == "restored")
        }
    }

    @Test(arguments: [
        ("echo 'index.html is missing' >&2; exit 4", "exited with status 4: index.html is missing"),
        ("echo still checking; sleep 60", "timed out and was stopped with SIGTERM: still checking"),
    ])
    func aFailingPreSwitchHookVetoesWithItsLastLineAndStopsTheRest(then: String, reason: String) async throws {
        try await withHookFolder { folder in
            let (logger, _) = CapturingLogHandler.logger()
            let hooks = [
                recordingHook(folder, name: "check", then: then, timeout: .seconds(5)),
                recordingHook(folder, name: "after"),
            ]
            let approve = HookRunner.beforeSwitch(
                hooks, storage: "docs", directory: folder + "/content", logger: logger, runner: runner)
            await #expect {
                try await approve(try pending(folder, from: "1.2"))
            } throws: { error in
                (error as? HookVeto)?.description == "pre-switch hook 'check' \(reason)"
            }
            #expect(!FileManager.default.fileExists(atPath: folder + "/after.env"), "a hook after the veto ran")
        }
    }

    @Test func aPreSwitchHookThatCannotStartVetoes() async throws {
        try await withHookFolder { folder in
            let (logger, _) = CapturingLogHandler.logger()
            let approve = HookRunner.beforeSwitch(
                [Hook(command: [folder + "/missing"], name: "gone")], storage: "docs",
                directory: folder + "/content", logger: logger, runner: runner)
            await #expect {
                try await approve(try pending(folder, from: "1.2"))
            } throws: { error in
                (error as? HookVeto)?.description
                    == "pre-switch hook 'gone' could not start: \(folder)/missing does not exist"
            }
        }
    }

    @Test func postUpdateHooksAllRunAndAFailureIsLoggedAtErrorWithoutThrowing() async throws {
        try await withHookFolder { folder in
            try FileManager.default.createDirectory(atPath: folder + "/content", withIntermediateDirectories: true)
            let (logger, store) = CapturingLogHandler.logger()
            let hooks = [
                recordingHook(folder, name: "failing", then: "echo 'cannot reach the CDN' >&2; exit 2"),
                recordingHook(folder, name: "next"),
            ]
            let report = SyncReport(
                outcome: .restored, fromVersion: nil, toVersion: try CacheVersion("1.4"), bytesDownloaded: 99,
                filesDownloaded: 12)
            await HookRunner.afterUpdate(
                hooks, storage: "docs", directory: folder + "/content", report: report, logger: logger, runner: runner)
            let seen = try recorded(folder, "next")
            #expect(
                seen == [
                    "SYNC_AGENT_HOOK": "post-update", "SYNC_AGENT_STORAGE": "docs",
                    "SYNC_AGENT_DIR": folder + "/content",
                    "SYNC_AGENT_OLD_VERSION": "", "SYNC_AGENT_NEW_VERSION": "1.4", "SYNC_AGENT_OUTCOME": "restored",
                    "SYNC_AGENT_FILES_DOWNLOADED": "12", "SYNC_AGENT_FILES_REUSED": "0",
                    "SYNC_AGENT_BYTES_DOWNLOADED": "99",
                    "SYNC_AGENT_CHANGE_LISTS": "0", "PWD": folder + "/content",
                ])
            let errors = store.all.filter { $0.level == .error }
            #expect(errors.count == 1)
            #expect(
                errors.first?.message
                    == "post-update hook 'failing' exited with status 2: cannot reach the CDN; the update to 1.4 stands"
            )
            #expect(errors.first?.metadata["storage"] == "docs" && errors.first?.metadata["hook"] == "failing")
        }
    }

    @Test func anUpToDateCheckRunsNoPostUpdateHook() async throws {
        try await withHookFolder { folder in
            let (logger, _) = CapturingLogHandler.logger()
            let version = try CacheVersion("1.4")
            await HookRunner.afterUpdate(
                [recordingHook(folder, name: "never")], storage: "docs", directory: folder,
                report: SyncReport(outcome: .upToDate, fromVersion: version, toVersion: version),
                logger: logger, runner: runner)
            #expect(!FileManager.default.fileExists(atPath: folder + "/never.env"))
        }
    }
}
