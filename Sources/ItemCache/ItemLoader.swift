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
    /// The HTTP status it was served with (200 for an item without a recorded response).
    public var status: Int { item.info.status }
    /// Whether the cache holds it: false for a fetched response that was not to be kept
    /// (`no-store`, a status that may not be cached, ``Expiry/dontStore``) or was too large.
    public var isStored = true
}

/// How a load may use the cache and the network.
public enum LoadPolicy: Sendable, Equatable {
    /// A fresh stored value if there is one; otherwise fetch (revalidating a stale one).
    case useCache
    /// Fetch whatever is stored (RxCache's `evict: true`), even from an origin in its failure
    /// backoff; a stored stale value still serves if the fetch fails and stale-if-error allows.
    case reload
    /// Never touch the network: a stored value, fresh or stale (marked ``ItemSource/stale``),
    /// or ``ItemCacheError/Code/notCached``, also for a stale value its origin forbade serving
    /// without validation (`must-revalidate`, `no-cache`: RFC 9111 §4.2.4).
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
    /// Request headers: sent to the origin, matched against a stored response's `Vary` to select
    /// its variant (RFC 9111 §4.1), and their `Cache-Control` (or `Pragma: no-cache`) honoured
    /// (`no-cache`, `no-store`, `max-age`, `max-stale`, `min-fresh`, `only-if-cached`). Headers
    /// that should key the item whatever the server says belong in the key
    /// (``CacheKey/init(url:parameters:varyingHeaders:context:)``).
    public var headers: [String: String]
    /// Called with this item's progress, bytes against the total.
    public var progress: ProgressHandler?
    /// Whose item this is, for an app that loads for several accounts: what a load with an
    /// account fetched is kept for that account alone, whatever credential it sent, so a
    /// refreshed token (or a new session cookie) of the same account still finds it. Default
    /// nil: a load that sends a credential keeps what it fetched for that credential alone
    /// (``CacheKey/sentWith(headers:url:account:)``). Any text that tells the accounts apart (a
    /// user id; empty is none); only its digest is stored. Give each account its own: loads that
    /// name the same account share their items whatever they send. A token in the URL itself
    /// (its user name, an `access_token` parameter) is part of the URL's key: send it as a
    /// header for the account's items to outlive it.
    public var account: String?

