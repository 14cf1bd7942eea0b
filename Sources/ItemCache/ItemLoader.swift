import FileKit
import Foundation
import Synchronization
import Transport

/// An item as a load returned it: the value, where it came from, and, for a stale value served
/// because the fetch failed, that failure.
public struct LoadedItem: Sendable {
    /// The item.
    public var item: CachedItem
    /// Where it came from.
    public var source: ItemSource
    /// The fetch failure a stale value stands in for (stale-if-error); nil otherwise.
    public var fetchError: ItemCacheError?
    /// Why a fetched value was delivered but not kept (``ItemCacheError/Code/tooLarge``: more
    /// than the disk limit, or than pinned items leave); nil when it was kept or was not to be.
    public var storeError: ItemCacheError?

    /// The value's bytes.
    public var data: Data { item.data }
}

/// How a load may use the cache and the network.
public enum LoadPolicy: Sendable, Equatable {
    /// A fresh stored value if there is one; otherwise fetch (revalidating a stale one).
    case useCache
    /// Fetch whatever is stored (RxCache's `evict: true`); a stored stale value still serves
    /// if the fetch fails and stale-if-error is on.
    case reload
    /// Never touch the network: a stored value, fresh or stale (marked ``ItemSource/stale``),
    /// or ``ItemCacheError/Code/notCached``.
    case offline
}

/// How to load one item.
public struct LoadOptions: Sendable {
    /// The item's expiry; nil for the server's word or the default (``LoadingConfiguration/freshness``).
    public var expiry: Expiry?
    /// Cache or network; default ``LoadPolicy/useCache``.
    public var policy: LoadPolicy
    /// Groups or tags the stored item gets.
    public var groups: [String]
    /// Never evict the stored item.
    public var pinned: Bool
    /// The caller's metadata, stored with it.
    public var metadata: [String: String]
    /// Extra request headers that do not vary the response (auth, say). Headers that do vary it
    /// belong in the key (``CacheKey/init(url:parameters:varyingHeaders:context:)``).
    public var headers: [String: String]
    /// Called with this item's progress, bytes against the total.
    public var progress: ProgressHandler?

    /// Options with these fields; by default a cached load with the configured expiry.
    public init(
        expiry: Expiry? = nil, policy: LoadPolicy = .useCache, groups: [String] = [], pinned: Bool = false,
        metadata: [String: String] = [:], headers: [String: String] = [:], progress: ProgressHandler? = nil
    ) {
        self.expiry = expiry
        self.policy = policy
        self.groups = groups
        self.pinned = pinned
        self.metadata = metadata
        self.headers = headers
        self.progress = progress
    }
}

/// An item's state, ISCache's way.
public enum ItemState: Sendable, Equatable {
    /// Not stored and not being fetched.
    case notFound
    /// Being fetched: bytes so far against the total (nil until the server says).
    case inProgress(TransferProgress)
    /// Stored.
    case found
}

/// Loads items by URL and parameters through the cache: memory, then disk, then the network,
/// with one fetch per key however many ask (in this process and, through the folder's lock
/// file, in every process sharing it), HTTP freshness and revalidation, stale-while-revalidate
/// and stale-if-error, at most ``LoadingConfiguration/maxConcurrentFetches`` fetches at once,
/// and states to observe.
public final class ItemLoader: Sendable {
    /// Where items are kept.
    public let store: any ItemCaching
    /// The settings it runs with.
    public let configuration: CacheConfiguration
    private let fetchers: Mutex<[String: any ItemFetching]>
    private let flights = FlightTable<LoadedItem>()
    private let observers = Mutex<[String: [Int: AsyncStream<ItemState>.Continuation]]>([:])
    private let observerIDs = Atomic<Int>(0)
    private let limiter: FetchLimiter
    let metrics: CacheMetrics
    private let ownedTransport: CurlTransport?

    /// A loader on `store`, fetching `http` and `https` through `transport` and `file` URLs from
    /// disk.
    public convenience init(store: any ItemCaching, configuration: CacheConfiguration, transport: any Transport) {
        self.init(store: store, configuration: configuration, transport: transport, owned: nil)
    }

