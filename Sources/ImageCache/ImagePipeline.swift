import FileKit
import Foundation
@_exported import ImageCatalog
import ItemCache
import Metrics
import Synchronization

/// A variant as the pipeline returned it: its bytes and facts, and its original's.
public struct ImageResponse: Sendable {
    /// The variant's encoded bytes.
    public var data: Data
    /// The variant's facts (upright: orientation 1).
    public var metadata: ImageMetadata
    /// The original's facts, the caller's own metadata among them.
    public var original: ImageMetadata
    /// The variant's key in the item cache.
    public var key: CacheKey
    /// Where the variant came from: `ItemSource/memory` or `ItemSource/disk` for a stored
    /// one, `ItemSource/network` for one made by this load.
    public var source: ItemSource
    /// Where the original came from (nil when the stored variant answered without it).
    public var originalSource: ItemSource?
    /// Why the original, fetched by this load, was not kept (`ItemCacheError.Code.tooLarge`:
    /// more than the disk limit, or than pinned items leave); nil otherwise. The variant of an
    /// original that is not kept is not kept either: no later load could find it.
    public var originalStoreError: ItemCacheError?

    /// Whether this load made the variant.
    public var wasMade: Bool { source == .network }
}

/// Image variants on the item cache: an original is fetched once (with the item cache's HTTP
/// freshness, revalidation, limits and cross-process coalescing) and checked as an image
/// before it is stored; each variant (size, mode, format, quality…) is made once, in this
/// process and across every process sharing the folder, and stored as an item keyed by the
/// original's key and SHA-256 and the processing's version.
///
/// A new version of an original (other bytes) gets new variant keys and its old variants are
/// dropped; a `304` keeps them. Removing an original removes its variants.
public final class ImagePipeline: Sendable {
    /// The pipeline's settings.
    public struct Configuration: Sendable {
        /// The limits an untrusted original is held to before it is decoded or stored.
        public var limits = ImageLimits()
        /// The formats libvips may decode (process-wide: every pipeline of a process gives the
        /// same).
        public var runtime = VipsRuntime.Options()
        /// What makes variants; its ``ImageProcessing/identifier`` is part of their keys.
        public var processing: any ImageProcessing = VipsImageProcessing()
        /// Where variants are made: a bounded pool off Swift's cooperative threads, one thread
        /// per core (libvips runs one thread per image).
        public var processingPool: BlockingIOPool = ImagePipeline.sharedProcessingPool
        /// How long a variant is kept. Default `Expiry/never`: its key names its original's
        /// bytes, so it cannot go stale; it goes with its original, or by the disk limit.
        public var variantExpiry: Expiry = .never
        /// The most bytes of decoded variants (``ImagePipeline/pixels(for:)``) kept in memory.
        /// Default 64 MiB; 0 keeps none.
        public var decodedMemoryLimit = 64 << 20
        /// The prefix of the pipeline's swift-metrics instruments (`<prefix>_variants_made`,
        /// `<prefix>_variant_hits` by `tier`, `<prefix>_refusals`,
        /// `<prefix>_processing_duration`). The library picks no backend: an app bootstraps one
        /// with `MetricsSystem.bootstrap`, or names one in ``metricsFactory``.
        public var metricsPrefix = "image_cache"
        /// The backend the instruments record into; nil (the default) for the process's
        /// (`MetricsSystem.factory`).
        public var metricsFactory: (any MetricsFactory)?

        /// The defaults.
        public init() {}
    }

    /// The pool variants are made on unless a configuration names another: a thread per core.
    public static let sharedProcessingPool = BlockingIOPool(
        threadCount: max(1, ProcessInfo.processInfo.activeProcessorCount), spin: .zero)

    /// The context of originals' keys (`ImageCatalog/originalContext`).
    public static let originalContext = ImageCatalog.originalContext
    /// The context of variants' keys (`ImageCatalog/variantContext`).
    public static let variantContext = ImageCatalog.variantContext

