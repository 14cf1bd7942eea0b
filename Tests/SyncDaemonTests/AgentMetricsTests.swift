import ContentSync
import CoreMetrics
import Foundation
import StorageFormat
import SyncDaemon
import Testing

@Suite struct AgentMetricsTests {
    static let fixedNow = Date(timeIntervalSince1970: 1_700_000_000)

    func makeMetrics() -> AgentMetrics {
        AgentMetrics(now: { Self.fixedNow })
    }

    func report(_ outcome: SyncReport.Outcome, to version: String, bytes: Int64 = 0, files: Int = 0) throws
        -> SyncReport
    {
        SyncReport(
            outcome: outcome, fromVersion: nil, toVersion: try CacheVersion(version), bytesDownloaded: bytes,
            filesDownloaded: files)
    }

    @Test func aNewStorageStartsWithZeroCountersAndNoSuccessOrVersion() throws {
        let metrics = makeMetrics()
        _ = metrics.storage(named: "alpha")
        let scrape = try Exposition(metrics)
        let alpha = ["storage": "alpha"]
        #expect(scrape.value("sync_agent_checks_total", alpha) == 0)
        #expect(scrape.value("sync_agent_updates_total", alpha.with("outcome", "replayed")) == 0)
        #expect(scrape.value("sync_agent_updates_total", alpha.with("outcome", "restored")) == 0)
        #expect(scrape.value("sync_agent_downloaded_bytes_total", alpha) == 0)
        #expect(scrape.value("sync_agent_downloaded_files_total", alpha) == 0)
        #expect(scrape.value("sync_agent_consecutive_failures", alpha) == 0)
        #expect(scrape.value("sync_agent_update_duration_seconds_count", alpha) == 0)
        #expect(scrape.value("sync_agent_last_success_timestamp_seconds", alpha) == nil)
        #expect(scrape.samples(named: "sync_agent_version_info").isEmpty)
        // Every failure code starts at 0, so increase() in an alert sees the first failure.
        for code in ["network", "integrity", "signature", "invalidStatus", "vetoed"] {
            #expect(scrape.value("sync_agent_check_failures_total", alpha.with("code", code)) == 0, "\(code)")
        }
        #expect(scrape.samples(named: "sync_agent_check_failures_total").count == SyncError.Code.allCases.count)
    }

    @Test func aReplayedUpdateCountsItsDownloadsDurationAndVersion() throws {
        let metrics = makeMetrics()
        let alpha = metrics.storage(named: "alpha")
        alpha.checkSucceeded(try report(.replayed, to: "1.3", bytes: 4096, files: 3), duration: .milliseconds(2500))

        let scrape = try Exposition(metrics)
        let labels = ["storage": "alpha"]
        #expect(scrape.value("sync_agent_checks_total", labels) == 1)
        #expect(scrape.value("sync_agent_updates_total", labels.with("outcome", "replayed")) == 1)
        #expect(scrape.value("sync_agent_updates_total", labels.with("outcome", "restored")) == 0)
        #expect(scrape.value("sync_agent_downloaded_bytes_total", labels) == 4096)
        #expect(scrape.value("sync_agent_downloaded_files_total", labels) == 3)
        #expect(scrape.value("sync_agent_update_duration_seconds_count", labels) == 1)
        #expect(scrape.value("sync_agent_update_duration_seconds_sum", labels) == 2.5)
        #expect(scrape.value("sync_agent_update_duration_seconds_bucket", labels.with("le", "1.0")) == 0)
        #expect(scrape.value("sync_agent_update_duration_seconds_bucket", labels.with("le", "2.5")) == 1)
        #expect(scrape.value("sync_agent_update_duration_seconds_bucket", labels.with("le", "+Inf")) == 1)
        #expect(scrape.value("sync_agent_last_success_timestamp_seconds", labels) == 1_700_000_000)
        #expect(scrape.value("sync_agent_consecutive_failures", labels) == 0)
        #expect(scrape.samples(named: "sync_agent_version_info").map(\.labels) == [labels.with("version", "1.3")])
        #expect(scrape.value("sync_agent_version_info", labels.with("version", "1.3")) == 1)
    }

