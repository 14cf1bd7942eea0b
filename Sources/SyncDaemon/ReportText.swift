import ContentSync
import Foundation

/// The one-line texts `sync` prints and `watch` logs: the same words in both places.
public enum ReportText {
    /// "up to date at 1.2", "updated 1.1 → 1.2: 1 change list(s), 3 file(s) downloaded (12.0 KB), 40 kept", ….
    public static func summary(_ report: SyncReport) -> String {
        switch report.outcome {
        case .upToDate:
            return "up to date at \(report.toVersion)" + notes(report)
        case .restored:
            return
                "restored \(report.toVersion) from the archive (\(report.filesDownloaded) files, \(bytes(report.bytesDownloaded)) downloaded)"
                + notes(report)
        case .replayed:
            var line =
                "updated \(report.fromVersion.map { "\($0)" } ?? "?") → \(report.toVersion): \(report.changeListsApplied) change list(s), "
                + "\(report.filesDownloaded) file(s) downloaded (\(bytes(report.bytesDownloaded))), \(report.filesReused) kept"
            if report.filesAlreadyDownloaded > 0 {
                line += ", \(report.filesAlreadyDownloaded) already downloaded earlier"
            }
            return line + notes(report)
        }
    }

    /// ", 3 file(s) repaired, 2 warning(s)": what the summary adds when the update repaired
    /// files or warned (each warning is shown on its own line by the caller).
    static func notes(_ report: SyncReport) -> String {
        var notes = ""
        if report.repairedFiles > 0 { notes += ", \(report.repairedFiles) file(s) repaired" }
        if !report.warnings.isEmpty { notes += ", \(report.warnings.count) warning(s)" }
        return notes
    }

    /// "phases: recover 0.000 s, local check 0.001 s, status 0.004 s, plan 0.120 s, stage 0.310 s,
    /// tree check 0.080 s, switch 0.021 s (total 0.536 s)": where an update's time went.
    public static func phases(_ report: SyncReport) -> String {
        guard !report.phases.isEmpty else { return "phases: none recorded" }
        let parts = report.phases.map { "\($0.phase.rawValue) \(PhaseTiming.format($0.seconds)) s" }
        let total = report.phases.reduce(0) { $0 + $1.seconds }
        return "phases: \(parts.joined(separator: ", ")) (total \(PhaseTiming.format(total)) s)"
    }

    /// "512 B", "1.5 KB", "12.0 MB", "1.25 GB".
    public static func bytes(_ count: Int64) -> String {
        if count < 1024 { return "\(count) B" }
        if count < 1 << 20 { return String(format: "%.1f KB", Double(count) / 1024) }
        if count < 1 << 30 { return String(format: "%.1f MB", Double(count) / 1_048_576) }
        return String(format: "%.2f GB", Double(count) / 1_073_741_824)
    }

    /// "12.3 s".
    public static func seconds(_ duration: Duration) -> String {
        String(format: "%.1f s", duration.seconds)
    }
}