    /// The loader originals and variants go through.
    public let loader: ItemLoader
    /// The settings.
    public let configuration: Configuration
    /// Where the loader keeps originals and variants (its store).
    public let storage: any ImageStorage
    /// ``storage`` when it is an `ItemStore` (a cache folder); nil for a storage of the app's own.
    public var store: ItemStore? { storage as? ItemStore }
    private let ownsLoader: Bool
    /// Variant jobs are per process: the loader's variant fetcher of any pipeline finds them.
    static let jobs = VariantJobs()
    let counters: ImageCounters
    /// Decoded variants (``pixels(for:)``).
    let decoded: DecodedTier
    /// The counts already added to the folder's totals.
    private let counted = Mutex(Counts(made: 0, hits: 0, refusals: 0))
    /// Originals' records this process read or wrote lately, so that a warm hit skips the
    /// index: trusted for ``recordTrust`` at most (another process's new version is seen that
    /// much later at the latest) and never past the original's own expiry.
    /// The facts of `file` sources this process read, by the file's identity.
    private let fileDigests = Mutex<[FileIdentityKey: (metadata: ImageMetadata, digest: String)]>([:])
    private let recentOriginals = Mutex<[String: (info: ItemInfo, readAt: ContinuousClock.Instant)]>([:])
    /// How long a record of ``recentOriginals`` is trusted.
    static let recordTrust: Duration = .seconds(1)
    /// The most records ``recentOriginals`` keeps.
    static let recentLimit = 4096

    /// Image counts (`ImageCatalog/Counts`): variants made, hits, refusals.
    public typealias Counts = ImageCatalog.Counts

    /// What this pipeline counted since it started: variants made, hits, refusals.
    public var counts: Counts {
        Counts(
            made: counters.made.load(ordering: .relaxed), hits: counters.hits.load(ordering: .relaxed),
            refusals: counters.refusals.load(ordering: .relaxed))
    }

    /// A pipeline on `loader`, whose store must be an `ImageStorage` (an `ItemStore`, or the
    /// app's own). It registers the image
    /// fetchers with the loader (contexts ``originalContext`` and ``variantContext``).
    public convenience init(loader: ItemLoader, configuration: Configuration = Configuration()) throws(ImageCacheError)
    {
        try self.init(loader: loader, configuration: configuration, owns: false)
    }

    /// A pipeline on its own loader and HTTP transport, on the cache folder `cache` names;
    /// ``close()`` ends them.
    public convenience init(cache: CacheConfiguration, configuration: Configuration = Configuration())
        throws(ImageCacheError)
    {
        let loader: ItemLoader
        do {
            loader = try ItemLoader(configuration: cache)
        } catch {
            throw ImageCacheError(error)
        }
        try self.init(loader: loader, configuration: configuration, owns: true)
    }

    private init(loader: ItemLoader, configuration: Configuration, owns: Bool) throws(ImageCacheError) {
        guard let storage = loader.store as? any ImageStorage else {
            throw ImageCacheError(
                code: .configuration,
                message:
                    "an ImagePipeline needs a loader on an ImageStorage (an ItemStore on a cache folder, or one of the app's own); \(type(of: loader.store)) is none"
            )
        }
        try VipsRuntime.start(configuration.runtime)
        self.loader = loader
        self.configuration = configuration
        self.storage = storage
        ownsLoader = owns
        counters = ImageCounters(
            metrics: ImageMetrics(prefix: configuration.metricsPrefix, factory: configuration.metricsFactory))
        decoded = DecodedTier(limit: configuration.decodedMemoryLimit)
        var inner: [String: any ItemFetching] = [:]
        for scheme in ["http", "https", "file"] {
            var fetcher = loader.registeredFetcher(for: scheme)
            // A body over the image limit is cut off as it arrives, not downloaded whole first.
            if var http = fetcher as? HTTPFetcher {
                http.maxBytes = min(http.maxBytes, Int64(configuration.limits.maxBytes))
                fetcher = http
            }
            inner[scheme] = fetcher
        }
        loader.register(
            OriginalFetcher(inner: inner, limits: configuration.limits, pool: configuration.processingPool),
            for: Self.originalContext)
        loader.register(VariantMaker(jobs: Self.jobs), for: Self.variantContext)
    }