    @Test func aRestoreCountsUnderItsOwnOutcome() throws {
        let metrics = makeMetrics()
        let alpha = metrics.storage(named: "alpha")
        alpha.checkSucceeded(try report(.restored, to: "2.0", bytes: 10, files: 1), duration: .seconds(40))
        alpha.checkSucceeded(try report(.replayed, to: "2.1", bytes: 5, files: 2), duration: .seconds(1))

        let scrape = try Exposition(metrics)
        let labels = ["storage": "alpha"]
        #expect(scrape.value("sync_agent_updates_total", labels.with("outcome", "restored")) == 1)
        #expect(scrape.value("sync_agent_updates_total", labels.with("outcome", "replayed")) == 1)
        #expect(scrape.value("sync_agent_downloaded_bytes_total", labels) == 15)
        #expect(scrape.value("sync_agent_downloaded_files_total", labels) == 3)
        #expect(scrape.value("sync_agent_update_duration_seconds_count", labels) == 2)
        #expect(scrape.value("sync_agent_update_duration_seconds_bucket", labels.with("le", "30.0")) == 1)
    }

    @Test func anUpToDateCheckCountsOnlyTheCheckTheSuccessAndTheVersion() throws {
        let metrics = makeMetrics()
        let alpha = metrics.storage(named: "alpha")
        alpha.checkSucceeded(try report(.upToDate, to: "1.2"), duration: .seconds(1))

        let scrape = try Exposition(metrics)
        let labels = ["storage": "alpha"]
        #expect(scrape.value("sync_agent_checks_total", labels) == 1)
        #expect(scrape.value("sync_agent_updates_total", labels.with("outcome", "replayed")) == 0)
        #expect(scrape.value("sync_agent_updates_total", labels.with("outcome", "restored")) == 0)
        #expect(scrape.value("sync_agent_update_duration_seconds_count", labels) == 0)
        #expect(scrape.value("sync_agent_last_success_timestamp_seconds", labels) == 1_700_000_000)
        #expect(scrape.value("sync_agent_version_info", labels.with("version", "1.2")) == 1)
    }

    @Test func failuresCountByCodeAndASuccessEndsTheStreak() throws {
        let metrics = makeMetrics()
        let alpha = metrics.storage(named: "alpha")
        alpha.checkFailed(code: "network", consecutiveFailures: 1)
        alpha.checkFailed(code: "network", consecutiveFailures: 2)
        alpha.checkFailed(code: "integrity", consecutiveFailures: 3)

        var scrape = try Exposition(metrics)
        let labels = ["storage": "alpha"]
        #expect(scrape.value("sync_agent_checks_total", labels) == 3)
        #expect(scrape.value("sync_agent_check_failures_total", labels.with("code", "network")) == 2)
        #expect(scrape.value("sync_agent_check_failures_total", labels.with("code", "integrity")) == 1)
        #expect(scrape.value("sync_agent_consecutive_failures", labels) == 3)
        #expect(scrape.value("sync_agent_last_success_timestamp_seconds", labels) == nil)

        alpha.checkSucceeded(try report(.upToDate, to: "1.0"), duration: .seconds(1))
        scrape = try Exposition(metrics)
        #expect(scrape.value("sync_agent_checks_total", labels) == 4)
        #expect(scrape.value("sync_agent_consecutive_failures", labels) == 0)
        #expect(scrape.value("sync_agent_check_failures_total", labels.with("code", "network")) == 2)
    }

    /// A switch vetoed after its downloads moved them over the network: they count, once (the
    /// next attempt reuses them and reports none).
    @Test func aFailureAfterItsDownloadsCountsThem() throws {
        let metrics = makeMetrics()
        let alpha = metrics.storage(named: "alpha")
        alpha.checkFailed(code: "vetoed", consecutiveFailures: 1, bytesDownloaded: 5000, filesDownloaded: 3)
        alpha.checkFailed(code: "network", consecutiveFailures: 2)
        let scrape = try Exposition(metrics)
        let labels = ["storage": "alpha"]
        #expect(scrape.value("sync_agent_downloaded_bytes_total", labels) == 5000)
        #expect(scrape.value("sync_agent_downloaded_files_total", labels) == 3)
        #expect(scrape.value("sync_agent_check_failures_total", labels.with("code", "vetoed")) == 1)
    }

