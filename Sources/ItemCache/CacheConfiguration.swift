import Foundation
import Logging
import Transport

/// What an ``ItemStore`` is told (its folder, limits, tiers, durability, clock, logger and
/// metrics), each field with its default, and in ``loading`` what an ``ItemLoader`` on it is
/// told (``LoadingConfiguration``): one configuration per component, as Nuke's `DataCache` and
/// `ImagePipeline.Configuration` are.
///
/// Only ``folder`` has no default; `CacheConfiguration(folder:)` is a complete configuration.
public struct CacheConfiguration: Sendable {
    /// The cache folder: the index (`index.sqlite`), the blob files (`blobs/`), the lock file
    /// (`cache.lock`) and the tag (`CACHEDIR.TAG`). Several processes may share it. Created
    /// when missing (``createsFolder``); an existing folder must be empty or a cache, and
    /// writable by no one else (``sharing``; docs/security.md).
    public var folder: String
    /// Who may share the folder: ``FolderSharing/private`` (this user; a new folder is 0700)
    /// or ``FolderSharing/group``. Default private.
    public var sharing: FolderSharing = .private
    /// Whether opening makes the cache when there is none. Default true; false opens only an
    /// existing cache and refuses (``ItemCacheError/Code/folderRefused``) a missing folder and
    /// an existing one that holds no cache (an empty one included), leaving it untouched, as
    /// `sync-agent cache ls`, `stats`, `rm` and `purge` do.
    public var createsFolder = true
    /// The most bytes the cache folder takes on disk: its values, inline and in files, their
    /// rows, the index and its log, and the folders (the folder's footprint; the values get
    /// somewhat less than the limit). When a write returns and no other write is under way, the
    /// footprint is within the folder's limit. Writes under way at once (threads or processes)
    /// each put their value's file in the folder before their transaction evicts for it, so
    /// until they commit the footprint can pass the limit by the values being written then (and
    /// the log by what they append); measured: 8 writers of 150–300 KB values under a 1 MiB
    /// limit reached 2 MB. Size the limit with that headroom below the disk's free space.
    ///
    /// The limit belongs to the folder: a value set here is stored in its index when the cache
    /// opens, and every process sharing the folder enforces it from its next write (the last
    /// one set wins). Default nil: keep the folder's limit, or ``defaultDiskLimit`` (512 MiB)
    /// for a folder that never had one.
    public var diskLimit: Int64?
    /// The disk limit of a folder that was never given one: 512 MiB.
    public static let defaultDiskLimit: Int64 = 512 << 20
    /// The memory tier's limits. Default ``MemoryLimits/init(totalBytes:itemBytes:count:)`` with
    /// its defaults (256 MiB or an eighth of a small cgroup limit, 10 MiB a value, no count limit).
    public var memory = MemoryLimits()
    /// Values up to this many bytes live inside the index; bigger ones are files. Default
    /// 16 KiB (measured: `make bench-cache`, the inline threshold table in docs/benchmarks.md).
    public var inlineThreshold = 16 << 10
    /// How long an item stays fresh when the caller gives no expiry (and, with
    /// ``FreshnessPolicy/server``, the server gives none either). Default one day.
    public var defaultExpiry: Expiry = .oneDay
    /// The loader's settings: freshness, stale serving, coalescing and concurrent fetches.
    /// An ``ItemStore`` ignores them; ``ItemLoader/init(store:loading:transport:)`` takes them
    /// on their own.
    public var loading = LoadingConfiguration()
    /// Deferred writes: when set, stores are collected and written together every so many items
    /// or seconds (RXWebCache's group writes). Default nil: each write is on disk when it returns.
    public var groupWrites: GroupWritePolicy?
    /// What a power loss can take. Default ``CacheDurability/relaxed``.
    public var durability: CacheDurability = .relaxed
    /// How long a write waits for another process's write before it retries, then fails.
    /// Default 10 s.
    public var busyTimeout: Duration = .seconds(10)
    /// Where the cache reads the time (expiries, freshness, record times). Default
    /// ``SystemCacheClock``; a test injects its own.
    public var clock: any CacheClock = SystemCacheClock()
    /// Where the cache's debug messages go. Default: nowhere.
    public var logger = Logger(label: "content-sync.item-cache", factory: { _ in SwiftLogNoOpLogHandler() })
    /// The prefix of the swift-metrics names (`<prefix>_hits`, …). Default `item_cache`.
    public var metricsPrefix = "item_cache"
    /// Empty the memory tier when the kernel reports memory pressure on the process's cgroup
    /// (v2 `memory.events`: over `memory.high`, at `memory.max`, an OOM kill), as caches on
    /// Apple platforms do on a memory warning; the disk keeps everything. Default true.
    public var purgesMemoryUnderPressure = true
    /// Where the cgroup's files are, and how often they are read (tests point these at a fake).
    var cgroupRoot = "/sys/fs/cgroup"
    var pressurePollInterval: Duration = .seconds(1)