    /// Adds what this pipeline counted since the last call to the folder's totals
    /// (``storedCounts(in:)``), which every process sharing the folder adds to. ``close()``
    /// calls it; a long-running process may call it from time to time.
    public func recordCounts() async throws(ImageCacheError) {
        let now = counts
        let added = counted.withLock { counted in
            defer { counted = now }
            return now - counted
        }
        do {
            try await storage.addToCounters([
                Self.madeCounter: Int64(added.made), Self.hitsCounter: Int64(added.hits),
                Self.refusalsCounter: Int64(added.refusals),
            ])
        } catch {
            // Not added: counted again at the next call.
            counted.withLock { $0 = $0 - added }
            throw ImageCacheError(error)
        }
    }

    /// The totals every pipeline on the folder of `store` recorded (``recordCounts()``).
    public static func storedCounts(in store: some ImageStorage) async throws(ImageCacheError) -> Counts {
        do {
            return try await ImageCatalog.storedCounts(in: store)
        } catch {
            throw ImageCacheError(error)
        }
    }

    /// Removes the variants whose original is no longer stored (removed by a plain item-cache
    /// call such as `sync-agent cache rm`, or evicted: such a variant's key can only come back
    /// with the same bytes); returns how many went.
    @discardableResult
    public static func removeOrphanVariants(in store: some ImageStorage) async throws(ImageCacheError) -> Int {
        do {
            return try await ImageCatalog.removeOrphanVariants(in: store)
        } catch {
            throw ImageCacheError(error)
        }
    }

    /// The original's group name of a variant (``variantGroup(of:)``), for listings.
    public static func originalGroup(ofVariant info: ItemInfo) -> String? {
        ImageCatalog.originalGroup(ofVariant: info)
    }

    static let madeCounter = ImageCatalog.madeCounter
    static let hitsCounter = ImageCatalog.hitsCounter
    static let refusalsCounter = ImageCatalog.refusalsCounter

    /// Records the counts (``recordCounts()``) and, for a pipeline that opened its own loader,
    /// closes it.
    public func close() async throws(ImageCacheError) {
        try await recordCounts()
        guard ownsLoader else { return }
        do {
            try await loader.close()
        } catch {
            throw ImageCacheError(error)
        }
    }

    // MARK: - Loading

    /// The variant `request` asks for: stored, or made from the original (stored, or fetched).
    public func image(for request: ImageRequest) async throws(ImageCacheError) -> ImageResponse {
        do {
            let image = try await load(request)
            if !image.wasMade { counters.countHit(image.source) }
            return image
        } catch {
            if error.code == .refused { counters.countRefusal() }
            throw error
        }
    }

    private func load(_ request: ImageRequest) async throws(ImageCacheError) -> ImageResponse {
        try ImageMetadata.checkCustom(request.metadata)
        try request.resize(forSource: "png").validate()
        switch try await lookUpStored(request) {
        case .variant(let answered):
            return answered
        case .original(let original):
            // The original is stored and fresh: the variant is made from its file, never read
            // into memory whole. Evicted in between: it is loaded as if it were not stored.
            do {
                return try await variant(for: request, of: original)
            } catch  where error.cacheError?.code == .notCached && request.policy != .offline {
                break
            }
        case .nothing:
            break
        }
        return try await variant(for: request, of: try await loadOriginal(request))
    }

    /// The variant of `original` that `request` asks for: stored, or made now (once across
    /// every process sharing the folder).
    private func variant(for request: ImageRequest, of original: Original) async throws(ImageCacheError)
        -> ImageResponse
    {
        let resize = request.resize(forSource: original.metadata.format)
        try resize.validate()
        let key = try variantKey(original: original.key, digest: original.digest, resize: resize)
        let job = VariantJob(
            original: original.bytes, digest: original.digest, source: request.source.shown, request: resize,
            processing: configuration.processing, limits: configuration.limits, pool: configuration.processingPool,
            counters: counters)
        Self.jobs.hold(job, for: key.rawValue)
        defer { Self.jobs.release(key.rawValue) }
        let loaded: LoadedItem
        do {
            loaded = try await loader.item(
                for: key, url: nil,
                options: LoadOptions(
                    expiry: original.isKept ? configuration.variantExpiry : .dontStore,
                    groups: [Self.variantGroup(of: original.key)])
            )
        } catch {
            let failure = (error.underlying as? ImageCacheError) ?? ImageCacheError(error)
            if failure.code == .refused {
                // Damage only decoding finds (pixel data cut short inside a whole frame): the
                // original passed its header checks and was stored. Nothing of a refused input
                // stays cached.
                _ = try? await storage.removeItem(for: original.key)
            }
            throw failure
        }
        var answer = try response(
            loaded.item, source: loaded.source, original: original.metadata, originalSource: original.source)
        answer.originalStoreError = original.storeError
        return answer
    }