    private init(
        store: any ItemCaching, configuration: CacheConfiguration, transport: any Transport, owned: CurlTransport?
    ) {
        self.store = store
        self.configuration = configuration
        let http = HTTPFetcher(transport: transport)
        fetchers = Mutex(["http": http, "https": http, "file": FileFetcher()])
        limiter = FetchLimiter(limit: configuration.loading.maxConcurrentFetches)
        metrics = CacheMetrics(prefix: configuration.metricsPrefix)
        ownedTransport = owned
    }

    /// A loader on `store`, with the store's configuration (clock, logger, metrics, default
    /// expiry) and `loading` for its own settings, fetching through `transport`, which the
    /// caller shares and shuts down after ``close()``. Several loaders with different settings
    /// can share one store.
    public convenience init(
        store: ItemStore, loading: LoadingConfiguration = LoadingConfiguration(), transport: any Transport
    ) {
        var configuration = store.configuration
        configuration.loading = loading
        self.init(store: store, configuration: configuration, transport: transport, owned: nil)
    }

    /// Opens an ``ItemStore`` in the configured folder and fetches through `transport`, which
    /// the caller shares (with a `CacheManager`, other loaders) and shuts down after
    /// ``close()``: the configuration is given once.
    public convenience init(configuration: CacheConfiguration, transport: any Transport) throws(ItemCacheError) {
        self.init(
            store: try ItemStore(configuration: configuration), configuration: configuration, transport: transport,
            owned: nil)
    }

    /// Opens an ``ItemStore`` in the configured folder and a `CurlTransport` of its own (ended
    /// by ``close()``).
    public convenience init(configuration: CacheConfiguration) throws(ItemCacheError) {
        let store = try ItemStore(configuration: configuration)
        let transport: CurlTransport
        do {
            transport = try CurlTransport()
        } catch {
            throw ItemCacheError(code: .fetch, message: "cannot start the HTTP transport: \(error)", underlying: error)
        }
        self.init(store: store, configuration: configuration, transport: transport, owned: transport)
    }

    /// Fetches keys in `name` (a context, or a URL scheme such as `https`) with `fetcher`. A
    /// key's context is tried first, then its URL's scheme; custom keys use their context.
    public func register(_ fetcher: any ItemFetching, for name: String) {
        fetchers.withLock { $0[name] = fetcher }
    }

    /// Writes what is pending (an ``ItemStore``'s group and recorded reads) and ends the
    /// transport this loader opened.
    public func close() async throws(ItemCacheError) {
        if let store = store as? ItemStore { try await store.close() }
        await ownedTransport?.shutdown()
    }

    // MARK: - Loading

    /// The item at `url` with `parameters` (merged into its query), whose response varies by
    /// `varyingHeaders`, in `context`.
    public func item(
        for url: URL, parameters: RequestParameters = [:], varyingHeaders: [String: String] = [:],
        context: String = "", options: LoadOptions = LoadOptions()
    ) async throws(ItemCacheError) -> LoadedItem {
        let key = try CacheKey(url: url, parameters: parameters, varyingHeaders: varyingHeaders, context: context)
        var request = url
        if !parameters.isEmpty, var components = URLComponents(url: url, resolvingAgainstBaseURL: true) {
            // Escaped byte for byte: Foundation's queryItems would send `+` as it is, which a
            // server reads as a space.
            components.percentEncodedQuery = [components.percentEncodedQuery, parameters.percentEncodedQuery]
                .compactMap { $0?.isEmpty == false ? $0 : nil }.joined(separator: "&")
            request = components.url ?? url
        }
        var options = options
        options.headers.merge(varyingHeaders) { mine, _ in mine }
        return try await item(for: key, url: request, options: options)
    }