    /// A configuration for the cache in `folder`, every other field at its default.
    public init(folder: String) {
        self.folder = folder
    }

    // MARK: - Loader settings at their old place

    /// ``LoadingConfiguration/freshness`` at its old place.
    @available(*, deprecated, renamed: "loading.freshness")
    public var freshness: FreshnessPolicy {
        get { loading.freshness }
        set { loading.freshness = newValue }
    }
    /// ``LoadingConfiguration/staleWhileRevalidate`` at its old place.
    @available(*, deprecated, renamed: "loading.staleWhileRevalidate")
    public var staleWhileRevalidate: Duration {
        get { loading.staleWhileRevalidate }
        set { loading.staleWhileRevalidate = newValue }
    }
    /// ``LoadingConfiguration/staleIfError`` at its old place: true for
    /// ``StaleIfErrorPolicy/whenPermitted``, false for ``StaleIfErrorPolicy/never``.
    @available(*, deprecated, message: "use loading.staleIfError, a StaleIfErrorPolicy")
    public var staleIfError: Bool {
        get { loading.staleIfError != .never }
        set { loading.staleIfError = newValue ? .whenPermitted : .never }
    }
    /// ``LoadingConfiguration/coalescingTimeout`` at its old place.
    @available(*, deprecated, renamed: "loading.coalescingTimeout")
    public var coalescingTimeout: Duration {
        get { loading.coalescingTimeout }
        set { loading.coalescingTimeout = newValue }
    }
    /// ``LoadingConfiguration/maxConcurrentFetches`` at its old place.
    @available(*, deprecated, renamed: "loading.maxConcurrentFetches")
    public var maxConcurrentFetches: Int {
        get { loading.maxConcurrentFetches }
        set { loading.maxConcurrentFetches = newValue }
    }
}

/// What an ``ItemLoader`` is told beyond its store's configuration: when a stored item is good
/// enough, how long it waits for another process's fetch, and how many fetches run at once.
/// Every field has its default.
public struct LoadingConfiguration: Sendable {
    /// Whether a fetched item's freshness comes from the caller only or from the server's
    /// `Cache-Control`, `Expires` and `Age` when the caller sets no expiry. Default
    /// ``FreshnessPolicy/server``.
    public var freshness: FreshnessPolicy = .server
    /// The lifetime of a response that states none (RFC 9111 §4.2.2's heuristic freshness):
    /// ``HTTPFreshnessModel/Heuristic/defaultExpiry`` (the store's
    /// ``CacheConfiguration/defaultExpiry``, one day, as RXWebCache has it) or
    /// ``HTTPFreshnessModel/Heuristic/lastModifiedFraction(_:)`` (10 % of the time since
    /// `Last-Modified`, as browsers do). Default ``HTTPFreshnessModel/Heuristic/defaultExpiry``.
    public var heuristic: HTTPFreshnessModel.Heuristic = .defaultExpiry
    /// For this long after an item expires, a get returns the stale value at once and refreshes
    /// it in the background (stale-while-revalidate). Default 0: no window.
    public var staleWhileRevalidate: Duration = .zero
    /// When a fetch fails (a 500, 502, 503 or 504, or no answer) and a stale value is stored,
    /// whether it is returned, marked ``ItemSource/stale``, instead of the failure (RxCache's
    /// "use expired data if the loader fails"). Default ``StaleIfErrorPolicy/whenPermitted``:
    /// unless the origin forbade it (`must-revalidate`, `no-cache`) or its `stale-if-error`
    /// window has passed. A 4xx is the origin's answer, never a failure to stand in for.
    public var staleIfError: StaleIfErrorPolicy = .whenPermitted
    /// Retries of one fetch with nothing stored to stand in: by default two attempts for a
    /// timeout, a dropped connection or a 500/502/503/504/408/429 (honouring `Retry-After` up
    /// to 60 s), and none for a connection that cannot be made (refused, unresolvable), which
    /// fails at once. A fetch whose stale value may stand in is tried once: the stale value is
    /// the better answer than a second wait.
    public var retry: RetryPolicy = {
        var policy = RetryPolicy()
        policy.maxAttempts = 2
        policy.baseDelay = .milliseconds(200)
        policy.retriesFailedConnections = false
        return policy
    }()
    /// The longest one attempt of a fetch may take. Default 60 s; nil for the transport's own
    /// limit.
    public var timeout: Duration? = .seconds(60)
    /// After an origin fails (no answer, or a 500/502/503/504/429), later loads that need it
    /// answer at once (stale data where allowed, else the failure) until its next attempt is
    /// due; one load then probes it, and a success clears the backoff. The backoff is shared by
    /// every process using the folder. Default ``OriginBackoff/init(initial:maximum:)`` with
    /// 1 s doubling to 60 s.
    public var originBackoff = OriginBackoff()
    /// How long a load waits for another process's fetch of the same key before it fetches
    /// itself (nginx's `proxy_cache_lock_timeout`): a fetch that hangs delays the others at most
    /// this long. A waiter whose wait ends with the other fetch's failure shares that failure
    /// (and its stale fallback) instead of trying again. Default 30 s: longer than one fetch
    /// with its retries against a failing origin (measured: four attempts at a 503 after 1.5 s
    /// take 7.3 s; nginx's 5 s assumes no retries), shorter than a hung one (the transport's
    /// stall window is 30 s an attempt).
    public var coalescingTimeout: Duration = .seconds(30)
    /// At most this many fetches run at once; more wait their turn. Default 6 (RXWebCache).
    public var maxConcurrentFetches = 6