    /// Whether the variant `request` asks for is stored, looked up without the network
    /// (NBImageCache's "is this image cached at this size?").
    public func isCached(_ request: ImageRequest) async throws(ImageCacheError) -> Bool {
        guard let key = try await knownVariantKey(for: request) else { return false }
        do {
            return try await storage.info(for: key) != nil
        } catch {
            throw ImageCacheError(error)
        }
    }

    /// The variant's key when its original's record is stored (its digest known), without the
    /// network; nil when it is not, or the request cannot be made of it.
    func knownVariantKey(for request: ImageRequest) async throws(ImageCacheError) -> CacheKey? {
        guard
            let original = try await storedOriginalFacts(
                request.source, headers: request.headers, account: request.account)
        else { return nil }
        let resize = request.resize(forSource: original.metadata.format)
        guard (try? resize.validate()) != nil else { return nil }
        return try variantKey(original: original.key, digest: original.digest, resize: resize)
    }

    /// The facts of the original of `source` as stored, read without decoding; nil when it is
    /// not stored.
    public func originalMetadata(of source: ImageSource) async throws(ImageCacheError) -> ImageMetadata? {
        try await storedOriginalFacts(source)?.metadata
    }

    /// Saves an image made locally under `id`, with the caller's `metadata`: checked as an
    /// original is, kept until removed (or evicted by the disk limit), and its old variants
    /// dropped when the bytes change.
    @discardableResult
    public func save(_ data: Data, id: String, metadata: [String: String] = [:]) async throws(ImageCacheError)
        -> ImageMetadata
    {
        try ImageMetadata.checkCustom(metadata)
        let key = try originalKey(of: .id(id))
        let limits = configuration.limits
        let facts = try await configuration.processingPool.run { () throws(ImageCacheError) -> ImageMetadata in
            try ImageMetadata.ofOriginal(data, source: "image id '\(id)'", limits: limits, custom: metadata)
        }
        do {
            try await storage.store(
                data, for: key,
                options: StoreOptions(
                    expiry: .never, metadata: facts.stored,
                    contentType: ImageFormat(rawValue: facts.format)?.mimeType))
        } catch {
            throw ImageCacheError(error)
        }
        if let digest = facts.sha256 { await dropVariants(of: key, except: digest) }
        remember(nil, for: key)
        return facts
    }

    /// Removes the original of `source` and its variants; returns how many items went. For a
    /// URL, that is every original loads with a credential kept of it too
    /// (`CacheKey.sentWith(headers:url:account:)`), each with its variants.
    @discardableResult
    public func remove(_ source: ImageSource) async throws(ImageCacheError) -> Int {
        let key = try originalKey(of: source)
        do {
            // Those of credentials first (their keys extend this one), then this one.
            var originals: [CacheKey] = []
            if case .url = source, key.credentialDigest == nil, let url = key.url {
                originals = try await loader.items(
                    matching: ItemQuery().context(Self.originalContext).urlPrefix(url)
                ).map(\.key).filter { $0.credentialDigest != nil && $0.withoutCredentials == key }
            }
            originals.append(key)
            var removed = 0
            for original in originals {
                remember(nil, for: original)
                removed += try await storage.removeItem(for: original) ? 1 : 0
                removed += try await loader.removeItems(matching: ItemQuery().group(Self.variantGroup(of: original)))
            }
            return removed
        } catch {
            throw ImageCacheError(error)
        }
    }