    @Test func aRestartRestoresTheLastSuccessAndTheStreakFromTheState() throws {
        let metrics = makeMetrics()
        let alpha = metrics.storage(named: "alpha")
        alpha.restore(lastSuccess: Date(timeIntervalSince1970: 1_600_000_000), consecutiveFailures: 4)
        let scrape = try Exposition(metrics)
        let labels = ["storage": "alpha"]
        #expect(scrape.value("sync_agent_last_success_timestamp_seconds", labels) == 1_600_000_000)
        #expect(scrape.value("sync_agent_consecutive_failures", labels) == 4)
        #expect(scrape.value("sync_agent_checks_total", labels) == 0, "restoring counts no check")

        let fresh = metrics.storage(named: "beta")
        fresh.restore(lastSuccess: nil, consecutiveFailures: 0)
        #expect(
            try Exposition(metrics).value("sync_agent_last_success_timestamp_seconds", ["storage": "beta"]) == nil,
            "a folder that never succeeded has no timestamp")
    }

    @Test func aNewVersionRemovesTheOldVersionsSeries() throws {
        let metrics = makeMetrics()
        let alpha = metrics.storage(named: "alpha")
        let labels = ["storage": "alpha"]
        alpha.setVersion("1.2")
        #expect(
            try Exposition(metrics).samples(named: "sync_agent_version_info").map(\.labels) == [
                labels.with("version", "1.2")
            ])

        alpha.setVersion("1.3")
        #expect(
            try Exposition(metrics).samples(named: "sync_agent_version_info").map(\.labels) == [
                labels.with("version", "1.3")
            ])

        alpha.checkSucceeded(try report(.replayed, to: "1.4"), duration: .seconds(1))
        let afterUpdate = try Exposition(metrics).samples(named: "sync_agent_version_info")
        #expect(afterUpdate.map(\.labels) == [labels.with("version", "1.4")])
        #expect(afterUpdate.map(\.value) == [1])

        alpha.setVersion(nil)
        #expect(try Exposition(metrics).samples(named: "sync_agent_version_info").isEmpty)
    }

    @Test func removingAStorageDropsAllItsSeriesAndNoOther() throws {
        let metrics = makeMetrics()
        let alpha = metrics.storage(named: "alpha")
        let beta = metrics.storage(named: "beta")
        for storage in [alpha, beta] {
            storage.checkFailed(code: "network", consecutiveFailures: 1)
            storage.checkSucceeded(try report(.restored, to: "3.1", bytes: 7, files: 1), duration: .seconds(3))
            storage.checkFailed(code: "busy", consecutiveFailures: 1)
        }
        let before = try Exposition(metrics)
        #expect(before.samples.contains { $0.labels["storage"] == "alpha" })

        alpha.remove()
        let after = try Exposition(metrics)
        #expect(after.samples.filter { $0.labels["storage"] != "beta" } == [])
        #expect(Set(after.samples) == Set(before.samples.filter { $0.labels["storage"] == "beta" }))

        // Made again (a reload adding it back), it starts from zero.
        _ = metrics.storage(named: "alpha")
        let again = try Exposition(metrics)
        #expect(again.value("sync_agent_checks_total", ["storage": "alpha"]) == 0)
        #expect(
            again.samples(named: "sync_agent_check_failures_total").allSatisfy {
                $0.labels["storage"] == "beta" || $0.value == 0
            })
        #expect(again.value("sync_agent_check_failures_total", ["storage": "alpha", "code": "network"]) == 0)
    }

    @Test func eachAgentMetricsHasItsOwnRegistry() throws {
        let first = makeMetrics()
        let second = makeMetrics()
        first.storage(named: "alpha").checkFailed(code: "network", consecutiveFailures: 1)
        _ = second.storage(named: "beta")

        #expect(try Exposition(first).value("sync_agent_checks_total", ["storage": "alpha"]) == 1)
        #expect(try Exposition(second).samples.allSatisfy { $0.labels["storage"] == "beta" })
        #expect(try Exposition(second).value("sync_agent_checks_total", ["storage": "beta"]) == 0)
    }

    @Test func otherLibrariesMetricsMadeWithTheFactoryAreServedToo() throws {
        let metrics = makeMetrics()
        CoreMetrics.Counter(label: "item_cache_hits", dimensions: [("tier", "memory")], factory: metrics.factory)
            .increment(by: 2)
        let scrape = try Exposition(metrics)
        #expect(scrape.value("item_cache_hits", ["tier": "memory"]) == 2)
        #expect(scrape.types["item_cache_hits"] == "counter")
    }

    /// The documented table, name by name: a renamed or retyped metric fails here.
    @Test func everyDocumentedMetricHasItsTypeAndHelp() throws {
        let metrics = makeMetrics()
        let alpha = metrics.storage(named: "alpha")
        alpha.checkFailed(code: "network", consecutiveFailures: 1)
        alpha.checkSucceeded(try report(.replayed, to: "1.1", bytes: 1, files: 1), duration: .seconds(1))
        let scrape = try Exposition(metrics)
        let documented = [
            "sync_agent_checks_total": "counter",
            "sync_agent_updates_total": "counter",
            "sync_agent_check_failures_total": "counter",
            "sync_agent_downloaded_bytes_total": "counter",
            "sync_agent_downloaded_files_total": "counter",
            "sync_agent_update_duration_seconds": "histogram",
            "sync_agent_last_success_timestamp_seconds": "gauge",
            "sync_agent_consecutive_failures": "gauge",
            "sync_agent_version_info": "gauge",
        ]
        #expect(scrape.types == documented)
        #expect(Set(scrape.helps.keys) == Set(documented.keys))
        #expect(scrape.helps.values.allSatisfy { !$0.isEmpty })
    }

    @Test func checksRecordedAtOnceAreAllCounted() async throws {
        let metrics = makeMetrics()
        let alpha = metrics.storage(named: "alpha")
        let version = try CacheVersion("1.0")
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for check in 0..<50 {
                        if (task + check) % 2 == 0 {
                            alpha.checkFailed(code: "network", consecutiveFailures: 1)
                        } else {
                            alpha.checkSucceeded(
                                SyncReport(
                                    outcome: .replayed, fromVersion: nil, toVersion: version, bytesDownloaded: 2),
                                duration: .seconds(1))
                        }
                    }
                }
            }
        }
        let scrape = try Exposition(metrics)
        let labels = ["storage": "alpha"]
        #expect(scrape.value("sync_agent_checks_total", labels) == 400)
        #expect(scrape.value("sync_agent_check_failures_total", labels.with("code", "network")) == 200)
        #expect(scrape.value("sync_agent_updates_total", labels.with("outcome", "replayed")) == 200)
        #expect(scrape.value("sync_agent_downloaded_bytes_total", labels) == 400)
    }
}

