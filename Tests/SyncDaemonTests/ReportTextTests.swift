import ContentSync
import StorageFormat
import SyncDaemon
import Testing

/// The summary line `sync` prints and `watch` logs: repairs and warnings are counted in every
/// outcome (each warning is shown on its own line by the caller).
@Suite struct ReportTextTests {
    static func report(_ outcome: SyncReport.Outcome, repaired: Int, warnings: Int) throws -> SyncReport {
        var report = SyncReport(
            outcome: outcome, fromVersion: try CacheVersion("1.2"), toVersion: try CacheVersion("1.4"),
            bytesDownloaded: 2048, filesDownloaded: 3, filesReused: 7, changeListsApplied: 2,
            warnings: (0..<warnings).map { "warning \($0)" })
        report.repairedFiles = repaired
        return report
    }

    @Test(arguments: [
        (SyncReport.Outcome.upToDate, 0, 0, "up to date at 1.4"),
        (.upToDate, 0, 1, "up to date at 1.4, 1 warning(s)"),
        (.restored, 2, 0, "restored 1.4 from the archive (3 files, 2.0 KB downloaded), 2 file(s) repaired"),
        (.replayed, 0, 0, "updated 1.2 → 1.4: 2 change list(s), 3 file(s) downloaded (2.0 KB), 7 kept"),
        (
            .replayed, 5, 2,
            "updated 1.2 → 1.4: 2 change list(s), 3 file(s) downloaded (2.0 KB), 7 kept, 5 file(s) repaired, 2 warning(s)"
        ),
    ])
    func summaryCountsRepairsAndWarnings(outcome: SyncReport.Outcome, repaired: Int, warnings: Int, expected: String)
        throws
    {
        #expect(ReportText.summary(try Self.report(outcome, repaired: repaired, warnings: warnings)) == expected)
    }
}