    /// The item of `key`, fetched from `url` (nil for a custom key, whose context's fetcher
    /// makes it) when the cache cannot answer.
    public func item(for key: CacheKey, url: URL?, options: LoadOptions = LoadOptions()) async throws(ItemCacheError)
        -> LoadedItem
    {
        let now = configuration.clock.now
        // Memory answers at once; anything else is looked up on the I/O pool.
        let stored = try await store.item(for: key)
        var stale = stored?.item
        switch LoadDecision.decide(
            stored: stored?.item.info, policy: options.policy, now: now,
            staleWhileRevalidate: configuration.loading.staleWhileRevalidate)
        {
        case .serveFresh:
            metrics.hit(stored!.source)
            return LoadedItem(item: stored!.item, source: stored!.source)
        case .serveOffline:
            let item = stored!.item
            if item.info.isExpired(at: now) { return LoadedItem(item: item, source: .stale) }
            metrics.hit(stored!.source)
            return LoadedItem(item: item, source: stored!.source)
        case .serveStaleAndRefresh:
            metrics.staleWhileRevalidate.increment()
            _ = flight(for: key, url: url, stale: stored!.item, options: options, background: true)
            return LoadedItem(item: stored!.item, source: .stale)
        case .offlineMiss:
            metrics.misses.increment()
            throw ItemCacheError(
                code: .notCached,
                message: "\(key.rawValue) is not cached and the load is offline; load it once online first", key: key)
        case .revalidate:
            break
        case .fetch:
            // A reload asks for the whole value: no validators go out (the stored value still
            // stands in if the fetch fails).
            if options.policy == .reload {
                stale = stale.map {
                    var item = $0
                    item.info.etag = nil
                    item.info.lastModified = nil
                    return item
                }
            }
        }
        metrics.misses.increment()
        let flight = flight(for: key, url: url, stale: stale, options: options, background: false)
        do {
            return try await flight.wait()
        } catch let error as ItemCacheError {
            throw error
        } catch let error where ItemCacheError.isCancellation(error) {
            throw ItemCacheError.cancelled(key)
        } catch {
            throw ItemCacheError(
                code: .fetch, message: "cannot load \(key.rawValue): \(error)", key: key, underlying: error)
        }
    }

    /// The running fetch of `key`, or a new one.
    private func flight(for key: CacheKey, url: URL?, stale: CachedItem?, options: LoadOptions, background: Bool)
        -> Flight<LoadedItem>
    {
        let (flight, isNew) = flights.claim(key.rawValue, keepAlive: background)
        if let progress = options.progress { flight.addProgressHandler(progress) }
        guard isNew else { return flight }
        notify(key, .inProgress(TransferProgress(received: 0, expected: nil)))
        flights.start(flight, for: key.rawValue) { [self] in
            try await fetch(key, url: url, stale: stale, options: options, flight: flight)
        } finished: { [self] stored in
            let found = stored ? true : (try? await store.item(for: key)) != nil
            notify(key, found ? .found : .notFound)
        }
        return flight
    }

