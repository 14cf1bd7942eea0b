import ContentSync
import CoreMetrics
import Foundation
import Metrics
internal import Prometheus
import Synchronization

/// The agent's metrics: one Prometheus registry, recorded into through swift-metrics, that the
/// endpoint serves at `/metrics`.
///
/// Each instance has its own registry and leaves the global `MetricsSystem` alone, so tests and
/// the fleet simulation can make as many as they like. The `sync-agent` executable calls
/// ``bootstrapMetricsSystem()`` once so that other libraries' swift-metrics (the item cache's)
/// land in the same registry.
///
/// Every metric is labelled with `storage`, the storage's name in the config file:
///
/// | Name | Type | Labels | Meaning |
/// | --- | --- | --- | --- |
/// | `sync_agent_checks_total` | counter | `storage` | Checks made, successful or not. |
/// | `sync_agent_updates_total` | counter | `storage`, `outcome` | Checks that changed the folder; `outcome` is `replayed` (change lists) or `restored` (archive). |
/// | `sync_agent_check_failures_total` | counter | `storage`, `code` | Failed checks by error code (`network`, `integrity`, …). |
/// | `sync_agent_downloaded_bytes_total` | counter | `storage` | Content bytes downloaded by updates (archives and files, not the JSON documents), including an update whose switch was then vetoed or failed. |
/// | `sync_agent_downloaded_files_total` | counter | `storage` | Files downloaded by updates (for a restore: extracted from the archive). |
/// | `sync_agent_update_duration_seconds` | histogram | `storage` | How long checks that changed the folder took. |
/// | `sync_agent_last_success_timestamp_seconds` | gauge | `storage` | Unix time of the last successful check (at start: the state database's); absent for a folder that never synced. |
/// | `sync_agent_consecutive_failures` | gauge | `storage` | Failed checks since the last success. |
/// | `sync_agent_version_info` | gauge | `storage`, `version` | Always 1; `version` is the version the folder holds. Absent while the folder holds none. |
///
/// When the version changes, the old version's `sync_agent_version_info` series is removed
/// rather than set to 0, so each storage has at most one; Prometheus marks the old series stale
/// at the next scrape. ``StorageMetrics/remove()`` removes all of a storage's series.
public final class AgentMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    private let describedFactory: DescribedMetricsFactory
    private let now: @Sendable () -> Date
    /// What each storage has recorded that `remove()` must find again: the version label and
    /// the failure codes seen.
    private let series = Mutex<[String: StorageSeries]>([:])

    /// A registry of its own; `now` stamps `sync_agent_last_success_timestamp_seconds` (tests fix it).
    public init(now: @escaping @Sendable () -> Date = { Date() }) {
        let registry = PrometheusCollectorRegistry()
        var prometheus = PrometheusMetricsFactory(registry: registry)
        prometheus.durationHistogramBuckets[Name.updateDuration] = Self.updateDurationBuckets
        self.registry = registry
        self.describedFactory = DescribedMetricsFactory(prometheus: prometheus)
        self.now = now
    }

    /// The swift-metrics factory over this registry: metrics made with it (`Counter(label:factory:)`)
    /// appear at `/metrics`.
    public var factory: any MetricsFactory {
        describedFactory
    }

    /// Makes ``factory`` the global `MetricsSystem` factory, so every library's swift-metrics
    /// appear at `/metrics`. Only the executable calls this, once per process: swift-metrics
    /// stops the process on a second bootstrap.
    public func bootstrapMetricsSystem() {
        MetricsSystem.bootstrap(describedFactory)
    }

    /// The metrics of the storage called `name`, with its counters and its consecutive-failure
    /// gauge at 0 so that rates work from the first scrape.
    public func storage(named name: String) -> StorageMetrics {
        let storage = StorageMetrics(name: name, metrics: self)
        storage.registerZeros()
        return storage
    }

    /// Every metric in the Prometheus text exposition format (version 0.0.4).
    public func exposition() -> [UInt8] {
        registry.emitToBuffer()
    }

    /// Seconds since 1970 now, for the last-success gauge.
    var unixTime: Double {
        now().timeIntervalSince1970
    }

    func withSeries<T>(_ name: String, _ body: (inout StorageSeries) -> T) -> T {
        series.withLock { all in
            var entry = all[name] ?? StorageSeries()
            defer { all[name] = entry }
            return body(&entry)
        }
    }

    func removeSeries(_ name: String) -> StorageSeries? {
        series.withLock { $0.removeValue(forKey: name) }
    }

    /// Checks that change the folder take from a fraction of a second (a small change list) to
    /// many minutes (restoring a large archive).
    static let updateDurationBuckets: [Duration] = [
        .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10), .seconds(30),
        .seconds(60), .seconds(120), .seconds(300), .seconds(600), .seconds(1800),
    ]

    /// The metric names, spelled once.
    enum Name {
        static let checks = "sync_agent_checks_total"
        static let updates = "sync_agent_updates_total"
        static let failures = "sync_agent_check_failures_total"
        static let downloadedBytes = "sync_agent_downloaded_bytes_total"
        static let downloadedFiles = "sync_agent_downloaded_files_total"
        static let updateDuration = "sync_agent_update_duration_seconds"
        static let lastSuccess = "sync_agent_last_success_timestamp_seconds"
        static let consecutiveFailures = "sync_agent_consecutive_failures"
        static let versionInfo = "sync_agent_version_info"

        /// The `# HELP` text of each; the registry requires one text per name.
        static let help: [String: String] = [
            checks: "Checks made, successful or not.",
            updates: "Checks that changed the folder, by outcome (replayed or restored).",
            failures: "Failed checks, by error code.",
            downloadedBytes: "Content bytes downloaded by updates (archives and files, not JSON).",
            downloadedFiles: "Files downloaded by updates (for a restore: extracted from the archive).",
            updateDuration: "Duration of checks that changed the folder.",
            lastSuccess: "Unix time of the last successful check.",
            consecutiveFailures: "Failed checks since the last success.",
            versionInfo: "Always 1; the version label is the version the folder holds.",
        ]
    }
}

