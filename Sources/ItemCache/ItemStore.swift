import FileKit
import Foundation
import Metrics
import Synchronization
import Transport

/// A cache of values by key: what ``ItemLoader`` stores fetched items in, and what an app can use
/// directly. ``ItemStore`` is the default; a test or an app can bring its own.
public protocol ItemCaching: Sendable {
    /// The stored item and the tier it came from, fresh or not; nil when there is none. Touches
    /// memory and disk only, never the network; disk work runs off the caller's thread.
    func item(for key: CacheKey) async throws(ItemCacheError) -> StoredItem?
    /// ``item(for:)`` on the calling thread, for code that cannot await.
    @available(*, noasync, message: "use the async item(for:); this one blocks on disk")
    func itemNow(for key: CacheKey) throws(ItemCacheError) -> StoredItem?
    /// Stores `data` under `key`; returns the item as stored.
    @discardableResult
    func store(_ data: Data, for key: CacheKey, options: StoreOptions) async throws(ItemCacheError) -> CachedItem
    /// After a successful revalidation: the new expiry and validators of a stored item. Returns
    /// the updated item, or nil when it is gone.
    func refresh(_ key: CacheKey, expires: Date?, mustRevalidate: Bool, etag: String?, lastModified: String?)
        async throws(ItemCacheError) -> CachedItem?
    /// Removes the item of `key`, from every tier; returns whether there was one.
    @discardableResult
    func removeItem(for key: CacheKey) async throws(ItemCacheError) -> Bool
    /// The folder other processes meet in to coalesce fetches, or nil for a cache of this
    /// process alone.
    var sharedLockFile: RangeLockFile? { get }
    /// Records that a fetch of `key` failed, for the processes that waited for it.
    func recordFetchFailure(_ error: ItemCacheError, for key: CacheKey) async
    /// The failure of a fetch of `key` recorded at or after `since` by any process sharing the
    /// cache; nil when there is none.
    func fetchFailure(for key: CacheKey, since: Date) async -> ItemCacheError?
    /// Records that a fetch of `key` got an answer that may not be kept (`no-store`), so that
    /// processes that find its fetch under way fetch alongside instead of waiting in turn.
    func recordUnstorable(_ key: CacheKey) async
    /// When a fetch of `key` last got an answer that may not be kept, by any process sharing the
    /// cache; nil when none is recorded.
    func unstorableMark(for key: CacheKey) async -> Date?
    /// After a successful revalidation: the new expiry, validators and stored response (the
    /// 304's headers merged in, RFC 9111 §4.3.4) of a stored item. Returns the updated item,
    /// or nil when it is gone.
    func refresh(
        _ key: CacheKey, expires: Date?, mustRevalidate: Bool, etag: String?, lastModified: String?,
        response: HTTPResponseRecord?
    ) async throws(ItemCacheError) -> CachedItem?
    /// The keys of the stored variants of `key` (RFC 9111 §4.1, ``CacheKey``'s secondary keys).
    func variantKeys(of key: CacheKey) async throws(ItemCacheError) -> [CacheKey]
    /// Whether a load may ask `origin` now, as the failures recorded by every process sharing
    /// the cache have it.
    func originGate(_ origin: String, now: Date, backoff: OriginBackoff) async -> OriginGate
    /// Records a failure of `origin` (`status`: the failing status it answered, nil for no
    /// answer); returns when its next attempt is due.
    func recordOriginFailure(
        _ origin: String, message: String, status: Int?, now: Date, backoff: OriginBackoff, retryAfter: Double?
    ) async -> Date?
    /// Forgets the failures of `origin`.
    func clearOriginFailure(_ origin: String) async
}

extension ItemCaching {
    /// A cache without stored responses: the expiry and validators alone.
    public func refresh(
        _ key: CacheKey, expires: Date?, mustRevalidate: Bool, etag: String?, lastModified: String?,
        response: HTTPResponseRecord?
    ) async throws(ItemCacheError) -> CachedItem? {
        try await refresh(key, expires: expires, mustRevalidate: mustRevalidate, etag: etag, lastModified: lastModified)
    }
    /// A cache that keeps one response a key: no variants.
    public func variantKeys(of key: CacheKey) async throws(ItemCacheError) -> [CacheKey] { [] }
    /// A cache of one process: the loader's own backoff decides.
    public func originGate(_ origin: String, now: Date, backoff: OriginBackoff) async -> OriginGate {
        .open(probing: false)
    }
    /// A cache of one process: nothing to record.
    public func recordOriginFailure(
        _ origin: String, message: String, status: Int?, now: Date, backoff: OriginBackoff, retryAfter: Double?
    ) async -> Date? { nil }
    /// A cache of one process: nothing to forget.
    public func clearOriginFailure(_ origin: String) async {}
    /// A cache of one process shares failures through its flights alone: nothing to record.
    public func recordFetchFailure(_ error: ItemCacheError, for key: CacheKey) async {}
    /// A cache of one process shares failures through its flights alone: nothing recorded.
    public func fetchFailure(for key: CacheKey, since: Date) async -> ItemCacheError? { nil }
    /// A cache of one process shares fetches through its flights alone: nothing to record.
    public func recordUnstorable(_ key: CacheKey) async {}
    /// A cache of one process shares fetches through its flights alone: nothing recorded.
    public func unstorableMark(for key: CacheKey) async -> Date? { nil }
}