    /// One fetch: a slot, the key's cross-process lock, then the fetcher; stores what came.
    private func fetch(_ key: CacheKey, url: URL?, stale: CachedItem?, options: LoadOptions, flight: Flight<LoadedItem>)
        async throws -> LoadedItem
    {
        try await limiter.acquire()
        defer { limiter.release() }
        let slot = Int64(1 + key.slotHash % (1 << 40))
        let lockFile = store.sharedLockFile
        // Another process fetching this key holds its slot: wait for it, at most
        // `coalescingTimeout`, then fetch alongside (a hung fetch delays others boundedly).
        var (locked, waited) = (false, false)
        let waitStarted = Date()
        if let lockFile {
            let deadline = ContinuousClock.now + configuration.loading.coalescingTimeout
            var delay: UInt64 = 2
            while true {
                if try lockFile.tryLock(slot: slot, exclusive: true) {
                    locked = true
                    break
                }
                waited = true
                if ContinuousClock.now >= deadline { break }
                try await Task.sleep(for: .milliseconds(delay))
                delay = min(delay * 2, 50)
            }
        }
        defer { if locked { lockFile?.unlock(slot: slot) } }
        var stale = stale
        if waited, let stored = try await store.item(for: key) {
            // The other process's fetch may have stored it.
            if !stored.item.info.isExpired(at: configuration.clock.now),
                options.policy != .reload || stored.item.info.created > flight.started
            {
                return LoadedItem(item: stored.item, source: .disk)
            }
            stale = stored.item
        }
        if waited, let failure = await store.fetchFailure(for: key, since: waitStarted) {
            // It failed while this load waited: share its failure rather than try again in turn.
            metrics.sharedFailures.increment()
            if configuration.loading.staleIfError, let stale {
                metrics.staleIfError.increment()
                return LoadedItem(item: stale, source: .stale, fetchError: failure)
            }
            throw failure
        }
        guard let fetcher = fetcher(for: key, url: url) else {
            throw ItemCacheError(
                code: .fetch,
                message: "no fetcher for \(key.rawValue); register one for its context or scheme (ItemLoader.register)",
                key: key)
        }
        var request = FetchRequest(
            key: key, url: url, headers: options.headers, etag: stale?.info.etag,
            lastModified: stale?.info.lastModified,
            scratchFolder: (store as? ItemStore)?.disk.blobs.root ?? configuration.folder
        ) { [self] progress in
            flight.report(progress)
            notify(key, .inProgress(progress))
        }
        if let disk = (store as? ItemStore)?.disk { request.keepLimit = disk.rowBudget(for: disk.limit) }
        let started = ContinuousClock.now
        let response: FetchResponse
        do {
            response = try await fetcher.fetch(request)
        } catch {
            if error is CancellationError || Task.isCancelled { throw error }
            let failure =
                (error as? ItemCacheError)
                ?? ItemCacheError(
                    code: .fetch, message: "cannot fetch \(url.map(Redaction.url) ?? key.rawValue): \(error)", key: key,
                    underlying: error)
            // Before the slot is let go: the processes waiting for this fetch read it then.
            if lockFile != nil { await store.recordFetchFailure(failure, for: key) }
            if configuration.loading.staleIfError, let stale {
                metrics.staleIfError.increment()
                return LoadedItem(item: stale, source: .stale, fetchError: failure)
            }
            throw failure
        }
        metrics.fetchDuration.recordNanoseconds(Int64((ContinuousClock.now - started).nanoseconds))
        let now = configuration.clock.now
        switch response.body {
        case .notModified:
            metrics.notModified.increment()
            guard let stale else {
                throw ItemCacheError(
                    code: .fetch,
                    message:
                        "\(url.map(Redaction.url) ?? key.rawValue) answered 304 to a request that had no validators",
                    key: key)
            }
            var (expiry, mustRevalidate) = expiry(options, headers: response.headers, now: now)
            if options.expiry == nil, configuration.loading.freshness == .server,
                response.headers["cache-control"] == nil, response.headers["expires"] == nil
            {
                // A 304 without freshness headers (RFC 9110 §15.4.5 asks servers to repeat
                // them; some do not): the stored response's rules stay (RFC 9111 §4.3.4 merges
                // the 304's headers into it), so a no-cache item keeps revalidating.
                mustRevalidate = stale.info.mustRevalidate
            }
            let expires = (expiry ?? configuration.defaultExpiry).expirationDate(storedAt: now)
            let refreshed = try await store.refresh(
                key, expires: expires, mustRevalidate: mustRevalidate,
                etag: response.headers["etag"], lastModified: response.headers["last-modified"])
            flight.markStored()
            return LoadedItem(item: refreshed ?? stale, source: .revalidated)
        case .fetched(let data):
            if stale != nil { metrics.modified.increment() }
            metrics.fetchedBytes.increment(by: Int64(data.count))
            let (expiry, mustRevalidate) = expiry(options, headers: response.headers, now: now)
            let storeOptions = StoreOptions(
                expiry: expiry ?? .dontStore, groups: options.groups, pinned: options.pinned,
                metadata: options.metadata, contentType: response.headers["content-type"],
                etag: response.headers["etag"], lastModified: response.headers["last-modified"],
                mustRevalidate: mustRevalidate)
            do {
                let item = try await store.store(data, for: key, options: storeOptions)
                if storeOptions.expiry != .dontStore {
                    metrics.storedBytes.increment(by: Int64(data.count))
                    flight.markStored()
                }
                return LoadedItem(item: item, source: .network)
            } catch {
                // Too big to keep: the caller still gets it (a pinned load asked to keep it).
                guard error.code == .tooLarge, !options.pinned else { throw error }
                configuration.logger.debug("not storing \(key.rawValue): \(error)")
                return LoadedItem(
                    item: CachedItem(key: key, data: data, info: ItemInfo(size: Int64(data.count))), source: .network,
                    storeError: error)
            }
        }
    }