extension [String: String] {
    /// These labels plus `name="value"`.
    func with(_ name: String, _ value: String) -> [String: String] {
        merging([name: value]) { $1 }
    }
}

/// A scrape parsed from the Prometheus text format: samples, `# TYPE` and `# HELP` lines.
struct Exposition {
    struct Sample: Hashable {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    struct Malformed: Error, CustomStringConvertible {
        var line: String
        var description: String { "not a sample line: \(line)" }
    }

    var samples: [Sample] = []
    var types: [String: String] = [:]
    var helps: [String: String] = [:]

    init(_ metrics: AgentMetrics) throws {
        try self.init(text: String(decoding: metrics.exposition(), as: UTF8.self))
    }

    init(text: String) throws {
        for line in text.split(separator: "\n") {
            if line.hasPrefix("# TYPE ") || line.hasPrefix("# HELP ") {
                let parts = line.dropFirst(7).split(separator: " ", maxSplits: 1)
                guard parts.count == 2 else { throw Malformed(line: String(line)) }
                if line.hasPrefix("# TYPE ") {
                    types[String(parts[0])] = String(parts[1])
                } else {
                    helps[String(parts[0])] = String(parts[1])
                }
                continue
            }
            samples.append(try Self.sample(line))
        }
    }

    /// The value of the series with exactly these labels.
    func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        samples.first { $0.name == name && $0.labels == labels }?.value
    }

    func samples(named name: String) -> [Sample] {
        samples.filter { $0.name == name }
    }

    /// `name{a="x",b="y"} value` or `name value`.
    private static func sample(_ line: Substring) throws -> Sample {
        guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
            throw Malformed(line: String(line))
        }
        let series = line[..<space]
        guard let brace = series.firstIndex(of: "{") else {
            return Sample(name: String(series), labels: [:], value: value)
        }
        guard series.last == "}" else { throw Malformed(line: String(line)) }
        var labels: [String: String] = [:]
        var rest = series[series.index(after: brace)..<series.index(before: series.endIndex)]
        while !rest.isEmpty {
            guard let equals = rest.firstIndex(of: "="), rest[rest.index(after: equals)...].first == "\"" else {
                throw Malformed(line: String(line))
            }
            let name = String(rest[..<equals])
            var index = rest.index(equals, offsetBy: 2)
            var labelValue = ""
            while index < rest.endIndex, rest[index] != "\"" {
                if rest[index] == "\\" {
                    index = rest.index(after: index)
                    guard index < rest.endIndex else { throw Malformed(line: String(line)) }
                    labelValue.append(rest[index] == "n" ? "\n" : rest[index])
                } else {
                    labelValue.append(rest[index])
                }
                index = rest.index(after: index)
            }
            guard index < rest.endIndex else { throw Malformed(line: String(line)) }
            labels[name] = labelValue
            rest = rest[rest.index(after: index)...]
            if rest.first == "," { rest = rest.dropFirst() }
        }
        return Sample(name: String(series[..<brace]), labels: labels, value: value)
    }
}