/// An item and the tier that held it.
public struct StoredItem: Sendable, Equatable {
    /// The item.
    public var item: CachedItem
    /// ``ItemSource/memory`` or ``ItemSource/disk``.
    public var source: ItemSource
}

/// The memory and disk tiers, shared by every process that opens the same folder.
///
/// - Reads look in memory, then in the writes waiting for their group, then on disk (a disk hit
///   is kept in memory too). ``cachedItem(for:)`` is synchronous for code that cannot `await`.
/// - Each write is on disk when it returns, with the total at most ``CacheConfiguration/diskLimit``,
///   unless ``CacheConfiguration/groupWrites`` defers it: then it waits in memory, readable,
///   until its group is written.
/// - Opening reconciles the index and the files (a crash can leave either without the other).
///
/// Call ``close()`` before the process ends: it writes the pending group and the recorded reads.
public final class ItemStore: ItemCaching {
    /// The settings the store was opened with.
    public let configuration: CacheConfiguration
    /// The disk tier in use. Replaced by a new, empty one when its index turns out damaged
    /// while the store is open (`onDisk(_:)`).
    private let tier: Mutex<DiskTier>
    /// One replacement at a time.
    private let replacing = Mutex(())
    /// Counts the indexes set aside while open (`<prefix>_index_set_aside`).
    private let indexesSetAside: Counter
    private let setAsideSinceOpening = Atomic<Int>(0)
    /// How many times a damaged index was set aside and replaced by an empty one since the store
    /// opened (`onDisk(_:)`; at opening, ``CacheRepairs/indexSetAside`` says it). An app can
    /// report it; `<prefix>_index_set_aside` counts it too.
    public var indexesSetAsideSinceOpening: Int { setAsideSinceOpening.load(ordering: .relaxed) }
    /// The disk tier in use now.
    var disk: DiskTier { tier.withLock { $0 } }
    let memory: MemoryTier<CachedItem>
    let io: BlockingIOPool
    private let group = Mutex(PendingGroup())
    /// When the index last showed no failing origin at all: until ``originCheckInterval``
    /// later, a gate opens without a hop to the I/O pool (the common case costs nothing; a
    /// failure another process records is seen within the interval). `anyFailures` is set at
    /// once when this process records one.
    private let originCheck = Mutex<(at: ContinuousClock.Instant?, anyFailures: Bool)>((nil, true))
    /// How long an empty `originFailure` table is trusted: 0.5 s.
    static let originCheckInterval: Duration = .milliseconds(500)
    /// One group write at a time, in order.
    private let flushing = Mutex(false)

    private struct PendingGroup {
        var writes: [String: (sequence: Int, write: PendingWrite)] = [:]
        var sequence = 0
        var timerArmed = false
        var closed = false
        /// The failure of a group write no caller waited for (the timer's), until the next
        /// flush or close throws it: their stores had returned, and the group is gone.
        var unreported: ItemCacheError?

        mutating func takeUnreported() -> ItemCacheError? {
            defer { unreported = nil }
            return unreported
        }
    }

    /// What opening found and repaired.
    public let openingRepairs: CacheRepairs
    /// Providers' running loads, so concurrent gets of one record load it once.
    let providerLoads = FlightTable<CachedItem>()
    /// Empties the memory tier under the cgroup's memory pressure; nil when turned off.
    private let pressureMonitor: MemoryPressureMonitor?

    /// Opens the cache in ``CacheConfiguration/folder``, creating it when needed (unless
    /// ``CacheConfiguration/createsFolder`` is false), and reconciles its index with its files.
    /// Blocks while it does (a stat per stored file).
    ///
    /// Refuses (``ItemCacheError/Code/folderRefused``) a folder that is neither empty nor a
    /// cache, or that others could write (docs/security.md). A damaged index is set aside as
    /// `index.sqlite.damaged` and the cache starts empty (``CacheRepairs/indexSetAside``).
    public init(configuration: CacheConfiguration, io: BlockingIOPool = .shared) throws(ItemCacheError) {
        // A relative folder is the working folder's, once: a later change of the working
        // folder moves nothing (and a bare name has no parent for Foundation to take).
        var configuration = configuration
        configuration.folder = FileSystem.absolutePath(configuration.folder)
        self.configuration = configuration
        self.io = io
        let folder = try CacheFolder(
            path: configuration.folder, sharing: configuration.sharing, create: configuration.createsFolder)
        var repairs = CacheRepairs()
        var tier: DiskTier
        do {
            tier = try DiskTier(folder: folder, configuration: configuration)
        } catch  where error.code == .damagedIndex {
            try Self.setAsideIndex(of: folder, keepingUpTo: Self.damagedCopyLimit(configuration.diskLimit))
            repairs.indexSetAside = true
            tier = try DiskTier(folder: folder, configuration: configuration)
        }
        memory = MemoryTier(limits: configuration.memory)
        if configuration.purgesMemoryUnderPressure {
            pressureMonitor = MemoryPressureMonitor(
                root: configuration.cgroupRoot, interval: configuration.pressurePollInterval
            ) { [weak memory, logger = configuration.logger] in
                guard let memory else { return false }
                logger.debug("memory pressure on the cgroup: emptying the item cache's memory tier")
                memory.removeAll()
                return true
            }
        } else {
            pressureMonitor = nil
        }
        let reconciliation: DiskTier.Reconciliation
        do {
            reconciliation = try tier.reconcile()
        } catch  where error.code == .damagedIndex && !repairs.indexSetAside {
            // A damaged page the opening did not read: the scan of every row found it.
            try Self.setAsideIndex(of: folder, keepingUpTo: Self.damagedCopyLimit(tier.limit))
            repairs.indexSetAside = true
            tier = try DiskTier(folder: folder, configuration: configuration)
            reconciliation = try tier.reconcile()
        }
        self.tier = Mutex(tier)
        indexesSetAside = Counter(label: configuration.metricsPrefix + "_index_set_aside")
        repairs.orphanFiles = reconciliation.orphanFiles
        repairs.orphanRows = reconciliation.orphanRows
        repairs.statsRepaired = reconciliation.statsRepaired
        openingRepairs = repairs
    }