    /// The expiry to store with (nil: do not store) and whether every use must revalidate.
    private func expiry(_ options: LoadOptions, headers: [String: String], now: Date) -> (Expiry?, Bool) {
        if let expiry = options.expiry { return (expiry == .dontStore ? nil : expiry, false) }
        guard configuration.loading.freshness == .server else { return (configuration.defaultExpiry, false) }
        switch HTTPFreshness.of(headers: headers, now: now) {
        case .noStore: return (nil, false)
        case .fresh(let expires, let mustRevalidate):
            return (expires.map(Expiry.date) ?? configuration.defaultExpiry, mustRevalidate)
        }
    }

    private func fetcher(for key: CacheKey, url: URL?) -> (any ItemFetching)? {
        fetchers.withLock { fetchers in
            if !key.context.isEmpty, let fetcher = fetchers[key.context] { return fetcher }
            if let scheme = url?.scheme?.lowercased() { return fetchers[scheme] }
            return nil
        }
    }

    // MARK: - Queries and statistics

    /// The store as an ``ItemStore`` (queries and statistics), or the error for one that is not.
    private func queryableStore() throws(ItemCacheError) -> ItemStore {
        guard let store = store as? ItemStore else {
            throw ItemCacheError(
                code: .storage,
                message: "this loader's store (\(type(of: store))) answers no queries; open the loader on an ItemStore")
        }
        return store
    }

    /// The items `query` matches in the loader's store, without their bytes.
    public func items(matching query: ItemQuery) async throws(ItemCacheError) -> [ItemSummary] {
        try await queryableStore().items(matching: query)
    }

    /// How many items `query` matches in the loader's store.
    public func count(matching query: ItemQuery) async throws(ItemCacheError) -> Int {
        try await queryableStore().count(matching: query)
    }

    /// Removes the items `query` matches from the loader's store; returns how many went.
    @discardableResult
    public func removeItems(matching query: ItemQuery) async throws(ItemCacheError) -> Int {
        try await queryableStore().removeItems(matching: query)
    }

    /// Removes every expired item from the loader's store; returns how many went.
    @discardableResult
    public func removeExpired() async throws(ItemCacheError) -> Int {
        try await queryableStore().removeExpired()
    }

    /// The loader's store's statistics.
    public func statistics() async throws(ItemCacheError) -> CacheStatistics {
        try await queryableStore().statistics()
    }

    // MARK: - States

    /// The item's state now: being fetched, stored, or neither.
    public func state(for key: CacheKey) async -> ItemState {
        if let flight = flights.running(key.rawValue) { return .inProgress(flight.progress) }
        return (try? await store.item(for: key)) != nil ? .found : .notFound
    }

    /// The item's states as they change, starting with the current one. The stream ends when
    /// the caller stops iterating.
    public func states(for key: CacheKey) async -> AsyncStream<ItemState> {
        let (stream, continuation) = AsyncStream<ItemState>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let id = observerIDs.add(1, ordering: .relaxed).newValue
        observers.withLock { $0[key.rawValue, default: [:]][id] = continuation }
        continuation.onTermination = { [weak self] _ in
            self?.observers.withLock { observers in
                observers[key.rawValue]?.removeValue(forKey: id)
                if observers[key.rawValue]?.isEmpty == true { observers.removeValue(forKey: key.rawValue) }
            }
        }
        continuation.yield(await state(for: key))
        return stream
    }

    private func notify(_ key: CacheKey, _ state: ItemState) {
        let listeners = observers.withLock { $0[key.rawValue].map { Array($0.values) } ?? [] }
        for listener in listeners { listener.yield(state) }
    }
}