    // MARK: - Originals

    /// An original as a load found it.
    struct Original {
        var key: CacheKey
        var bytes: OriginalBytes
        var metadata: ImageMetadata
        var digest: String
        var source: ItemSource
        /// False for a fetched original the cache did not keep (too large, `no-store`): its
        /// variant is not kept either, since a later load finds a variant through its original.
        var isKept = true
        var storeError: ItemCacheError?
    }

    /// The key of the original of `source`, loaded with the request `headers` for `account`: a
    /// load that sends a credential (a header, or the URL's user part), or names an account, has
    /// an original of its own (`CacheKey.sentWith(headers:url:account:)`), and so variants of its own.
    func originalKey(of source: ImageSource, headers: [String: String] = [:], account: String? = nil)
        throws(ImageCacheError) -> CacheKey
    {
        do {
            switch source {
            case .url(let url):
                return try CacheKey(url: url, context: Self.originalContext)
                    .sentWith(headers: headers, url: url, account: account)
            case .id(let id):
                guard !id.isEmpty else {
                    throw ImageCacheError(code: .configuration, message: "an image id is empty; name the image")
                }
                return try CacheKey.custom(id, context: Self.originalContext)
            }
        } catch let error as ImageCacheError {
            throw error
        } catch let error as ItemCacheError {
            throw ImageCacheError(error)
        } catch {
            throw ImageCacheError(code: .configuration, message: "\(source.shown): \(error)")
        }
    }

    /// What the store answers without the original's bytes.
    private enum StoredAnswer {
        /// The variant is stored.
        case variant(ImageResponse)
        /// The original is stored, fresh (or the load is offline), and names its digest; the
        /// variant is not stored.
        case original(Original)
        /// The original must be loaded.
        case nothing
    }

    /// The variant answered from the store without the original's bytes, or the stored original
    /// to make it from.
    private func lookUpStored(_ request: ImageRequest) async throws(ImageCacheError) -> StoredAnswer {
        guard request.policy != .reload, !request.headers.keys.contains(where: Self.isCacheControl) else {
            return .nothing
        }
        if case .url(let url) = request.source, url.isFileURL { return .nothing }
        let key = try originalKey(of: request.source, headers: request.headers, account: request.account)
        let info: ItemInfo?
        if let recent = recentOriginals.withLock({ $0[key.rawValue] }),
            ContinuousClock.now - recent.readAt < Self.recordTrust
        {
            info = recent.info
        } else {
            do {
                info = try await storage.info(for: key)
            } catch {
                throw ImageCacheError(error)
            }
            remember(info, for: key)
        }
        guard let info, (200...299).contains(info.status),
            request.policy == .offline
                ? info.isUsableOffline(at: storage.clock.now)
                : !info.isExpired(at: storage.clock.now) && !info.mustRevalidate,
            let metadata = ImageMetadata(stored: info.metadata, bytes: info.size), let digest = metadata.sha256
        else { return .nothing }
        let resize = request.resize(forSource: metadata.format)
        let variant = try variantKey(original: key, digest: digest, resize: resize)
        let stored: StoredItem?
        do {
            stored = try await storage.item(for: variant)
        } catch {
            throw ImageCacheError(error)
        }
        guard let stored, !stored.item.info.isExpired(at: storage.clock.now) else {
            return .original(
                Original(key: key, bytes: .stored(storage, key), metadata: metadata, digest: digest, source: .disk))
        }
        return .variant(try response(stored.item, source: stored.source, original: metadata, originalSource: nil))
    }

    /// Keeps (or, for nil, forgets) the record of the original `key`.
    private func remember(_ info: ItemInfo?, for key: CacheKey) {
        recentOriginals.withLock { recent in
            guard let info else {
                recent[key.rawValue] = nil
                return
            }
            if recent.count >= Self.recentLimit { recent.removeAll(keepingCapacity: true) }
            recent[key.rawValue] = (info, ContinuousClock.now)
        }
    }

    private static func isCacheControl(_ name: String) -> Bool {
        ["cache-control", "pragma"].contains(name.lowercased())
    }