    /// Runs `body` on the disk tier. When it finds the index damaged (a page that does not read
    /// back, met after opening), the index is set aside as at opening, a new empty one takes
    /// its place (counted in ``indexesSetAsideSinceOpening``), and `body` runs once more on it:
    /// a read then misses (the loader fetches again) and a write lands in the new index, so the
    /// process goes on without a restart. Values in memory stay: their bytes were checked when
    /// read.
    func onDisk<T>(_ body: (DiskTier) throws(ItemCacheError) -> T) throws(ItemCacheError) -> T {
        let current = disk
        do {
            return try body(current)
        } catch  where error.code == .damagedIndex {
            try replaceDamaged(current, error)
            return try body(disk)
        }
    }

    /// Sets aside the damaged index of `failed` and opens a new one, unless another caller
    /// already replaced it.
    private func replaceDamaged(_ failed: DiskTier, _ error: ItemCacheError) throws(ItemCacheError) {
        try replacing.withLock { _ throws(ItemCacheError) in
            guard tier.withLock({ $0 === failed }) else { return }
            try Self.setAsideIndex(of: failed.folder, keepingUpTo: Self.damagedCopyLimit(failed.limit))
            let fresh = try DiskTier(folder: failed.folder, configuration: configuration)
            _ = try fresh.reconcile()
            tier.withLock { $0 = fresh }
            indexesSetAside.increment()
            setAsideSinceOpening.add(1, ordering: .relaxed)
            configuration.logger.debug(
                "the cache index \(failed.folder.path)/index.sqlite was damaged (\(error.message)); it is set aside and the cache goes on with a new, empty one"
            )
        }
    }

    /// The largest damaged index kept beside the new one under `limit` (nil: the default
    /// limit): the log's budget, a sixteenth of the limit, which the folder's reserve holds
    /// twice; a bigger one is deleted, so the folder stays within its limit.
    static func damagedCopyLimit(_ limit: Int64?) -> Int64 {
        DiskTier.walBudget(for: limit ?? CacheConfiguration.defaultDiskLimit)
    }

    /// Moves a damaged index aside (`index.sqlite.damaged`, replacing an older one; its log and
    /// shared-memory files go), so the cache opens again empty. A damaged index of more than
    /// `keepingUpTo` bytes is deleted instead: the copy is for a post-mortem, and must not take
    /// the folder past its limit. Under the lock file's repair slot: when another process set it
    /// aside first, the index opens again and nothing moves.
    static func setAsideIndex(of folder: CacheFolder, keepingUpTo: Int64) throws(ItemCacheError) {
        do {
            let lock = try folder.openLockFile()
            try lock.lock(slot: DiskTier.repairSlot, exclusive: true)
            defer { lock.unlock(slot: DiskTier.repairSlot) }
            if DiskTier.indexOpens(in: folder) { return }
            var status = stat()
            let tooBig =
                fstatat(folder.descriptor, "index.sqlite", &status, AT_SYMLINK_NOFOLLOW) == 0
                && FileSystem.allocatedBytes(status) > keepingUpTo
            if tooBig {
                unlinkat(folder.descriptor, "index.sqlite.damaged", 0)
                if unlinkat(folder.descriptor, "index.sqlite", 0) != 0 && errno != ENOENT {
                    throw FileSystemError(
                        "cannot delete the damaged index", path: folder.path + "/index.sqlite", syscall: "unlinkat",
                        errno: errno)
                }
            } else if renameat(folder.descriptor, "index.sqlite", folder.descriptor, "index.sqlite.damaged") != 0
                && errno != ENOENT
            {
                throw FileSystemError(
                    "cannot set the damaged index aside", path: folder.path + "/index.sqlite", syscall: "renameat",
                    errno: errno)
            }
            unlinkat(folder.descriptor, "index.sqlite-wal", 0)
            unlinkat(folder.descriptor, "index.sqlite-shm", 0)
        } catch {
            throw ItemCacheError(
                code: .storage,
                message:
                    "the cache index \(folder.path)/index.sqlite is damaged and cannot be set aside: \(error); delete the folder to start empty",
                underlying: error)
        }
    }

