import Foundation
import Testing

@testable import ContentSync

/// `SyncReport.phases`: where an update's time went, phase by phase, in the order they ran.
@Suite("an update reports how long each phase took", .timeLimit(.minutes(3)))
struct PhaseTimingTests {
    @Test(arguments: [
        (0.0, "0.000"), (0.0004, "0.000"), (0.0005, "0.001"), (0.0124, "0.012"), (0.25, "0.250"), (1.5, "1.500"),
        (12.3456, "12.346"), (3600.0, "3600.000"),
    ])
    func secondsAreWrittenWithThreeDecimals(seconds: Double, text: String) {
        #expect(PhaseTiming.format(seconds) == text)
    }

    func phases(_ report: SyncReport) -> [PhaseTiming.Phase] { report.phases.map(\.phase) }

    @Test func aRestoreAReplayAndACheckEachListTheirPhasesInOrder() async throws {
        try await withSyncHarness(serving: "1.0") { harness in
            let restore = try await harness.sync()
            #expect(restore.outcome == .restored)
            #expect(phases(restore) == [.recover, .localCheck, .status, .archive, .treeCheck, .switch])

            harness.serve("1.2")
            let replay = try await harness.sync()
            #expect(replay.outcome == .replayed)
            #expect(phases(replay) == [.recover, .localCheck, .status, .plan, .stage, .treeCheck, .switch])

            let check = try await harness.sync()
            #expect(check.outcome == .upToDate)
            #expect(phases(check) == [.recover, .localCheck, .status, .upToDate])

            for report in [restore, replay, check] {
                #expect(report.phases.allSatisfy { $0.seconds >= 0 && $0.seconds < 600 }, "\(report.phases)")
            }
            // The phases are consecutive spans of one update: they add up to less than its wall time.
            let started = ContinuousClock.now
            harness.serve("1.4")
            let timed = try await harness.sync()
            let wall = ContinuousClock.now - started
            let total = timed.phases.reduce(0) { $0 + $1.seconds }
            #expect(total <= Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18)
            #expect(timed.phases.first { $0.phase == .stage }.map { $0.seconds > 0 } == true)
        }
    }
}