/// The labels a storage used that only it knows: found again by `remove()` and by version changes.
struct StorageSeries {
    var version: String?
    var failureCodes: Set<String> = []
}

/// The metrics of one storage, for its poll loop. Made by ``AgentMetrics/storage(named:)``; a
/// copy records into the same series.
public struct StorageMetrics: Sendable {
    /// The storage's name: the `storage` label.
    public let name: String
    private let metrics: AgentMetrics

    init(name: String, metrics: AgentMetrics) {
        self.name = name
        self.metrics = metrics
    }

    /// Records a check that succeeded, taking `duration`: the check always; for an update
    /// (outcome not `upToDate`) also its outcome, downloads and duration. Stamps the last
    /// success, clears the consecutive failures and sets the version to the report's.
    public func checkSucceeded(_ report: SyncReport, duration: Duration) {
        counter(AgentMetrics.Name.checks).increment()
        if report.outcome != .upToDate {
            counter(AgentMetrics.Name.updates, ("outcome", report.outcome.rawValue)).increment()
            counter(AgentMetrics.Name.downloadedBytes).increment(by: max(0, report.bytesDownloaded))
            counter(AgentMetrics.Name.downloadedFiles).increment(by: max(0, report.filesDownloaded))
            CoreMetrics.Timer(label: AgentMetrics.Name.updateDuration, dimensions: labels(), factory: factory)
                .record(duration: duration)
        }
        CoreMetrics.Gauge(label: AgentMetrics.Name.lastSuccess, dimensions: labels(), factory: factory)
            .record(metrics.unixTime)
        consecutiveFailures.set(0)
        setVersion(report.toVersion.text)
    }

    /// Sets the last success and the failures since, as the state database records them (at
    /// start): a restarted agent whose checks keep failing still shows how stale its folder is.
    public func restore(lastSuccess: Date?, consecutiveFailures count: Int) {
        if let lastSuccess {
            CoreMetrics.Gauge(label: AgentMetrics.Name.lastSuccess, dimensions: labels(), factory: factory)
                .record(lastSuccess.timeIntervalSince1970)
        }
        consecutiveFailures.set(count)
    }

    /// Records a check that failed with the error code `code` (`SyncError.Code`'s name, such as
    /// `network`), the `consecutiveFailures`-th failure in a row, after downloading
    /// `bytesDownloaded` bytes in `filesDownloaded` files (a switch vetoed after its downloads:
    /// the next attempt reuses them and counts nothing).
    public func checkFailed(
        code: String, consecutiveFailures count: Int, bytesDownloaded: Int64 = 0, filesDownloaded: Int = 0
    ) {
        counter(AgentMetrics.Name.checks).increment()
        // A failure after the downloads (a vetoed switch) still moved them over the network.
        if bytesDownloaded > 0 { counter(AgentMetrics.Name.downloadedBytes).increment(by: bytesDownloaded) }
        if filesDownloaded > 0 { counter(AgentMetrics.Name.downloadedFiles).increment(by: filesDownloaded) }
        metrics.withSeries(name) { series in
            // Under the lock, so that remove() cannot miss a code recorded at the same time.
            series.failureCodes.insert(code)
            counter(AgentMetrics.Name.failures, ("code", code)).increment()
        }
        consecutiveFailures.set(count)
    }

    /// Sets the version the folder holds (at start, from the state database): the
    /// `sync_agent_version_info` series for the old version is removed. `nil` removes it.
    public func setVersion(_ version: String?) {
        metrics.withSeries(name) { series in
            guard series.version != version else { return }
            if let old = series.version {
                versionInfo(old).destroy()
            }
            if let version {
                versionInfo(version).record(1)
            }
            series.version = version
        }
    }

