import Foundation
import ToolSupport

/// What one `fleet-sim` run does: how many agents, their schedule, the storage, where they keep
/// their folders and for how long. Times are seconds on the command line (`--splay 0` is allowed,
/// which `DurationText` refuses).
struct FleetSettings: Sendable {
    /// Agents, each with its own content folder and state database. Default 1,000.
    var agents = 1_000
    /// The pause between successful checks. Default 20 s (the daemon's 300 s, scaled down 15×).
    var interval: Duration = .seconds(20)
    /// Each pause is scaled by a random factor in 1 ± jitter. Default 0.1, as `watch`.
    var jitter = 0.1
    /// The first check waits a random part of this. Default 0: every agent checks at once.
    var splay: Duration = .zero
    /// The longest pause after failures. Default: the interval, as `watch`.
    var maxBackoff: Duration?
    /// No check starts after this much time; checks running then are let finish. Default 120 s.
    var duration: Duration = .seconds(120)
    /// The storage every agent mirrors.
    var baseURL: URL
    /// Holds `agents/NNNN/content` and `agents/NNNN/state.sqlite`; kept between runs, so a second
    /// run is a restart of agents that already hold content.
    var scratch: String
    /// Seeds every agent's schedule randomness, so a run draws the same pauses again.
    var seed: UInt64 = 1
    /// Connections the shared transport keeps open to the server at once. Default 64.
    var connections = 64
    /// Where to write the JSON report (settings, per-agent outcomes, fleet totals), if anywhere.
    var report: String?
    /// The version every agent must end at; when given, the run exits 2 unless all do.
    var expectVersion: String?
    /// How often a progress line goes to stderr. Default 10 s.
    var progressEvery: Duration = .seconds(10)

    static let usage = """
        usage: fleet-sim --base-url URL --scratch DIR [options]
          --agents 1000        in-process agents, one content folder and state database each
          --interval 20        seconds between successful checks
          --jitter 0.1         each pause × (1 ± jitter), 0 to 0.9
          --splay 0            the first check waits a random part of this many seconds
          --max-backoff S      the longest pause after failures (default: --interval)
          --duration 120       seconds after which no check starts (running ones finish)
          --seed 1             seeds every agent's schedule
          --connections 64     connections the one shared transport opens to the server
          --report FILE        write the JSON report there
          --expect-version V   exit 2 unless every agent ends at V with its last check successful
          --progress 10        seconds between progress lines on stderr
        Runs N agents in one process, each looping like `sync-agent watch` (initial delay, check,
        pause), against one storage; prints a summary of every agent's outcome at the end.
        """

    init(_ options: ToolOptions) throws(ToolFailure) {
        guard let url = URL(string: try options.string("base-url")), url.scheme != nil else {
            throw ToolFailure("--base-url must be an absolute URL such as http://127.0.0.1:8080/fleet/")
        }
        baseURL = url
        scratch = try options.string("scratch")
        agents = try options.int("agents", agents)
        guard (1...100_000).contains(agents) else { throw ToolFailure("--agents must be between 1 and 100000") }
        interval = try Self.seconds(options, "interval", interval, allowZero: false)
        jitter = try options.double("jitter", jitter)
        guard (0...0.9).contains(jitter) else {
            throw ToolFailure("--jitter must be between 0 and 0.9, such as 0.1 for ±10%")
        }
        splay = try Self.seconds(options, "splay", splay, allowZero: true)
        if options.has("max-backoff") {
            maxBackoff = try Self.seconds(options, "max-backoff", .zero, allowZero: false)
        }
        duration = try Self.seconds(options, "duration", duration, allowZero: false)
        let seedValue = try options.int("seed", Int(seed))
        guard seedValue >= 0 else { throw ToolFailure("--seed must be 0 or more") }
        seed = UInt64(seedValue)
        connections = try options.int("connections", connections)
        guard connections >= 1 else { throw ToolFailure("--connections must be at least 1") }
        report = options.has("report") ? try options.string("report") : nil
        expectVersion = options.has("expect-version") ? try options.string("expect-version") : nil
        progressEvery = try Self.seconds(options, "progress", progressEvery, allowZero: false)
    }

    /// `--name` in seconds (fractions allowed), else `fallback`.
    private static func seconds(
        _ options: ToolOptions, _ name: String, _ fallback: Duration,
        allowZero: Bool
    ) throws(ToolFailure) -> Duration {
        guard options.has(name) else { return fallback }
        let value = try options.double(name, 0)
        guard value.isFinite, allowZero ? value >= 0 : value > 0 else {
            throw ToolFailure("--\(name) must be a number of seconds \(allowZero ? "of 0 or more" : "above 0")")
        }
        return .milliseconds(Int64((value * 1000).rounded()))
    }
}