    /// The original of the request: fetched (or read from the store) through the loader, or
    /// read in place from a `file` URL, or saved under an id.
    private func loadOriginal(_ request: ImageRequest) async throws(ImageCacheError) -> Original {
        let key = try originalKey(of: request.source, headers: request.headers, account: request.account)
        switch request.source {
        case .url(let url) where url.isFileURL:
            return try await readFile(url, key: key)
        case .url(let url):
            let loaded: LoadedItem
            do {
                loaded = try await loader.item(
                    for: key, url: url,
                    options: LoadOptions(
                        policy: request.policy, metadata: request.metadata, headers: request.headers,
                        account: request.account))
            } catch {
                throw ImageCacheError(error)
            }
            guard (200...299).contains(loaded.status) else {
                var failure = ItemCacheError(
                    code: .fetch, message: "\(request.source.shown) answered HTTP \(loaded.status), not an image",
                    key: key)
                failure.httpStatus = loaded.status
                throw ImageCacheError(failure)
            }
            let original = try await facts(of: loaded.item, key: key, shown: request.source.shown)
            // A new body: the variants of the old one can never be asked for again.
            if loaded.source == .network, loaded.isStored { await dropVariants(of: key, except: original.digest) }
            remember(loaded.isStored ? loaded.item.info : nil, for: key)
            return Original(
                key: key, bytes: .data(loaded.item.data), metadata: original.metadata, digest: original.digest,
                source: loaded.source, isKept: loaded.isStored, storeError: loaded.storeError)
        case .id(let id):
            let stored: StoredItem?
            do {
                stored = try await storage.item(for: key)
            } catch {
                throw ImageCacheError(error)
            }
            guard let stored else {
                throw ImageCacheError(
                    ItemCacheError(
                        code: .notCached,
                        message: "no image is saved under the id '\(id)'; save it first (ImagePipeline.save)", key: key)
                )
            }
            let original = try await facts(of: stored.item, key: key, shown: request.source.shown)
            return Original(
                key: key, bytes: .data(stored.item.data), metadata: original.metadata, digest: original.digest,
                source: stored.source)
        }
    }

    /// The facts of a stored original: its record's, or (an item stored without them, or with
    /// damaged ones) read from its bytes now.
    private func facts(of item: CachedItem, key: CacheKey, shown: String) async throws(ImageCacheError)
        -> (metadata: ImageMetadata, digest: String)
    {
        if let metadata = ImageMetadata(stored: item.info.metadata, bytes: item.info.size),
            let digest = metadata.sha256,
            metadata.bytes == Int64(item.data.count)
        {
            return (metadata, digest)
        }
        let limits = configuration.limits
        let data = item.data
        let custom = item.info.metadata.filter { !$0.key.hasPrefix(ImageMetadata.reservedPrefix) }
        let metadata = try await configuration.processingPool.run { () throws(ImageCacheError) -> ImageMetadata in
            try ImageMetadata.ofOriginal(data, source: shown, limits: limits, custom: custom)
        }
        return (metadata, metadata.sha256 ?? FileDigest.sha256(data))
    }

    /// The stored original's key, facts and digest, without the network; nil when none.
    func storedOriginalFacts(_ source: ImageSource, headers: [String: String] = [:], account: String? = nil)
        async throws(ImageCacheError) -> (key: CacheKey, metadata: ImageMetadata, digest: String)?
    {
        let key = try originalKey(of: source, headers: headers, account: account)
        if case .url(let url) = source, url.isFileURL {
            guard let original = try? await readFile(url, key: key) else { return nil }
            return (key, original.metadata, original.digest)
        }
        let info: ItemInfo?
        do {
            info = try await storage.info(for: key)
        } catch {
            throw ImageCacheError(error)
        }
        guard let info, let metadata = ImageMetadata(stored: info.metadata, bytes: info.size),
            let digest = metadata.sha256
        else { return nil }
        return (key, metadata, digest)
    }

