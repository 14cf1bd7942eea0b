import Foundation
import StorageFormat

/// A run's outcome: the settings, every agent's outcome, what the process used, and whether the
/// fleet converged. Written as JSON for bench/fleet/fleet_sim.py and printed as a summary.
struct FleetReport: Codable, Sendable {
    /// The settings, in seconds, as the JSON report states them.
    struct Settings: Codable, Sendable {
        var agents: Int
        var interval: Double
        var jitter: Double
        var splay: Double
        var maxBackoff: Double?
        var duration: Double
        var baseURL: String
        var scratch: String
        var seed: UInt64
        var connections: Int
        var expectVersion: String?
    }

    var settings: Settings
    /// Unix time of the run's start (t = 0 of every offset in the agents' outcomes), to line
    /// the agents' checks up with a server's access log.
    var startEpoch: Double
    /// Opening the agents' managers (state databases), before t = 0.
    var setupSeconds: Double
    /// From t = 0 until the last agent stopped.
    var runSeconds: Double
    var openFileLimit: UInt64
    var openFilesPeak: Int
    var peakResidentBytes: Int64
    /// Every agent holds the same version (the expected one, when given), no agent stopped on a
    /// permanent error, and every agent's last check succeeded.
    var converged: Bool
    /// Why the fleet did not converge, one line per kind of problem.
    var problems: [String]
    var agents: [AgentOutcome]

    init(
        settings: FleetSettings, startEpoch: Double, setupSeconds: Double, runSeconds: Double,
        openFileLimit: UInt64, openFilesPeak: Int, agents: [AgentOutcome]
    ) {
        self.settings = Settings(
            agents: settings.agents, interval: settings.interval.seconds, jitter: settings.jitter,
            splay: settings.splay.seconds, maxBackoff: settings.maxBackoff?.seconds,
            duration: settings.duration.seconds, baseURL: settings.baseURL.absoluteString,
            scratch: settings.scratch, seed: settings.seed, connections: settings.connections,
            expectVersion: settings.expectVersion)
        self.startEpoch = startEpoch
        self.setupSeconds = setupSeconds
        self.runSeconds = runSeconds
        self.openFileLimit = openFileLimit
        self.openFilesPeak = openFilesPeak
        self.peakResidentBytes = ProcessResources.peakResidentBytes()
        self.agents = agents
        self.problems = Self.problems(agents, expected: settings.expectVersion)
        self.converged = problems.isEmpty
    }

    private static func problems(_ agents: [AgentOutcome], expected: String?) -> [String] {
        var problems: [String] = []
        let versions = Set(agents.map { $0.finalVersion.flatMap { try? CacheVersion($0) } })
        if let expected {
            let target = try? CacheVersion(expected)
            let off = agents.filter { $0.finalVersion.flatMap { try? CacheVersion($0) } != target || target == nil }
            if !off.isEmpty {
                problems.append(
                    "\(off.count) agent(s) do not hold the expected version \(expected): agents \(Self.list(off))")
            }
        } else if versions.count != 1 || versions.first! == nil {
            problems.append("the agents hold different versions (or none): \(Self.histogram(agents))")
        }
        let stopped = agents.filter(\.stoppedOnPermanentError)
        if !stopped.isEmpty {
            problems.append(
                "\(stopped.count) agent(s) stopped on an error retrying cannot fix: agents \(Self.list(stopped))")
        }
        let failedLast = agents.filter { !$0.lastCheckSucceeded }
        if !failedLast.isEmpty {
            problems.append(
                "\(failedLast.count) agent(s) failed (or never made) their last check: agents \(Self.list(failedLast))")
        }
        return problems
    }

    /// The human summary: totals, per-agent distributions, final versions, resources, verdict.
    func summary() -> [String] {
        let checks = agents.map(\.checks).sorted()
        let withFailures = agents.filter { $0.failures > 0 }
        let updates = agents.flatMap(\.updates)
        let updateSeconds = updates.map(\.seconds).sorted()
        var lines = [
            "fleet-sim: \(settings.agents) agents for \(Self.number(settings.duration)) s (interval \(Self.number(settings.interval)) s, "
                + "jitter \(settings.jitter), splay \(Self.number(settings.splay)) s, seed \(settings.seed)); "
                + String(format: "managers opened in %.1f s, run %.1f s", setupSeconds, runSeconds),
            "checks: \(checks.reduce(0, +)) (per agent min \(checks.first ?? 0), median \(Self.median(checks)), max \(checks.last ?? 0)); "
                + "up to date \(agents.map(\.upToDate).reduce(0, +)), replayed \(agents.map(\.replayed).reduce(0, +)), "
                + "restored \(agents.map(\.restored).reduce(0, +))",
            "failures: \(agents.map(\.failures).reduce(0, +)) (\(withFailures.count) agent(s) had any)",
        ]
        if !updateSeconds.isEmpty {
            lines.append(
                String(
                    format: "update checks: %d, median %.2f s, max %.2f s; %d files and %.1f MB downloaded in all",
                    updates.count, Self.median(updateSeconds), updateSeconds.last!,
                    updates.map(\.files).reduce(0, +), Double(updates.map(\.bytes).reduce(0, +)) / 1e6))
        }
        lines.append("final versions: \(Self.histogram(agents))")
        lines.append(
            String(
                format: "open files: peak %d (limit %llu); peak RSS %.0f MiB", openFilesPeak, openFileLimit,
                Double(peakResidentBytes) / 1_048_576))
        for agent in withFailures.prefix(5) {
            lines.append("  agent \(agent.agent): \(agent.failures) failure(s), last: \(agent.lastError ?? "?")")
        }
        if converged {
            lines.append(
                "converged: every agent holds \(agents.first?.finalVersion ?? "?") and its last check succeeded")
        } else {
            lines.append("NOT CONVERGED:")
            lines += problems.map { "  " + $0 }
        }
        return lines
    }

    /// "1.1 × 998, none × 2".
    private static func histogram(_ agents: [AgentOutcome]) -> String {
        var counts: [String: Int] = [:]
        for agent in agents { counts[agent.finalVersion ?? "none", default: 0] += 1 }
        return counts.sorted { $0.value > $1.value }.map { "\($0.key) × \($0.value)" }.joined(separator: ", ")
    }

    /// The first agents' numbers, "3, 17, 512 …".
    private static func list(_ agents: [AgentOutcome]) -> String {
        agents.prefix(10).map { String($0.agent) }.joined(separator: ", ") + (agents.count > 10 ? " …" : "")
    }

    private static func median<T: Numeric & Comparable>(_ sorted: [T]) -> T {
        sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }

    private static func number(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }
}
