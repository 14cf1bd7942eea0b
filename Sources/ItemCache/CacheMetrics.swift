import Metrics

/// The cache's swift-metrics instruments. The library picks no backend: an app bootstraps one
/// (Prometheus, StatsD, …) with `MetricsSystem.bootstrap`, or the numbers go nowhere.
///
/// Names, with the configured prefix (`item_cache` by default):
/// - `<prefix>_hits` by `tier` (`memory`, `disk`): loads answered fresh by that tier;
///   `<prefix>_misses` by `tier`: loads that tier could not answer fresh. A load the disk
///   answered is a memory miss and a disk hit; a load that went to the origin (nothing stored,
///   expired, a reload) is a miss of both, so `misses{tier="disk"}` counts fetches and
///   `hits{tier}` + `misses{tier}` counts the loads that reached that tier;
/// - `<prefix>_evictions` (items a write evicted to stay under the disk limit, counted by the
///   disk tier once the write commits), `<prefix>_stored_bytes` (bytes written), `<prefix>_fetched_bytes`;
/// - `<prefix>_fetch_duration` (a timer, per fetch), `<prefix>_revalidations` by `result`
///   (`not_modified`, `modified`), `<prefix>_stale_served` by `reason`;
/// - `<prefix>_shared_failures`: loads that waited for another process's fetch of the same key
///   and shared its failure instead of fetching again; `<prefix>_unstorable_alongside`: loads
///   that found another process's fetch of a key whose answers may not be kept, and fetched
///   alongside it instead of waiting; `<prefix>_damaged` (counted by the disk
///   tier): stored values found damaged on a read and dropped.
struct CacheMetrics: Sendable {
    let memoryHits, diskHits, memoryMisses, diskMisses, storedBytes, fetchedBytes: Counter
    let notModified, modified, staleWhileRevalidate, staleIfError, sharedFailures, unstorableAlongside: Counter
    let fetchDuration: Metrics.Timer

    init(prefix: String) {
        memoryHits = Counter(label: prefix + "_hits", dimensions: [("tier", "memory")])
        diskHits = Counter(label: prefix + "_hits", dimensions: [("tier", "disk")])
        memoryMisses = Counter(label: prefix + "_misses", dimensions: [("tier", "memory")])
        diskMisses = Counter(label: prefix + "_misses", dimensions: [("tier", "disk")])
        storedBytes = Counter(label: prefix + "_stored_bytes")
        fetchedBytes = Counter(label: prefix + "_fetched_bytes")
        notModified = Counter(label: prefix + "_revalidations", dimensions: [("result", "not_modified")])
        modified = Counter(label: prefix + "_revalidations", dimensions: [("result", "modified")])
        staleWhileRevalidate = Counter(label: prefix + "_stale_served", dimensions: [("reason", "while_revalidate")])
        staleIfError = Counter(label: prefix + "_stale_served", dimensions: [("reason", "if_error")])
        sharedFailures = Counter(label: prefix + "_shared_failures")
        unstorableAlongside = Counter(label: prefix + "_unstorable_alongside")
        fetchDuration = Metrics.Timer(label: prefix + "_fetch_duration")
    }

    /// A load answered fresh by `source`'s tier (a disk hit missed memory first).
    func hit(_ source: ItemSource) {
        if source == .memory {
            memoryHits.increment()
        } else {
            memoryMisses.increment()
            diskHits.increment()
        }
    }

    /// A load neither tier could answer fresh.
    func miss() {
        memoryMisses.increment()
        diskMisses.increment()
    }
}