    /// An image in a folder ContentSync mirrors, read in place from its descriptor (never
    /// copied into memory whole: hashed, checked and decoded in pieces), at most
    /// ``ImageLimits/maxBytes``, and keyed by its SHA-256: a new version's variants are new, and
    /// the old version's go. The digest of a file this process read is remembered by the file's
    /// identity (device, inode, size, change times), so a warm request does not hash it again.
    private func readFile(_ url: URL, key: CacheKey) async throws(ImageCacheError) -> Original {
        let path = url.path
        let limits = configuration.limits
        let file = try await configuration.processingPool.run { () throws(ImageCacheError) -> OpenFile in
            try OpenFile(path: path, limit: limits.maxBytes)
        }
        let remembered = fileDigests.withLock { $0[file.identity] }
        let facts: (metadata: ImageMetadata, digest: String)
        if let remembered {
            facts = remembered
        } else {
            facts = try await configuration.processingPool.run {
                () throws(ImageCacheError) -> (metadata: ImageMetadata, digest: String) in
                try Self.checkedFacts(of: file, path: path, limits: limits)
            }
            fileDigests.withLock { digests in
                if digests.count >= Self.recentLimit { digests.removeAll(keepingCapacity: true) }
                digests[file.identity] = facts
            }
            await dropVariants(of: key, except: facts.digest)
        }
        return Original(key: key, bytes: .file(file), metadata: facts.metadata, digest: facts.digest, source: .disk)
    }

    /// The facts of an open original file: its header (held to `limits`), its format's own
    /// integrity checks, and its SHA-256, each read in pieces.
    static func checkedFacts(of file: OpenFile, path: String, limits: ImageLimits) throws(ImageCacheError)
        -> (metadata: ImageMetadata, digest: String)
    {
        let header = try ImageProbe.header(of: .descriptor(file.descriptor), source: path, limits: limits)
        if let damage = ImageStructure.damage(of: file, format: header.format) {
            throw ImageCacheError(code: .refused, message: "\(path) \(damage)")
        }
        let digest: (size: Int64, sha256: String)
        do {
            digest = try FileDigest.sha256(ofDescriptor: file.descriptor, shownAs: path)
        } catch {
            throw ImageCacheError(ItemCacheError(code: .fetch, message: "cannot read the image \(path): \(error)"))
        }
        guard digest.size == file.size else {
            throw ImageCacheError(
                code: .refused, message: "\(path) changed size while it was read; ask again once it is written")
        }
        return (ImageMetadata(header: header, bytes: digest.size, sha256: digest.sha256), digest.sha256)
    }

    // MARK: - Variants

    /// The group every variant of the original `key` is stored in (`image-variants:` and the
    /// hash of the key).
    public static func variantGroup(of key: CacheKey) -> String { ImageCatalog.variantGroup(of: key) }

    func variantKey(original: CacheKey, digest: String, resize: ResizeRequest) throws(ImageCacheError) -> CacheKey {
        do {
            return try VariantKey.key(
                original: original, digest: digest, request: resize, pipeline: configuration.processing.identifier)
        } catch {
            throw ImageCacheError(error)
        }
    }

    /// Removes the variants of the original `key` made from other bytes than `digest`'s. A
    /// failure only leaves them to the disk limit: their keys can never be asked for again.
    private func dropVariants(of key: CacheKey, except digest: String) async {
        guard let variants = try? await storage.items(matching: ItemQuery().group(Self.variantGroup(of: key))) else {
            return
        }
        for variant in variants where variant.info.metadata[ImageMetadata.originalDigestName] != digest {
            _ = try? await storage.removeItem(for: variant.key)
        }
    }

    private func response(_ item: CachedItem, source: ItemSource, original: ImageMetadata, originalSource: ItemSource?)
        throws(ImageCacheError) -> ImageResponse
    {
        guard let metadata = ImageMetadata(stored: item.info.metadata, bytes: Int64(item.data.count)) else {
            throw ImageCacheError(
                code: .processing,
                message:
                    "the stored variant \(item.key.rawValue) has no image record; remove it (cache rm) and ask again")
        }
        return ImageResponse(
            data: item.data, metadata: metadata, original: original, key: item.key, source: source,
            originalSource: originalSource)
    }
}