    /// Options with these fields; by default a cached load with the configured expiry.
    public init(
        expiry: Expiry? = nil, policy: LoadPolicy = .useCache, groups: [String] = [], pinned: Bool = false,
        metadata: [String: String] = [:], headers: [String: String] = [:], progress: ProgressHandler? = nil,
        account: String? = nil
    ) {
        self.expiry = expiry
        self.policy = policy
        self.groups = groups
        self.pinned = pinned
        self.metadata = metadata
        self.headers = headers
        self.progress = progress
        self.account = account
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
    /// The transport this loader opened for itself (started on its first HTTP request).
    let ownedTransport: LazyCurlTransport?
    /// This loader's failing origins (``LoadingConfiguration/originBackoff``).
    private let backoffs = Mutex<[String: OriginFailure]>([:])

    struct OriginFailure {
        var failures: Int
        var retryAt: Date
        var message: String
        var status: Int?
    }

    /// A loader on `store`, fetching `http` and `https` through `transport` and `file` URLs from
    /// disk.
    public convenience init(store: any ItemCaching, configuration: CacheConfiguration, transport: any Transport) {
        self.init(store: store, configuration: configuration, transport: transport, owned: nil)
    }

    private init(
        store: any ItemCaching, configuration: CacheConfiguration, transport: any Transport, owned: LazyCurlTransport?
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

    /// Opens an ``ItemStore`` in the configured folder and a `CurlTransport` of its own,
    /// started on the first HTTP request (a loader of `file` URLs or custom fetchers never loads
    /// libcurl) and ended by ``close()``.
    public convenience init(configuration: CacheConfiguration) throws(ItemCacheError) {
        let store = try ItemStore(configuration: configuration)
        let transport = LazyCurlTransport()
        self.init(store: store, configuration: configuration, transport: transport, owned: transport)
    }

    /// Fetches keys in `name` (a context, or a URL scheme such as `https`) with `fetcher`. A
    /// key's context is tried first, then its URL's scheme; custom keys use their context.
    public func register(_ fetcher: any ItemFetching, for name: String) {
        fetchers.withLock { $0[name] = fetcher }
    }

    /// Waits for the fetches under way to end, background refreshes (stale-while-revalidate)
    /// included: a short-lived process (`sync-agent cache get`) calls it before it exits, so
    /// that the refresh it started is stored.
    public func finishFetches() async {
        for flight in flights.all { await flight.settled() }
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
        try await load(
            url: url, parameters: parameters, varyingHeaders: varyingHeaders, context: context, options: options
        ).materialized()
    }

    /// The item of `key`, fetched from `url` (nil for a custom key, whose context's fetcher
    /// makes it) when the cache cannot answer.
    public func item(for key: CacheKey, url: URL?, options: LoadOptions = LoadOptions()) async throws(ItemCacheError)
        -> LoadedItem
    {
        try await load(key, url: url, options: options).materialized()
    }

    /// The value at `url`, loaded as ``item(for:parameters:varyingHeaders:context:options:)``
    /// loads it, but handed over without reading it into memory when it is larger than the
    /// memory tier's item limit (``MemoryLimits/itemBytes``): then its open, checked file
    /// (``LoadedValue/Content/file(_:)``; a fetched body is the very file the cache keeps).
    /// For values too big to hold whole: write them out, or hand the descriptor to a decoder.
    public func value(
        for url: URL, parameters: RequestParameters = [:], varyingHeaders: [String: String] = [:],
        context: String = "", options: LoadOptions = LoadOptions()
    ) async throws(ItemCacheError) -> LoadedValue {
        LoadedValue(
            try await load(
                url: url, parameters: parameters, varyingHeaders: varyingHeaders, context: context, options: options))
    }

    /// ``value(for:parameters:varyingHeaders:context:options:)`` for `key`, fetched from `url`.
    public func value(for key: CacheKey, url: URL?, options: LoadOptions = LoadOptions()) async throws(ItemCacheError)
        -> LoadedValue
    {
        LoadedValue(try await load(key, url: url, options: options))
    }

    /// A load by URL: its key and request, then ``load(_:url:options:)``.
    private func load(
        url: URL, parameters: RequestParameters, varyingHeaders: [String: String], context: String,
        options: LoadOptions
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
        return try await load(key, url: request, options: options)
    }

    /// A load of `key`: its value may be a file (``CachedItem/file``), which the public
    /// ``item(for:url:options:)`` reads and ``value(for:url:options:)`` hands over.
    private func load(_ key: CacheKey, url: URL?, options: LoadOptions) async throws(ItemCacheError) -> LoadedItem {
        // A load that sends a credential has entries of its own (CacheKey+Credentials.swift):
        // looked up, fetched, coalesced across processes and kept under that key.
        let key = key.sentWith(headers: options.headers, url: url, account: options.account)
        let now = configuration.clock.now
        let request = CacheDirectives.ofRequest(options.headers)
        // Memory answers at once; anything else is looked up on the I/O pool.
        let stored = try await lookUp(key, requestHeaders: options.headers)
        var stale = stored?.item
        switch LoadDecision.decide(
            stored: stored?.item.info, policy: options.policy, request: request, now: now,
            staleWhileRevalidate: configuration.loading.staleWhileRevalidate)
        {
        case .serveFresh:
            metrics.hit(stored!.source)
            return LoadedItem(item: stored!.item, source: stored!.source)
        case .serveStale:
            return LoadedItem(item: stored!.item, source: .stale)
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
            metrics.miss()
            let why =
                options.policy == .offline
                ? "the load is offline; load it once online first"
                : "the request's Cache-Control has only-if-cached (RFC 9111 §5.2.1.7); load it without it first"
            throw ItemCacheError(code: .notCached, message: "\(key.rawValue) is not cached and \(why)", key: key)
        case .revalidate:
            break
        case .fetch:
            // A reload asks for the whole value: no validators go out (the stored value still
            // stands in if the fetch fails).
            if options.policy == .reload { stale = stale.map(Self.withoutValidators) }
        }
        metrics.miss()
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

    /// The stored response for `key` that a request with `requestHeaders` may use: the key's
    /// own, or the variant its `Vary` headers select (RFC 9111 §4.1).
    func lookUp(_ key: CacheKey, requestHeaders: [String: String]) async throws(ItemCacheError) -> StoredItem? {
        if let stored = try await stored(key) { return stored }
        for variant in try await store.variantKeys(of: key) {
            guard let names = variant.variantNames, key.variant(names: names, request: requestHeaders) == variant
            else { continue }
            return try await stored(variant)
        }
        return nil
    }

    /// The stored item of `key`; from an ``ItemStore``, a value over the memory tier's item
    /// limit as its open file (``CachedItem/file``), not read.
    private func stored(_ key: CacheKey) async throws(ItemCacheError) -> StoredItem? {
        if let itemStore = store as? ItemStore {
            return try await itemStore.item(for: key, filesOver: Int64(configuration.memory.itemBytes))
        }
        return try await store.item(for: key)
    }

    static func withoutValidators(_ item: CachedItem) -> CachedItem {
        var item = item
        item.info.etag = nil
        item.info.lastModified = nil
        return item
    }

    /// The running fetch of `key` with these options' headers, or a new one.
    private func flight(for key: CacheKey, url: URL?, stale: CachedItem?, options: LoadOptions, background: Bool)
        -> Flight<LoadedItem>
    {
        // Requests with other headers may select other variants: they share no fetch. Nor do
        // loads with other credentials (the URL's user part among them: the key's credential
        // digest). Named by the key without its credential part, which ``state(for:)`` finds.
        let credential = key.credentialDigest
        let name =
            options.headers.isEmpty && credential == nil
            ? key.withoutCredentials.rawValue
            : key.withoutCredentials.rawValue + "\u{1F}"
                + ([credential].compactMap { $0 }
                + CacheKey.normalizedHeaders(options.headers).sorted { $0.key < $1.key }
                .map { "\($0.key)=\($0.value)" }).joined(separator: "\u{1F}")
        let (flight, isNew) = flights.claim(name, keepAlive: background, waits: !background)
        if let progress = options.progress { flight.addProgressHandler(progress) }
        guard isNew else { return flight }
        notify(key, .inProgress(TransferProgress(received: 0, expected: nil)))
        flights.start(flight, for: name) { [self] in
            try await fetch(key, url: url, stale: stale, options: options, flight: flight)
        } finished: { [self] stored in
            let found = stored ? true : (try? await store.item(for: key)) != nil
            notify(key, found ? .found : .notFound)
        }
        return flight
    }

    /// One fetch: a slot, the key's cross-process lock, the origin's backoff, then the fetcher;
    /// stores what came.
    private func fetch(_ key: CacheKey, url: URL?, stale: CachedItem?, options: LoadOptions, flight: Flight<LoadedItem>)
        async throws -> LoadedItem
    {
        try await limiter.acquire()
        defer { limiter.release() }
        let slot = Int64(1 + key.slotHash % (1 << 40))
        let request = CacheDirectives.ofRequest(options.headers)
        // A load that keeps nothing (the caller's no-store) has nothing to share: it neither
        // holds others back nor waits for them.
        let keeps = !keepsNothing(options, request)
        let lockFile = keeps ? store.sharedLockFile : nil
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
                // The key's answers may not be kept: the fetch under way will leave nothing to
                // share, so fetch alongside it rather than after it (N processes: about one
                // fetch's time, not N).
                if let mark = await store.unstorableMark(for: key),
                    mark >= waitStarted.addingTimeInterval(-Self.unstorableWindow),
                    mark <= Date().addingTimeInterval(DiskTier.clockAllowance)
                {
                    metrics.unstorableAlongside.increment()
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
        // Another process's fetch may have stored it: while this one waited for the slot, or
        // between this load's lookup and its taking the slot (that fetch had ended by then).
        if locked || waited, let stored = try await lookUp(key, requestHeaders: options.headers) {
            // Not what this load found when it looked: another process's fetch stored it since.
            let storedMeanwhile = stale.map { $0.info.created != stored.item.info.created } ?? true
            if !stored.item.info.isExpired(at: configuration.clock.now),
                storedMeanwhile || (waited && options.policy != .reload)
            {
                return LoadedItem(item: stored.item, source: .disk)
            }
            if waited || storedMeanwhile { stale = stored.item }
        }
        if waited, let failure = await store.fetchFailure(for: key, since: waitStarted) {
            // It failed while this load waited: share its failure rather than try again in turn.
            // The origin's definite answer (a 404 it would not let be kept) is the answer here
            // too: no stale value stands in for it.
            metrics.sharedFailures.increment()
            if let status = failure.httpStatus, status < 500, status != 429 { throw failure }
            return try standIn(for: failure, stale: stale, request: request)
        }
        guard let fetcher = fetcher(for: key, url: url) else {
            throw ItemCacheError(
                code: .fetch,
                message: "no fetcher for \(key.rawValue); register one for its context or scheme (ItemLoader.register)",
                key: key)
        }
        // A failing origin (no answer: the whole host) or resource (a failing status: that
        // URL) is not asked again before its next attempt is due (a reload asks).
        let origin = url.flatMap(\.httpOrigin)
        let resourceShown = url.map(Redaction.url)
        // A credential's (or account's) failing answer is its own: one user's 503 (a rate limit)
        // does not shut out the others, as the URL's password already did not.
        let resource = url.map {
            Self.backoffScope(of: $0, shown: resourceShown ?? "")
                + (key.credentialDigest.map { CacheKey.credentialMarker + $0 } ?? "")
        }
        var probing = false
        if options.policy != .reload {
            for scope in [origin, resource].compactMap({ $0 }) {
                switch await gate(scope) {
                case .closed(let retryAt, let message, let status):
                    let wait = max(0, retryAt.timeIntervalSince(configuration.clock.now))
                    // The failure may have been another URL's of this origin: say whose.
                    let asked = resourceShown.map { scope == resource ? "" : "\($0) was not asked: its origin " } ?? ""
                    let shown = scope == resource ? resourceShown ?? scope : scope
                    var failure = ItemCacheError(
                        code: .fetch,
                        message:
                            "\(asked)\(shown) is failing (\(message)); it is asked again in \(Int(wait.rounded(.up))) s (LoadingConfiguration.originBackoff)",
                        key: key)
                    failure.httpStatus = status
                    return try standIn(for: failure, stale: stale, request: request)
                case .open(let claimed):
                    probing = probing || claimed
                }
            }
        }
        return try await exchange(
            key, url: url, stale: stale, options: options, flight: flight,
            using: Exchange(
                fetcher: fetcher, origin: origin, resource: resource, probing: probing, records: lockFile != nil,
                contended: waited, keeps: keeps))
    }

    /// What ``exchange(_:url:stale:options:flight:using:conditional:)`` works with.
    struct Exchange {
        var fetcher: any ItemFetching
        /// The backoff scope of a failure without an answer: the host.
        var origin: String?
        /// The backoff scope of a failing status: the URL.
        var resource: String?
        var probing: Bool
        /// Failures are recorded for waiting processes.
        var records: Bool
        /// This load waited for another process's fetch of the key: an answer that may not be
        /// kept is then recorded, so that the others waiting stop waiting (an uncontended
        /// fetch records nothing, and costs no write).
        var contended = false
        /// The load may keep the answer (no caller's `no-store`): ``FetchRequest/mayKeep``.
        var keeps = true
    }

    /// Asks the origin (conditionally when `conditional` and the stale value has validators)
    /// and carries out what it answered.
    private func exchange(
        _ key: CacheKey, url: URL?, stale: CachedItem?, options: LoadOptions, flight: Flight<LoadedItem>,
        using exchange: Exchange, conditional: Bool = true
    ) async throws -> LoadedItem {
        let request = CacheDirectives.ofRequest(options.headers)
        let validators = conditional ? stale : nil
        var fetchRequest = FetchRequest(
            key: key, url: url, headers: options.headers, etag: Self.usableValidator(validators?.info.etag),
            lastModified: Self.usableValidator(validators?.info.lastModified),
            scratchFolder: (store as? ItemStore)?.disk.blobs.root ?? configuration.folder
        ) { [self] progress in
            flight.report(progress)
            notify(key, .inProgress(progress))
        }
        fetchRequest.mayKeep = exchange.keeps
        if let disk = (store as? ItemStore)?.disk {
            fetchRequest.keepLimit = DiskTier.largestFileValue(budget: disk.rowBudget(for: disk.limit), key: key)
            // A large body stays the file it was downloaded into: the store names it.
            fetchRequest.fileThreshold = Int64(configuration.memory.itemBytes)
        }
        // With a stale value to stand in, a failure is answered at once: no retries.
        fetchRequest.retry =
            stale.map { mayServeStale($0, request: request) } == true ? RetryPolicy.none : configuration.loading.retry
        fetchRequest.timeout = configuration.loading.timeout
        let requestTime = configuration.clock.now
        let started = ContinuousClock.now
        let response: FetchResponse
        do {
            response = try await exchange.fetcher.fetch(fetchRequest)
        } catch {
            if error is CancellationError || Task.isCancelled { throw error }
            let failure =
                (error as? ItemCacheError)
                ?? ItemCacheError(
                    code: .fetch, message: "cannot fetch \(url.map(Redaction.url) ?? key.rawValue): \(error)", key: key,
                    underlying: error)
            let transportError = error as? TransportError ?? failure.underlying as? TransportError
            // The origin's own answer (a 404 a custom transport threw), or a request that
            // could not be sent, is no failure to stand in for.
            let standsIn = transportError.map(Self.mayStandIn(for:)) ?? true
            // Only the origin's failures start a backoff, never the cache's own disk (a full
            // folder, a body over the limit): no answer backs off the host; an answer that
            // failed (a failing status, one that does not fit the request, a body cut short
            // after its head) backs off that URL only: one broken resource does not silence
            // its origin.
            if let transportError, Self.isOriginFailure(transportError) {
                let answered =
                    transportError.code == .httpStatus || transportError.code == .invalidResponse
                    || transportError.statusCode != nil || transportError.answered
                let scope = answered ? exchange.resource : exchange.origin
                if let scope {
                    await noteFailure(
                        of: scope, message: failure.message, status: transportError.statusCode,
                        retryAfter: transportError.retryAfter)
                }
            }
            // Before the slot is let go: the processes waiting for this fetch read it then.
            if exchange.records { await store.recordFetchFailure(failure, for: key) }
            guard standsIn else { throw failure }
            return try standIn(for: failure, stale: stale, request: request)
        }
        metrics.fetchDuration.recordNanoseconds(Int64((ContinuousClock.now - started).nanoseconds))
        let responseTime = configuration.clock.now
        if Self.failingStatuses.contains(response.status) {
            let shown = url.map(Redaction.url) ?? key.rawValue
            var failure = ItemCacheError(
                code: .fetch, message: "\(shown) answered HTTP \(response.status)", key: key)
            failure.httpStatus = response.status
            if let resource = exchange.resource {
                let retryAfter = response.headers["retry-after"].flatMap { RetryPolicy.parseRetryAfter($0) }
                await noteFailure(
                    of: resource, message: failure.message, status: response.status, retryAfter: retryAfter)
            }
            if exchange.records { await store.recordFetchFailure(failure, for: key) }
            // RFC 5861 §4: a 500, 502, 503 or 504 may be answered with the stale value.
            if response.status != 429, let stale, mayServeStale(stale, request: request) {
                metrics.staleIfError.increment()
                return LoadedItem(item: stale, source: .stale, fetchError: failure)
            }
        } else {
            for scope in [exchange.origin, exchange.resource].compactMap({ $0 }) {
                await clearFailures(of: scope, probing: exchange.probing)
            }
        }
        let times = (request: requestTime, response: responseTime)
        let value: LoadedValue.Content
        switch response.body {
        case .notModified:
            metrics.notModified.increment()
            return try await revalidated(
                key, url: url, stale: stale, response: response, options: options, flight: flight, times: times,
                using: exchange)
        case .fetched(let data): value = .bytes(data)
        case .file(let file): value = .file(file)
        }
        if stale != nil { metrics.modified.increment() }
        metrics.fetchedBytes.increment(by: value.size)
        return try await keep(
            value, key, url: url, response: response, options: options, flight: flight, times: times,
            contended: exchange.records && exchange.contended)
    }

    /// A `304`: the stored response it selects is updated with its headers and served
    /// (RFC 9111 §4.3.4). One that selects none (another entity tag) updates nothing: the
    /// whole response is fetched instead.
    private func revalidated(
        _ key: CacheKey, url: URL?, stale: CachedItem?, response: FetchResponse, options: LoadOptions,
        flight: Flight<LoadedItem>, times: (request: Date, response: Date), using exchange: Exchange
    ) async throws -> LoadedItem {
        let shown = url.map(Redaction.url) ?? key.rawValue
        guard let stale else {
            let own = options.headers.keys.contains {
                ["if-none-match", "if-modified-since"].contains($0.lowercased())
            }
            throw ItemCacheError(
                code: .fetch,
                message: own
                    ? "\(shown) answered 304 Not Modified to the request's own If-None-Match or If-Modified-Since, and nothing is stored to serve; send the request without them to get the item"
                    : "\(shown) answered 304 to a request that had no validators",
                key: key)
        }
        // A validator that names another representation than the stored one selects nothing
        // (RFC 9111 §4.3.4): an entity tag, or, without one, a Last-Modified date.
        // Nor does a 304 reached elsewhere than the stored body came from (a redirect that now
        // leads to another URL, whose validators may match by chance: an nginx tag is its
        // file's time and size).
        let elsewhere =
            HTTPResponseRecord.target(of: url, through: response.redirects) != stale.info.response?.target
        let otherTag = response.headers["etag"].map { $0 != stale.info.etag } ?? false
        let otherDate =
            response.headers["etag"] == nil
            && response.headers["last-modified"].map { modified in
                stale.info.lastModified.map { HTTPDate.parse($0) != HTTPDate.parse(modified) } ?? false
            } ?? false
        if otherTag || otherDate || elsewhere {
            configuration.logger.debug("\(shown) answered 304 for another representation; fetching it whole")
            return try await self.exchange(
                key, url: url, stale: stale, options: options, flight: flight, using: exchange, conditional: false)
        }
        let request = CacheDirectives.ofRequest(options.headers)
        let born = HTTPFreshnessModel.born(
            headers: response.headers, requestTime: times.request, responseTime: times.response)
        let previous =
            stale.info.response
            ?? HTTPResponseRecord(status: 200, headerFields: Self.validatorFields(stale.info), born: stale.info.created)
        let record = previous.updated(with: response.fieldsToKeep, born: born)
        guard
            let rules = storing(
                status: record.status, headers: record.headers, options: options, request: request, times: times,
                redirects: response.redirects)
        else {
            // The merged response may no longer be stored (a 304 that says no-store).
            // That entry alone: not the entries other credentials' loads kept of the URL.
            if let itemStore = store as? ItemStore {
                _ = try? await itemStore.removeItem(for: stale.key, includingVariants: true)
            } else {
                _ = try? await store.removeItem(for: stale.key)
            }
            var item = stale
            item.info.response = record
            item.info.contentType = record.headers["content-type"] ?? item.info.contentType
            var loaded = LoadedItem(item: item, source: .revalidated)
            loaded.isStored = false
            return loaded
        }
        let etag = Self.usableValidator(record.headers["etag"])
        let lastModified = Self.usableValidator(record.headers["last-modified"])
        if stale.file != nil, let itemStore = store as? ItemStore {
            // A value kept as a file: its record changes, its bytes are not read.
            let info = try await itemStore.refreshInfo(
                stale.key, expires: rules.expires, mustRevalidate: rules.revalidatesEveryUse, etag: etag,
                lastModified: lastModified, response: record)
            flight.markStored()
            var item = stale
            if let info { item.info = info }
            return LoadedItem(item: item, source: .revalidated)
        }
        let refreshed = try await store.refresh(
            stale.key, expires: rules.expires, mustRevalidate: rules.revalidatesEveryUse, etag: etag,
            lastModified: lastModified, response: record)
        flight.markStored()
        return LoadedItem(item: refreshed ?? stale, source: .revalidated)
    }

    /// Keeps a fetched response as the model allows: under the key, or under the variant its
    /// `Vary` selects; returns it whether kept or not.
    private func keep(
        _ value: LoadedValue.Content, _ key: CacheKey, url: URL?, response: FetchResponse, options: LoadOptions,
        flight: Flight<LoadedItem>, times: (request: Date, response: Date), contended: Bool = false
    ) async throws -> LoadedItem {
        let request = CacheDirectives.ofRequest(options.headers)
        let rules = storing(
            status: response.status, headers: response.headers, options: options, request: request, times: times,
            redirects: response.redirects)
        let born =
            rules?.born
            ?? HTTPFreshnessModel.born(
                headers: response.headers, requestTime: times.request, responseTime: times.response)
        // A response without Date gets the time it came (RFC 9110 §6.6.1: a cache with a clock
        // appends one), so its stored head says when it was made.
        let dated =
            response.headers["date"] == nil
            ? response.fieldsToKeep + [HTTPHeaderField(name: "date", value: HTTPDate.format(times.response))]
            : response.fieldsToKeep
        let record = HTTPResponseRecord(
            status: response.status, headerFields: dated, born: born,
            target: HTTPResponseRecord.target(of: url, through: response.redirects))
        let names = HTTPFreshnessModel.varyNames(response.headers["vary"]) ?? []
        let storageKey = names.isEmpty ? key : key.variant(names: names, request: options.headers)
        let storeOptions = StoreOptions(
            expiry: rules.map { $0.expires.map(Expiry.date) ?? .never } ?? .dontStore, groups: options.groups,
            pinned: options.pinned, metadata: options.metadata.merging(response.metadata) { $1 },
            contentType: response.headers["content-type"],
            etag: Self.usableValidator(response.headers["etag"]),
            lastModified: Self.usableValidator(response.headers["last-modified"]),
            mustRevalidate: rules?.revalidatesEveryUse ?? false, response: record)
        if rules == nil, response.status >= 400, !Self.failingStatuses.contains(response.status),
            store.sharedLockFile != nil
        {
            // An error answer that may not be kept (a 404 with no-store): the processes that
            // waited for this fetch share its status rather than each ask in turn.
            var failure = ItemCacheError(
                code: .fetch,
                message: "\(key.url ?? key.rawValue) answered HTTP \(response.status)",
                key: key)
            failure.httpStatus = response.status
            await store.recordFetchFailure(failure, for: key)
        } else if rules == nil, contended, response.status < 400, !request.has("no-store"),
            options.expiry != .dontStore
        {
            // The origin's answer may not be kept (no-store, Vary: *), and other processes
            // wait for this key: they, and those that find its fetch under way from now on,
            // fetch alongside it.
            await store.recordUnstorable(key)
        }
        if rules != nil {
            // One form per URL: a response without Vary replaces the variants, and a variant
            // replaces the response without Vary (other variants stay).
            if names.isEmpty {
                for variant in try await store.variantKeys(of: key) { _ = try await store.removeItem(for: variant) }
            } else {
                if let itemStore = store as? ItemStore {
                    _ = try await itemStore.removeItem(for: key, includingVariants: false)
                }
                // A lookup reads at most `variantLimit` variants: at the limit, start over.
                let variants = try await store.variantKeys(of: key)
                if variants.count >= DiskTier.variantLimit {
                    for variant in variants { _ = try await store.removeItem(for: variant) }
                }
            }
        }
        do {
            let item: CachedItem
            switch value {
            case .bytes(let data):
                item = try await store.store(data, for: storageKey, options: storeOptions)
            case .file(let file):
                if let itemStore = store as? ItemStore {
                    item = try await itemStore.store(file: file, for: storageKey, options: storeOptions)
                } else {
                    let data = try await BlockingIOPool.shared.run { () throws(ItemCacheError) in try file.data() }
                    item = try await store.store(data, for: storageKey, options: storeOptions)
                }
            }
            if rules != nil {
                metrics.storedBytes.increment(by: value.size)
                flight.markStored()
            }
            var loaded = LoadedItem(item: item, source: .network)
            loaded.isStored = rules != nil
            return loaded
        } catch {
            // Too big to keep: the caller still gets it (a pinned load asked to keep it).
            guard error.code == .tooLarge, !options.pinned else { throw error }
            configuration.logger.debug("not storing \(key.rawValue): \(error)")
            var loaded = LoadedItem(
                item: CachedItem(key: key, content: value, info: ItemInfo(size: value.size, response: record)),
                source: .network, storeError: error)
            loaded.isStored = false
            return loaded
        }
    }

    /// How to store a `status` response with `headers`: its expiry (nil: never), age base and
    /// whether every use revalidates; nil to keep nothing. The caller's expiry wins over the
    /// server's word (its lifetime, `no-cache`, even `no-store`: the caller asked to keep it,
    /// as before issue 21), not over what makes a stored response unusable (`Vary: *`), the
    /// request's own `no-store`, or a status that is no cacheable answer (a 206, a 503).
    /// How a response is stored, or nil when it may not be. One that came through redirects is
    /// the answer to the URL asked for only while each redirect is (RFC 9111 §4): a redirect
    /// with `no-store` keeps it from being stored, its expiry is the earliest of theirs, and a
    /// redirect that may not be reused (a 302 or 307 without freshness, `no-cache`) makes every
    /// use ask the origin again (a conditional request, which follows the redirects anew).
    private func storing(
        status: Int, headers: [String: String], options: LoadOptions, request: CacheDirectives,
        times: (request: Date, response: Date), redirects: [HTTPRedirect]
    ) -> (expires: Date?, born: Date, revalidatesEveryUse: Bool)? {
        guard
            var rules = storing(status: status, headers: headers, options: options, request: request, times: times)
        else { return nil }
        // The caller's expiry overrides the server's, the redirects' included.
        guard options.expiry == nil, configuration.loading.freshness != .caller else { return rules }
        for redirect in redirects {
            let fields = redirect.headers
            if CacheDirectives(fields["cache-control"]).has("no-store") {
                configuration.logger.debug("not storing: a \(redirect.status) redirect on the way said no-store")
                return nil
            }
            switch storing(status: redirect.status, headers: fields, options: options, request: request, times: times)
            {
            case .some(let hop):
                if let expires = hop.expires { rules.expires = min(rules.expires ?? expires, expires) }
                rules.revalidatesEveryUse = rules.revalidatesEveryUse || hop.revalidatesEveryUse
            case .none:
                rules.revalidatesEveryUse = true
            }
        }
        return rules
    }

    private func storing(
        status: Int, headers: [String: String], options: LoadOptions, request: CacheDirectives,
        times: (request: Date, response: Date)
    ) -> (expires: Date?, born: Date, revalidatesEveryUse: Bool)? {
        let model = HTTPFreshnessModel(
            heuristic: configuration.loading.heuristic, defaultExpiry: configuration.defaultExpiry)
        let born = HTTPFreshnessModel.born(headers: headers, requestTime: times.request, responseTime: times.response)
        let verdict = model.storing(
            status: status, headers: headers, request: request, requestTime: times.request,
            responseTime: times.response)
        if options.expiry != nil || configuration.loading.freshness == .caller {
            let expiry = options.expiry ?? configuration.defaultExpiry
            guard expiry != .dontStore, status != 206, !request.has("no-store"),
                HTTPFreshnessModel.varyNames(headers["vary"]) != nil,
                (200..<300).contains(status) || HTTPFreshnessModel.cacheableByDefault.contains(status)
            else { return nil }
            return (expiry.expirationDate(storedAt: times.response), born, false)
        }
        switch verdict {
        case .store(let expires, let born, let revalidatesEveryUse, _):
            return (expires, born, revalidatesEveryUse)
        case .doNotStore(let reason):
            configuration.logger.debug("not storing a \(status) response: \(reason)")
            return nil
        }
    }

    // MARK: - Failures

    /// The answer to a failed fetch: the stale value where it may stand in, else the failure.
    private func standIn(for failure: ItemCacheError, stale: CachedItem?, request: CacheDirectives)
        throws(ItemCacheError) -> LoadedItem
    {
        if let stale, mayServeStale(stale, request: request) {
            metrics.staleIfError.increment()
            return LoadedItem(item: stale, source: .stale, fetchError: failure)
        }
        throw failure
    }

    /// Whether `stale` may stand in for a failed fetch now (``LoadingConfiguration/staleIfError``).
    private func mayServeStale(_ stale: CachedItem, request: CacheDirectives) -> Bool {
        HTTPFreshnessModel.verdict(
            for: stale.info.freshnessState, request: request, now: configuration.clock.now,
            staleWhileRevalidate: 0, staleOnError: configuration.loading.staleIfError
        ).mayServeStaleOnError
    }

    /// Statuses that mean the origin is failing: RFC 5861's four, and 429 (backoff only).
    static let failingStatuses: Set<Int> = [500, 502, 503, 504, 429]

    /// Whether a load keeps nothing of any answer: the request's own `no-store`, or the caller's
    /// expiry (or, where the caller decides freshness, the default one) ``Expiry/dontStore``.
    private func keepsNothing(_ options: LoadOptions, _ request: CacheDirectives) -> Bool {
        if request.has("no-store") || options.expiry == .dontStore { return true }
        return options.expiry == nil && configuration.loading.freshness == .caller
            && configuration.defaultExpiry == .dontStore
    }

    /// How long after an answer that may not be kept the key's fetches go alongside each other
    /// rather than in turn: 30 s. A key whose answers became storable since is fetched alongside
    /// by its waiters for at most this long (each stores what it got), then coalesced again.
    static let unstorableWindow: TimeInterval = 30

    /// Whether a stale value may stand in for this transport failure: no answer (a refused or
    /// dropped connection, a timeout, an answer that did not fit), or a failing status; never
    /// the origin's definite answer (a 404 thrown by a custom transport) nor a request that
    /// could not be sent.
    static func mayStandIn(for error: TransportError) -> Bool {
        switch error.code {
        case .network, .timeout, .invalidResponse, .fileSystem, .tooLarge: return true
        case .httpStatus: return [500, 502, 503, 504].contains(error.statusCode ?? 0)
        default: return false
        }
    }

    /// Whether a transport failure is the origin's: no answer, an answer that did not fit, or
    /// a failing status.
    static func isOriginFailure(_ error: TransportError) -> Bool {
        switch error.code {
        case .network, .timeout, .invalidResponse: return true
        case .httpStatus: return failingStatuses.contains(error.statusCode ?? 0)
        default: return false
        }
    }

    /// A validator that can go out in a header again; nil for one holding a control character
    /// (a bare CR or LF would make the conditional request unsendable, wedging the item).
    static func usableValidator(_ value: String?) -> String? {
        guard let value, !value.isEmpty,
            !value.unicodeScalars.contains(where: { ($0.value < 0x20 && $0 != "\t") || $0.value == 0x7F })
        else { return nil }
        return value
    }

    /// The validators of an item stored before responses were kept, as header lines.
    static func validatorFields(_ info: ItemInfo) -> [HTTPHeaderField] {
        var fields: [HTTPHeaderField] = []
        if let etag = info.etag { fields.append(HTTPHeaderField(name: "etag", value: etag)) }
        if let lastModified = info.lastModified {
            fields.append(HTTPHeaderField(name: "last-modified", value: lastModified))
        }
        if let contentType = info.contentType {
            fields.append(HTTPHeaderField(name: "content-type", value: contentType))
        }
        return fields
    }

    // MARK: - Origin backoff

    /// The scope a failing status of `url` backs off: the URL as `shown` (``Redaction/url(_:)``),
    /// and where that hides a secret, a digest of the whole URL beside it. Two URLs that
    /// differ only in a secret (an expired pre-signed URL and a fresh one, two users' tokens)
    /// back off apart, and the index never holds the secret. Keyed on the shown URL alone, one
    /// expired token's 503 answered every other token's request with it, unasked.
    static func backoffScope(of url: URL, shown: String) -> String {
        shown == url.absoluteString ? shown : shown + " " + CacheKey.digest(url.absoluteString)
    }

    /// Whether a load may ask `origin` now: this loader's record first (no disk), then the one
    /// every process sharing the folder keeps.
    private func gate(_ origin: String) async -> OriginGate {
        let backoff = configuration.loading.originBackoff
        guard backoff.initial > .zero else { return .open(probing: false) }
        let now = configuration.clock.now
        let local = backoffs.withLock { table -> OriginGate? in
            guard var entry = table[origin] else { return nil }
            if entry.retryAt > now {
                return .closed(retryAt: entry.retryAt, message: entry.message, status: entry.status)
            }
            // Due: this load probes; the others wait another period for its outcome.
            entry.retryAt = now.addingTimeInterval(backoff.delay(afterFailures: entry.failures).seconds)
            table[origin] = entry
            return .open(probing: true)
        }
        if case .closed = local { return local! }
        let shared = await store.originGate(origin, now: now, backoff: backoff)
        if case .closed = shared { return shared }
        return local ?? shared
    }

    private func noteFailure(of origin: String, message: String, status: Int?, retryAfter: Double?) async {
        let backoff = configuration.loading.originBackoff
        guard backoff.initial > .zero else { return }
        let now = configuration.clock.now
        let shared = await store.recordOriginFailure(
            origin, message: message, status: status, now: now, backoff: backoff, retryAfter: retryAfter)
        backoffs.withLock { table in
            let failures = (table[origin]?.failures ?? 0) + 1
            var delay = backoff.delay(afterFailures: failures).seconds
            if let retryAfter { delay = max(delay, min(retryAfter, OriginBackoff.longestRetryAfter)) }
            table[origin] = OriginFailure(
                failures: failures, retryAt: shared ?? now.addingTimeInterval(delay), message: message, status: status)
        }
    }

    private func clearFailures(of origin: String, probing: Bool) async {
        let known = backoffs.withLock { $0.removeValue(forKey: origin) } != nil
        if known || probing { await store.clearOriginFailure(origin) }
    }

    /// The fetcher registered for `name` (a context or a URL scheme), to wrap with a check of
    /// one's own (ImageCache wraps `http`, `https` and `file`).
    public func registeredFetcher(for name: String) -> (any ItemFetching)? {
        fetchers.withLock { $0[name] }
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
        // A fetch with request headers is named by them too (``flight(for:url:stale:options:background:)``),
        // and by the key without its credential part.
        if let flight = flights.running(key.withoutCredentials.rawValue, orVariantAfter: "\u{1F}") {
            return .inProgress(flight.progress)
        }
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

    /// Tells the observers of `key`, and of its key without a credential part.
    private func notify(_ key: CacheKey, _ state: ItemState) {
        let named = [key.rawValue, key.withoutCredentials.rawValue]
        let listeners = observers.withLock { observers in
            Set(named).flatMap { observers[$0].map { Array($0.values) } ?? [] }
        }
        for listener in listeners { listener.yield(state) }
    }
}