    /// The folder's `cache.lock`, where processes sharing the folder coalesce their fetches.
    public var sharedLockFile: RangeLockFile? { disk.lockFile }

    /// Records the failure in the index, where every process sharing the folder sees it. A
    /// failure to record is dropped: waiters then fetch themselves, as before.
    public func recordFetchFailure(_ error: ItemCacheError, for key: CacheKey) async {
        try? await io.run { () throws(ItemCacheError) in
            try self.onDisk { disk throws(ItemCacheError) in try disk.recordFailure(error, for: key, at: Date()) }
        }
    }

    /// The failure recorded for `key` at or after `since`, by this or another process.
    public func fetchFailure(for key: CacheKey, since: Date) async -> ItemCacheError? {
        (try? await io.run { () throws(ItemCacheError) in
            try self.onDisk { disk throws(ItemCacheError) in try disk.failure(for: key, since: since) }
        }) ?? nil
    }

    /// Records the unstorable answer in the index, where every process sharing the folder sees
    /// it. A failure to record is dropped: waiters then wait in turn, as before.
    public func recordUnstorable(_ key: CacheKey) async {
        try? await io.run { () throws(ItemCacheError) in
            try self.onDisk { disk throws(ItemCacheError) in try disk.recordUnstorable(key, at: Date()) }
        }
    }

    /// When a fetch of `key` last got an answer that may not be kept, by this or another process.
    public func unstorableMark(for key: CacheKey) async -> Date? {
        (try? await io.run { () throws(ItemCacheError) in
            try self.onDisk { disk throws(ItemCacheError) in try disk.unstorable(for: key) }
        }) ?? nil
    }

    /// Adds `amounts` to counters kept in the folder, which every process sharing it adds to
    /// and reads (``counters()``): totals across processes and restarts, such as ImageCache's
    /// variants made. A counter starts at 0 and saturates.
    public func addToCounters(_ amounts: [String: Int64]) async throws(ItemCacheError) {
        guard amounts.values.contains(where: { $0 != 0 }) else { return }
        try await io.run { () throws(ItemCacheError) in
            try self.onDisk { disk throws(ItemCacheError) in try disk.addToCounters(amounts) }
        }
    }

    /// The folder's counters (``addToCounters(_:)``), by name.
    public func counters() async throws(ItemCacheError) -> [String: Int64] {
        try await io.run { () throws(ItemCacheError) in
            try self.onDisk { disk throws(ItemCacheError) in try disk.counters() }
        }
    }

    /// The keys of the stored variants of `key`.
    public func variantKeys(of key: CacheKey) async throws(ItemCacheError) -> [CacheKey] {
        try await io.run { () throws(ItemCacheError) in
            try self.onDisk { disk throws(ItemCacheError) in try disk.variantKeys(of: key) }
        }
    }

    /// Whether a load may ask `origin` now, as every process sharing the folder recorded its
    /// failures. An index that cannot be read opens the gate (a cache never blocks on its
    /// bookkeeping).
    public func originGate(_ origin: String, now: Date, backoff: OriginBackoff) async -> OriginGate {
        let trusted = originCheck.withLock { check in
            guard let at = check.at, !check.anyFailures else { return false }
            return ContinuousClock.now - at < Self.originCheckInterval
        }
        if trusted { return .open(probing: false) }
        return
            (try? await io.run { () throws(ItemCacheError) in
                try self.onDisk { disk throws(ItemCacheError) in
                    let checked = ContinuousClock.now
                    guard try disk.anyOriginFailures() else {
                        self.originCheck.withLock { $0 = (checked, false) }
                        return .open(probing: false)
                    }
                    self.originCheck.withLock { $0 = (checked, true) }
                    return try disk.originGate(origin, now: now, backoff: backoff)
                }
            }) ?? .open(probing: false)
    }

    /// Records a failure of `origin` for every process sharing the folder.
    public func recordOriginFailure(
        _ origin: String, message: String, status: Int?, now: Date, backoff: OriginBackoff, retryAfter: Double?
    ) async -> Date? {
        originCheck.withLock { $0.anyFailures = true }
        return try? await io.run { () throws(ItemCacheError) in
            try self.onDisk { disk throws(ItemCacheError) in
                try disk.recordOriginFailure(
                    origin, message: message, status: status, now: now, backoff: backoff, retryAfter: retryAfter)
            }
        }
    }

    /// Forgets the failures of `origin`.
    public func clearOriginFailure(_ origin: String) async {
        try? await io.run { () throws(ItemCacheError) in
            try self.onDisk { disk throws(ItemCacheError) in try disk.clearOriginFailure(origin) }
        }
    }

    // MARK: - Reading