    /// The defaults.
    public init() {}
}

/// How long loads leave a failing origin alone: the first failure `initial`, each further one
/// twice as long, at most `maximum`; a `Retry-After` asking for longer wins.
public struct OriginBackoff: Sendable, Equatable {
    /// The first wait. Default 1 s.
    public var initial: Duration
    /// The longest wait. Default 60 s.
    public var maximum: Duration

    /// A backoff from `initial` doubling up to `maximum`.
    public init(initial: Duration = .seconds(1), maximum: Duration = .seconds(60)) {
        self.initial = initial
        self.maximum = maximum
    }

    /// The longest an origin's `Retry-After` (or a stored backoff) holds loads off: 300 s.
    static let longestRetryAfter: Double = 300

    /// No backoff: every load asks the origin.
    public static let none = OriginBackoff(initial: .zero, maximum: .zero)

    /// The wait after `failures` failures in a row (1 for the first).
    public func delay(afterFailures failures: Int) -> Duration {
        guard failures > 0, initial > .zero else { return .zero }
        // Clamped first: `.seconds(.max)` ("never again") doubled would overflow.
        let doubled = initial.clampedWait * (1 << min(failures - 1, 20))
        return min(doubled, max(initial, maximum).clampedWait)
    }
}

/// Whose freshness rules a fetched item follows when the caller gives no expiry.
public enum FreshnessPolicy: Sendable, Equatable {
    /// The caller's expiry, else ``CacheConfiguration/defaultExpiry``; response headers are
    /// ignored for freshness (ETag and Last-Modified are still kept for revalidation).
    case caller
    /// The caller's expiry when given; otherwise the server's, as ``HTTPFreshnessModel``
    /// applies RFC 9111: `no-store` is not stored, `no-cache` is stored but revalidated on every
    /// use, `max-age` (less the age) or `Expires` (against `Date`) set the lifetime; with none
    /// of them, a status cacheable by default gets ``LoadingConfiguration/heuristic``'s lifetime
    /// (``CacheConfiguration/defaultExpiry`` by default) and any other is not stored.
    case server
}

/// Deferred writes: a group is written when it holds ``maxItems`` items or its oldest item has
/// waited ``maxDelay``, and on ``ItemStore/close()``.
public struct GroupWritePolicy: Sendable, Equatable {
    /// Write when this many items are pending. Default 100.
    public var maxItems: Int
    /// Write when the oldest pending item has waited this long. Default 1 s.
    public var maxDelay: Duration

    /// A policy writing every `maxItems` items or `maxDelay`, whichever comes first.
    public init(maxItems: Int = 100, maxDelay: Duration = .seconds(1)) {
        self.maxItems = max(1, maxItems)
        self.maxDelay = maxDelay
    }
}

/// What a power loss (not a crash of the process: that loses nothing written) can do to the cache.
public enum CacheDurability: Sendable, Equatable {
    /// No flush per write (a cache can refetch). SQLite runs in WAL mode with
    /// `synchronous=NORMAL`: a power loss can roll back the last writes, never corrupt the
    /// index. A blob file written just before it may be short, empty or full of zeros: every
    /// read checks a value's size and CRC-32C against the index, and a value that does not match
    /// is dropped as a miss, never served. ``full`` keeps what such a loss would take.
    case relaxed
    /// Each blob file is flushed before its index row commits, and each commit is flushed
    /// (`synchronous=FULL`): what a write returned survives a power loss. Costs an `fsync` or
    /// two per write.
    case full
}
