import Foundation
import Synchronization

/// Running totals every agent bumps, read by the progress line, and the process's open files
/// sampled beside them (1,000 state databases are the sim's main use of descriptors).
final class FleetCounters: Sendable {
    private let checks = Atomic<Int>(0)
    private let failures = Atomic<Int>(0)
    private let updates = Atomic<Int>(0)
    private let peakOpenFiles = Atomic<Int>(0)

    func checkStarted() { checks.add(1, ordering: .relaxed) }
    func failed() { failures.add(1, ordering: .relaxed) }
    func updated() { updates.add(1, ordering: .relaxed) }

    /// Counts the descriptors open now and keeps the largest count seen.
    @discardableResult
    func sampleOpenFiles() -> Int {
        let open = ProcessResources.openFiles()
        peakOpenFiles.max(open, ordering: .relaxed)
        return open
    }

    /// The most descriptors seen open at once.
    var openFilesPeak: Int { peakOpenFiles.load(ordering: .relaxed) }

    /// "t=40s checks 2000 updates 1000 failures 0 open files 3456".
    func line(at seconds: Double) -> String {
        let open = sampleOpenFiles()
        return String(format: "t=%.0fs", seconds)
            + " checks \(checks.load(ordering: .relaxed)) updates \(updates.load(ordering: .relaxed))"
            + " failures \(failures.load(ordering: .relaxed)) open files \(open)"
    }
}