    /// The item of `key` from memory, the pending group or disk (kept in memory after), fresh
    /// or not; nil when there is none. A fresh memory hit returns at once; anything else is
    /// looked up on the I/O pool, off the caller's thread. An expired value in memory is
    /// checked against the disk, where another process may have stored a fresh one.
    public func item(for key: CacheKey) async throws(ItemCacheError) -> StoredItem? {
        try await item(for: key, filesOver: nil)
    }

    /// ``item(for:)`` on the calling thread, for code that cannot await (it blocks on SQLite
    /// and the disk).
    @available(*, noasync, message: "use the async item(for:); this one blocks on disk")
    public func itemNow(for key: CacheKey) throws(ItemCacheError) -> StoredItem? {
        try lookUp(key)
    }

    /// The old name of ``itemNow(for:)``.
    @available(*, deprecated, renamed: "itemNow(for:)")
    @available(*, noasync, message: "use the async item(for:); this one blocks on disk")
    public func cachedItem(for key: CacheKey) throws(ItemCacheError) -> StoredItem? {
        try lookUp(key)
    }

    /// The old name of ``item(for:)``.
    @available(*, deprecated, renamed: "item(for:)")
    public func storedItem(for key: CacheKey) async throws(ItemCacheError) -> StoredItem? {
        try await item(for: key)
    }

    /// ``item(for:)``; with `filesOver`, a value kept in a file and larger than that is not read:
    /// the item holds its open, checked file (``ValueFile``). The loader's lookup.
    func item(for key: CacheKey, filesOver: Int64?) async throws(ItemCacheError) -> StoredItem? {
        let now = configuration.clock.now
        if let item = memory.value(for: key), !item.info.isExpired(at: now) {
            disk.touch(key, at: now)
            return StoredItem(item: item, source: .memory)
        }
        return try await io.run { () throws(ItemCacheError) in try self.lookUp(key, filesOver: filesOver) }
    }

    /// Memory, the pending group, then disk (kept in memory after), on the calling thread.
    private func lookUp(_ key: CacheKey, filesOver: Int64? = nil) throws(ItemCacheError) -> StoredItem? {
        var expiredInMemory: CachedItem?
        if let item = memory.value(for: key) {
            let now = configuration.clock.now
            if !item.info.isExpired(at: now) {
                disk.touch(key, at: now)
                return StoredItem(item: item, source: .memory)
            }
            expiredInMemory = item
        }
        if configuration.groupWrites != nil, let pending = group.withLock({ $0.writes[key.rawValue]?.write }) {
            return StoredItem(item: CachedItem(key: key, data: pending.data, info: pending.info), source: .memory)
        }
        guard let item = try onDisk({ disk throws(ItemCacheError) in try disk.read(key, filesOver: filesOver) }) else {
            if expiredInMemory != nil { memory.remove(key) }
            return nil
        }
        if item.file == nil {
            _ = memory.set(item, cost: item.data.count, for: key)
        } else {
            memory.remove(key)
        }
        return StoredItem(item: item, source: .disk)
    }

    /// The record of `key` without its value, nil when there is none.
    public func info(for key: CacheKey) async throws(ItemCacheError) -> ItemInfo? {
        if let pending = group.withLock({ $0.writes[key.rawValue]?.write }) { return pending.info }
        return try await io.run { () throws(ItemCacheError) in
            try self.onDisk { disk throws(ItemCacheError) in try disk.info(for: key) }
        }
    }

    /// ``info(for:)`` on the calling thread, for code that cannot await.
    @available(*, noasync, message: "use the async info(for:); this one blocks on disk")
    public func infoNow(for key: CacheKey) throws(ItemCacheError) -> ItemInfo? {
        if let pending = group.withLock({ $0.writes[key.rawValue]?.write }) { return pending.info }
        return try onDisk { disk throws(ItemCacheError) in try disk.info(for: key) }
    }

    // MARK: - Writing

    /// The record a store of `data` with `options` makes now.
    func record(for data: Data, options: StoreOptions, now: Date? = nil) -> ItemInfo {
        record(size: Int64(data.count), options: options, now: now)
    }

    /// The record a store of a `size`-byte value with `options` makes now.
    func record(size: Int64, options: StoreOptions, now: Date? = nil) -> ItemInfo {
        let now = now ?? configuration.clock.now
        let expiry = options.expiry ?? configuration.defaultExpiry
        return ItemInfo(
            size: size, created: now, accessed: now, expires: expiry.expirationDate(storedAt: now),
            mustRevalidate: options.mustRevalidate, pinned: options.pinned, groups: options.groups,
            etag: options.etag, lastModified: options.lastModified, contentType: options.contentType,
            metadata: options.metadata, response: options.response)
    }

