import ContentSync
import Foundation
import SyncDaemon
import ToolSupport
import Transport

/// One run of the fleet: opens every agent's manager on one shared transport, starts them all at
/// t = 0 (a restart of the whole fleet), lets each loop until the deadline, then shuts everything
/// down and reports.
struct FleetRun {
    let settings: FleetSettings

    /// Runs the fleet; returns the exit code (0: converged, 2: not).
    func run() async throws -> Int32 {
        let fileLimit = try ProcessResources.raiseOpenFileLimit()
        // A writer and up to a few reader connections per state database, each holding the
        // database and its WAL; a guess, so it only warns.
        let likelyNeed = settings.agents * 16 + settings.connections + 256
        if fileLimit < UInt64(likelyNeed) {
            log(
                "warning: the open-file limit is \(fileLimit); \(settings.agents) agents may need about \(likelyNeed) (raise the hard limit: ulimit -Hn)"
            )
        }
        var transportConfiguration = CurlTransport.Configuration()
        transportConfiguration.maxConnectionsPerHost = settings.connections
        let transport = try CurlTransport(configuration: transportConfiguration)

        let clock = ContinuousClock()
        let setupStart = clock.now
        var seeds = SplitMix64(seed: settings.seed)
        var agents: [SimAgent] = []
        agents.reserveCapacity(settings.agents)
        for index in 0..<settings.agents {
            let folder = "\(settings.scratch)/agents/\(String(format: "%04d", index))"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            var storage = StorageSettings(
                name: "agent-\(index)", baseURL: settings.baseURL, directory: "\(folder)/content",
                statePath: "\(folder)/state.sqlite")
            storage.interval = settings.interval
            storage.jitter = settings.jitter
            storage.splay = settings.splay
            storage.maxBackoff = settings.maxBackoff
            agents.append(try SimAgent(index: index, settings: storage, transport: transport, seed: seeds.next()))
        }
        let setupSeconds = (clock.now - setupStart).seconds
        let counters = FleetCounters()
        counters.sampleOpenFiles()
        log(
            String(
                format: "%d agents ready in %.1f s (open files %d, limit %llu); starting them all now",
                settings.agents, setupSeconds, ProcessResources.openFiles(), fileLimit))

        let start = clock.now
        let startEpoch = Date().timeIntervalSince1970
        let deadline = start + settings.duration
        let progress = Task { [settings] in
            while !Task.isCancelled {
                try? await Task.sleep(for: settings.progressEvery)
                guard !Task.isCancelled else { break }
                log(counters.line(at: (clock.now - start).seconds))
            }
        }
        // The deadline stops every loop: a pause ends at once, a running check finishes.
        let stopper = Task { [agents] in
            try? await Task.sleep(until: deadline, clock: clock)
            for agent in agents { agent.stop() }
        }
        let outcomes = await withTaskGroup(of: AgentOutcome.self, returning: [AgentOutcome].self) { group in
            for agent in agents {
                group.addTask { await agent.run(start: start, counters: counters) }
            }
            var outcomes: [AgentOutcome] = []
            for await outcome in group { outcomes.append(outcome) }
            return outcomes
        }
        stopper.cancel()
        let runSeconds = (clock.now - start).seconds
        progress.cancel()
        counters.sampleOpenFiles()
        await withTaskGroup(of: Void.self) { group in
            for agent in agents { group.addTask { await agent.watcher.shutdown() } }
        }
        await transport.shutdown()

        let report = FleetReport(
            settings: settings, startEpoch: startEpoch, setupSeconds: setupSeconds, runSeconds: runSeconds,
            openFileLimit: fileLimit, openFilesPeak: counters.openFilesPeak,
            agents: outcomes.sorted { $0.agent < $1.agent })
        if let path = settings.report {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            try encoder.encode(report).write(to: URL(fileURLWithPath: path), options: .atomic)
        }
        for line in report.summary() { print(line) }
        return report.converged ? 0 : 2
    }
}

/// A progress or warning line on stderr, stamped with the wall-clock time.
func log(_ message: String) {
    FileHandle.standardError.write(
        Data("[fleet-sim \(Date().formatted(.iso8601.time(includingFractionalSeconds: false)))] \(message)\n".utf8))
}