    /// Removes every series of this storage, for when a reload drops it. Call it once the
    /// storage's loop has ended: a later call on this value would bring the series back.
    public func remove() {
        let series = metrics.removeSeries(name) ?? StorageSeries()
        for outcome in [SyncReport.Outcome.replayed, .restored] {
            counter(AgentMetrics.Name.updates, ("outcome", outcome.rawValue)).destroy()
        }
        for code in series.failureCodes {
            counter(AgentMetrics.Name.failures, ("code", code)).destroy()
        }
        if let version = series.version {
            versionInfo(version).destroy()
        }
        for label in [AgentMetrics.Name.checks, AgentMetrics.Name.downloadedBytes, AgentMetrics.Name.downloadedFiles] {
            counter(label).destroy()
        }
        CoreMetrics.Timer(label: AgentMetrics.Name.updateDuration, dimensions: labels(), factory: factory).destroy()
        CoreMetrics.Gauge(label: AgentMetrics.Name.lastSuccess, dimensions: labels(), factory: factory).destroy()
        consecutiveFailures.destroy()
    }

    /// Creates the series that start at 0; the registry keeps them from then on.
    func registerZeros() {
        _ = counter(AgentMetrics.Name.checks)
        for outcome in [SyncReport.Outcome.replayed, .restored] {
            _ = counter(AgentMetrics.Name.updates, ("outcome", outcome.rawValue))
        }
        _ = counter(AgentMetrics.Name.downloadedBytes)
        _ = counter(AgentMetrics.Name.downloadedFiles)
        // Every failure code from 0, so that an alert on increase() sees the first failure.
        metrics.withSeries(name) { series in
            for code in SyncError.Code.allCases.map(\.description) {
                series.failureCodes.insert(code)
                _ = counter(AgentMetrics.Name.failures, ("code", code))
            }
        }
        _ = CoreMetrics.Timer(label: AgentMetrics.Name.updateDuration, dimensions: labels(), factory: factory)
        _ = consecutiveFailures
    }

    // The registry hands back the one metric per name and labels, so a handle made per call
    // records into the same series, and destroying one unregisters that series.

    private var factory: any MetricsFactory {
        metrics.factory
    }

    /// `storage` first, then `extra`: the registry tells label sets apart by order too.
    private func labels(_ extra: (String, String)...) -> [(String, String)] {
        [("storage", name)] + extra
    }

    private func counter(_ label: String, _ extra: (String, String)...) -> CoreMetrics.Counter {
        CoreMetrics.Counter(label: label, dimensions: labels() + extra, factory: factory)
    }

    private var consecutiveFailures: Meter {
        Meter(label: AgentMetrics.Name.consecutiveFailures, dimensions: labels(), factory: factory)
    }

    private func versionInfo(_ version: String) -> CoreMetrics.Gauge {
        CoreMetrics.Gauge(
            label: AgentMetrics.Name.versionInfo, dimensions: labels(("version", version)), factory: factory)
    }
}

/// `PrometheusMetricsFactory`, plus `# HELP` lines for the agent's own metrics: swift-metrics
/// has no help text, and the registry requires the same text for every series of a name, so
/// the agent's names are always made here with theirs.
struct DescribedMetricsFactory: MetricsFactory {
    let prometheus: PrometheusMetricsFactory

    private var registry: PrometheusCollectorRegistry {
        prometheus.registry
    }

    /// The name with its help text, for the agent's own names only.
    private func described(_ label: String) -> MetricNameDescriptor? {
        AgentMetrics.Name.help[label].map { MetricNameDescriptor(metricName: label, unitName: "", helpText: $0) }
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        guard let descriptor = described(label) else {
            return prometheus.makeCounter(label: label, dimensions: dimensions)
        }
        return registry.makeCounter(descriptor: descriptor, labels: dimensions)
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        guard let descriptor = described(label) else {
            return prometheus.makeFloatingPointCounter(label: label, dimensions: dimensions)
        }
        return registry.makeCounter(descriptor: descriptor, labels: dimensions)
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        guard let descriptor = described(label) else {
            return prometheus.makeMeter(label: label, dimensions: dimensions)
        }
        return registry.makeGauge(descriptor: descriptor, labels: dimensions)
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        // The agent records only plain gauges; its histogram is a Timer.
        guard let descriptor = described(label), !aggregate else {
            return prometheus.makeRecorder(label: label, dimensions: dimensions, aggregate: aggregate)
        }
        return registry.makeGauge(descriptor: descriptor, labels: dimensions)
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        guard let descriptor = described(label) else {
            return prometheus.makeTimer(label: label, dimensions: dimensions)
        }
        let buckets = prometheus.durationHistogramBuckets[label] ?? prometheus.defaultDurationHistogramBuckets
        return registry.makeDurationHistogram(descriptor: descriptor, labels: dimensions, buckets: buckets)
    }

    func destroyCounter(_ handler: any CounterHandler) {
        prometheus.destroyCounter(handler)
    }

    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        prometheus.destroyFloatingPointCounter(handler)
    }

    func destroyMeter(_ handler: any MeterHandler) {
        prometheus.destroyMeter(handler)
    }

    func destroyRecorder(_ handler: any RecorderHandler) {
        prometheus.destroyRecorder(handler)
    }

    func destroyTimer(_ handler: any TimerHandler) {
        prometheus.destroyTimer(handler)
    }
}