    /// Stores `data` under `key`. With ``Expiry/dontStore`` nothing is kept and the item is
    /// returned as it would have been stored.
    @discardableResult
    public func store(_ data: Data, for key: CacheKey, options: StoreOptions = StoreOptions())
        async throws(ItemCacheError) -> CachedItem
    {
        try refuseIfClosed(key)
        let item = CachedItem(key: key, data: data, info: record(for: data, options: options))
        if options.expiry == .dontStore { return item }
        let write = PendingWrite(key: key, data: data, info: item.info)
        if let policy = configuration.groupWrites {
            // A value the limit cannot hold fails here, alone, as without group writes: in the
            // group it failed the group's one transaction, and every other pending store with it.
            try disk.checkFits([write])
            let full = try group.withLock { group throws(ItemCacheError) -> Bool in
                if group.closed {
                    throw ItemCacheError(
                        code: .closed, message: "the cache at \(configuration.folder) is closed; open a new ItemStore",
                        key: key)
                }
                group.sequence += 1
                group.writes[key.rawValue] = (group.sequence, write)
                return group.writes.count >= policy.maxItems
            }
            memory.remove(key)
            if full {
                try await flush()
            } else {
                armTimer(policy.maxDelay)
            }
        } else {
            try await io.run { () throws(ItemCacheError) in
                try self.onDisk { disk throws(ItemCacheError) in
                    try disk.write([write], afterCommit: { self.keep(item) })
                }
            }
        }
        return item
    }

    /// Stores the value `file` (a fetch's staged body) under `key`: the file itself becomes the
    /// value's blob, never copied, and the memory tier is passed by (the item returned holds the
    /// open file). A value small enough for the index is read and stored as bytes. Pending
    /// group writes of the key are dropped, as ``storeNow(_:for:options:)`` does.
    func store(file: ValueFile, for key: CacheKey, options: StoreOptions = StoreOptions())
        async throws(ItemCacheError) -> CachedItem
    {
        let item = CachedItem(key: key, file: file, info: record(size: file.size, options: options))
        if options.expiry == .dontStore { return item }
        let write = PendingWrite(key: key, file: file, info: item.info)
        // Refused before it is read: a file the cache cannot keep never enters memory whole.
        try disk.checkFits([write])
        // A small one is kept in the index. A large one that is no staged file (a `file://`
        // item where the folder has no O_TMPFILE) is copied in chunks (BlobFolder.link).
        if file.size <= Int64(disk.inlineThreshold) {
            return try await store(try file.data(), for: key, options: options)
        }
        try await io.run { () throws(ItemCacheError) in
            _ = self.dropFromGroup(key)
            try self.onDisk { disk throws(ItemCacheError) in
                // An older, smaller value of the key in memory must not answer for this one.
                try disk.write([write], afterCommit: { self.memory.remove(key) })
            }
        }
        return item
    }

    /// Puts a just-committed item in memory. Called inside the disk tier's commit, so this
    /// process's writes of one key reach memory in the order they reached the disk.
    private func keep(_ item: CachedItem) {
        _ = memory.set(item, cost: item.data.count, for: item.key)
    }

    /// Stores `data` under `key` on the calling thread, for code that cannot `await`: like
    /// ``store(_:for:options:)`` but blocking until the value is on disk, even with group writes
    /// on (a pending write of the same key is superseded).
    @discardableResult
    @available(*, noasync, message: "use the async store(_:for:options:); this one blocks on disk")
    public func storeNow(_ data: Data, for key: CacheKey, options: StoreOptions = StoreOptions()) throws(ItemCacheError)
        -> CachedItem
    {
        try refuseIfClosed(key)
        let item = CachedItem(key: key, data: data, info: record(for: data, options: options))
        if options.expiry == .dontStore { return item }
        dropFromGroup(key)
        try onDisk { disk throws(ItemCacheError) in
            try disk.write([PendingWrite(key: key, data: data, info: item.info)], afterCommit: { self.keep(item) })
        }
        return item
    }

    /// Sets the expiry and validators of a stored item after a `304`, in memory and on disk.
    public func refresh(_ key: CacheKey, expires: Date?, mustRevalidate: Bool, etag: String?, lastModified: String?)
        async throws(ItemCacheError) -> CachedItem?
    {
        try await refresh(
            key, expires: expires, mustRevalidate: mustRevalidate, etag: etag, lastModified: lastModified, response: nil
        )
    }

    /// Sets the expiry, validators and (when given) stored response of a stored item after a
    /// `304`, in memory and on disk.
    public func refresh(
        _ key: CacheKey, expires: Date?, mustRevalidate: Bool, etag: String?, lastModified: String?,
        response: HTTPResponseRecord?
    ) async throws(ItemCacheError) -> CachedItem? {
        let info = try await refreshInfo(
            key, expires: expires, mustRevalidate: mustRevalidate, etag: etag, lastModified: lastModified,
            response: response)
        if info != nil, let refreshed = memory.value(for: key) { return refreshed }
        return try await item(for: key)?.item
    }

    /// Sets the expiry, validators and stored response of `key` after a `304`, in memory and on
    /// disk, and returns its record; its value is not read. Nil when no item is stored.
    func refreshInfo(
        _ key: CacheKey, expires: Date?, mustRevalidate: Bool, etag: String?, lastModified: String?,
        response: HTTPResponseRecord?
    ) async throws(ItemCacheError) -> ItemInfo? {
        // The row must be on disk before it is updated; without a pending group, no hop.
        if group.withLock({ !$0.writes.isEmpty }) { try await flush() }
        return try await io.run { () throws(ItemCacheError) -> ItemInfo? in
            try self.onDisk { disk throws(ItemCacheError) in
                try disk.refresh(
                    key, expires: expires, mustRevalidate: mustRevalidate, etag: etag, lastModified: lastModified,
                    response: response,
                    afterCommit: { info in
                        guard var item = self.memory.value(for: key) else { return }
                        guard let info else { return self.memory.remove(key) }
                        item.info = info
                        self.keep(item)
                    })
            }
        }
    }

    /// Reads the item of `key`, passes it (or nil) to `transform`, and stores the bytes that
    /// returns, as one atomic step: no write of this or any other process sharing the folder
    /// comes between the read and the write. Returns the stored item; when `transform` returns
    /// nil nothing changes and the current item (or nil) is returned.
    ///
    /// The new value keeps the current item's expiry, groups, pin, content type and metadata
    /// (it is an edit of the same item), and drops its validators (the server never saw these
    /// bytes). With no current item, `options` describe the new one. `transform` runs while
    /// the folder's writers wait: keep it short.
    @discardableResult
    public func update(
        _ key: CacheKey, options: StoreOptions = StoreOptions(),
        _ transform: @escaping @Sendable (CachedItem?) throws(ItemCacheError) -> Data?
    ) async throws(ItemCacheError) -> CachedItem? {
        try refuseIfClosed(key)
        if group.withLock({ $0.writes[key.rawValue] != nil }) { try await flush() }
        return try await io.run { () throws(ItemCacheError) -> CachedItem? in
            try self.onDisk { disk throws(ItemCacheError) in
                try disk.modify(
                    key,
                    { current in
                        guard let data = try transform(current) else { return nil }
                        let now = self.configuration.clock.now
                        var info = self.record(for: data, options: options, now: now)
                        if let current {
                            info = ItemInfo(
                                size: Int64(data.count), created: now, accessed: now, expires: current.info.expires,
                                mustRevalidate: current.info.mustRevalidate, pinned: current.info.pinned,
                                groups: current.info.groups,
                                contentType: current.info.contentType, metadata: current.info.metadata)
                        }
                        return PendingWrite(key: key, data: data, info: info)
                    },
                    afterCommit: { item in
                        if let item { self.keep(item) } else { self.memory.remove(key) }
                    })
            }
        }
    }

    /// Removes the item of `key` from memory, the pending group and disk, with its variants
    /// (the responses stored for it under `Vary`) and, for a URL's own key, the entries loads
    /// that sent credentials kept of it (``CacheKey/sentWith(headers:url:account:)``).
    @discardableResult
    public func removeItem(for key: CacheKey) async throws(ItemCacheError) -> Bool {
        try await removeItems(for: key) > 0
    }

    /// ``removeItem(for:)``, saying how many entries went: the key's own (with its variants)
    /// and each one a load with a credential kept of the URL.
    @discardableResult
    public func removeItems(for key: CacheKey) async throws(ItemCacheError) -> Int {
        var removed = try await removeItem(for: key, includingVariants: true) ? 1 : 0
        // The URL's key stands for the entries loads with credentials kept of it too
        // (CacheKey+Credentials.swift): removing the URL removes them, a batch at a time.
        guard !key.rawValue.contains(CacheKey.credentialMarker), !key.rawValue.contains(CacheKey.variantMarker) else {
            return removed
        }
        while true {
            let forms = try await io.run { () throws(ItemCacheError) in
                try self.onDisk { disk throws(ItemCacheError) in try disk.credentialKeys(of: key, limit: 500) }
            }
            var batch = 0
            for form in forms where try await removeItem(for: form, includingVariants: false) { batch += 1 }
            removed += batch
            // A batch that removed nothing (rows that would not go) ends it rather than loop.
            if forms.count < 500 || batch == 0 { return removed }
        }
    }

    /// Removes the item of `key`, and its variants unless `includingVariants` is false.
    @discardableResult
    func removeItem(for key: CacheKey, includingVariants: Bool) async throws(ItemCacheError) -> Bool {
        memory.remove(key)
        return try await io.run { () throws(ItemCacheError) in
            let pending = self.dropFromGroup(key)
            let stored = try self.onDisk { disk throws(ItemCacheError) in
                let variants = includingVariants ? try disk.variantKeys(of: key) : []
                for variant in variants { self.memory.remove(variant) }
                return try disk.remove(
                    key, includingVariants: includingVariants,
                    afterCommit: {
                        self.memory.remove(key)
                        for variant in variants { self.memory.remove(variant) }
                    })
            }
            return pending || stored
        }
    }

    /// Takes `key`'s write out of the pending group, and waits for a group write that already
    /// took it to commit, so a direct write or remove of `key` that follows lands after it (a
    /// group committing later would bring an older value back). Returns whether it was pending.
    @discardableResult
    private func dropFromGroup(_ key: CacheKey) -> Bool {
        guard configuration.groupWrites != nil else { return false }
        let pending = group.withLock { $0.writes.removeValue(forKey: key.rawValue) } != nil
        // A group write under way took its items inside `flushing` and holds it until it
        // commits: taking it waits for that write, and leaves the rest of the group pending.
        if pending { flushing.withLock { _ in } }
        return pending
    }

    /// Empties the memory tier (the disk keeps everything).
    public func purgeMemory() {
        memory.removeAll()
    }

    /// What the folder takes on disk now, as the file system counts it (allocated blocks of the
    /// index, log, shared memory, tag, lock file, blob folders and files): the quantity
    /// ``CacheConfiguration/diskLimit`` bounds. A `stat` per stored file.
    public func footprint() async -> Int64 {
        await io.run { self.disk.measuredFootprint() }
    }

    /// Disk usage as the index counts it (pending group writes not included).
    public func statistics() async throws(ItemCacheError) -> CacheStatistics {
        try await io.run { () throws(ItemCacheError) in
            try self.onDisk { disk throws(ItemCacheError) in try disk.statistics() }
        }
    }

    /// ``statistics()`` on the calling thread, for code that cannot await.
    @available(*, noasync, message: "use the async statistics(); this one blocks on disk")
    public func statisticsNow() throws(ItemCacheError) -> CacheStatistics {
        try onDisk { disk throws(ItemCacheError) in try disk.statistics() }
    }

    // MARK: - Group writes

    /// Writes the pending group now (nothing happens without one), and the reads recorded so far.
    /// Throws when that write fails, or when a group write started by ``GroupWritePolicy/maxDelay``
    /// failed since the last flush: either way, stores that returned are not on disk.
    public func flush() async throws(ItemCacheError) {
        try await io.run { () throws(ItemCacheError) in try self.flushNow() }
    }

    /// The group write, on the calling thread: one transaction for the whole group. The values
    /// stay readable in `group` until their rows are committed. With `unawaited` (the timer's
    /// write) a failure waits in `group` for the next flush or close, which throws it.
    private func flushNow(unawaited: Bool = false) throws(ItemCacheError) {
        let result = flushing.withLock { _ -> Result<Void, ItemCacheError> in
            let batch = group.withLock { $0.writes }
            guard !batch.isEmpty else {
                disk.flushTouches()
                return .success(())
            }
            let ordered = batch.values.sorted { $0.sequence < $1.sequence }
            let result = Result { () throws(ItemCacheError) in
                try onDisk { disk throws(ItemCacheError) in try disk.write(ordered.map(\.write)) }
            }
            // Written or failed, the group leaves memory (a later store of a key stays).
            group.withLock { group in
                for (key, entry) in batch where group.writes[key]?.sequence == entry.sequence {
                    group.writes.removeValue(forKey: key)
                }
            }
            if unawaited, case .failure(let error) = result {
                let lost = ItemCacheError(
                    code: error.code,
                    message:
                        "the group write due after \(configuration.groupWrites?.maxDelay ?? .zero) failed, and its \(batch.count) stores are not on disk: \(error.message)",
                    key: error.key, underlying: error)
                group.withLock { $0.unreported = $0.unreported ?? lost }
            }
            return result
        }
        if unawaited { return }
        // The timer's failure first: its stores were lost first (this write's failure, if any,
        // says the same to this caller).
        if let earlier = group.withLock({ $0.takeUnreported() }) { throw earlier }
        try result.get()
    }

    private func armTimer(_ delay: Duration) {
        let arm = group.withLock { group -> Bool in
            if group.timerArmed { return false }
            group.timerArmed = true
            return true
        }
        guard arm else { return }
        Task { [weak self] in
            try? await Task.sleep(for: delay.clampedWait)
            guard let self else { return }
            self.group.withLock { $0.timerArmed = false }
            // No caller waits here: the next flush or close reports a failure.
            try? await self.io.run { () throws(ItemCacheError) in try self.flushNow(unawaited: true) }
        }
    }

    /// Throws ``ItemCacheError/Code/closed`` once ``close()`` ran, with group writes on: then
    /// every write call fails alike (`storeNow` and `update` wrote to disk while `store` was
    /// refused). Without group writes `close()` is a flush point and writes go on, as before.
    private func refuseIfClosed(_ key: CacheKey) throws(ItemCacheError) {
        guard configuration.groupWrites != nil, group.withLock({ $0.closed }) else { return }
        throw ItemCacheError(
            code: .closed, message: "the cache at \(configuration.folder) is closed; open a new ItemStore", key: key)
    }

    /// Writes the pending group and the recorded reads; with group writes on, later writes
    /// (`store`, `storeNow`, `update`) fail with ``ItemCacheError/Code/closed``. Reads and
    /// removals still work.
    public func close() async throws(ItemCacheError) {
        group.withLock { $0.closed = true }
        try await flush()
        disk.flushTouches()
    }

    /// ``close()`` on the calling thread, for code that cannot `await`.
    @available(*, noasync, message: "use the async close(); this one blocks on disk")
    public func closeNow() throws(ItemCacheError) {
        group.withLock { $0.closed = true }
        try flushNow()
        disk.flushTouches()
    }
}
