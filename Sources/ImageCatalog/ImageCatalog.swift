import ItemCache

/// Where the image cache keeps originals and variants in an item cache folder, and what can be
/// read or tidied there without decoding an image: the contexts and groups of listings, the
/// folder's counts, orphaned variants. `sync-agent cache` uses it without loading libvips;
/// ``ImagePipeline`` (ImageCache) names the same things.
public enum ImageCatalog {
    /// The context of originals' keys.
    public static let originalContext = "image"
    /// The context of variants' keys.
    public static let variantContext = "image-variant"

    /// The group every variant of the original `key` is stored in (`image-variants:` and the
    /// hash of its primary key: an original stored under a `Vary` variant key shares it, or its
    /// variants read as orphans and `cache rm` or `purge` deleted them).
    public static func variantGroup(of key: CacheKey) -> String { groupPrefix + key.primary.fileName }

    /// The original's group name of a variant (``variantGroup(of:)``), for listings.
    public static func originalGroup(ofVariant info: ItemInfo) -> String? {
        info.groups.first { $0.hasPrefix(groupPrefix) }
    }

    package static let groupPrefix = "image-variants:"
    package static let madeCounter = "image.variants-made"
    package static let hitsCounter = "image.variant-hits"
    package static let refusalsCounter = "image.refusals"

    /// Image counts: variants made, loads a stored variant answered, refusals.
    public struct Counts: Sendable, Equatable {
        /// Variants made (a load that joined another's making counts none).
        public var made: Int
        /// Loads a stored variant answered.
        public var hits: Int
        /// Loads refused because the original is not an image this cache accepts.
        public var refusals: Int

        /// Counts with these values.
        public init(made: Int, hits: Int, refusals: Int) {
            (self.made, self.hits, self.refusals) = (made, hits, refusals)
        }

        package static func - (lhs: Counts, rhs: Counts) -> Counts {
            Counts(made: lhs.made - rhs.made, hits: lhs.hits - rhs.hits, refusals: lhs.refusals - rhs.refusals)
        }
    }

    /// The totals every pipeline on the folder of `store` recorded.
    public static func storedCounts(in store: some ImageStorage) async throws(ItemCacheError) -> Counts {
        let counters = try await store.counters()
        let value = { (name: String) in Int(clamping: max(0, counters[name] ?? 0)) }
        return Counts(made: value(madeCounter), hits: value(hitsCounter), refusals: value(refusalsCounter))
    }

    /// Removes the variants whose original is no longer stored (removed by a plain item-cache
    /// call such as `sync-agent cache rm`, or evicted: such a variant's key can only come back
    /// with the same bytes); returns how many went.
    @discardableResult
    public static func removeOrphanVariants(in store: some ImageStorage) async throws(ItemCacheError) -> Int {
        let originals = Set(
            try await store.items(matching: ItemQuery().context(originalContext)).map { variantGroup(of: $0.key) })
        var removed = 0
        for variant in try await store.items(matching: ItemQuery().context(variantContext))
        where !variant.info.groups.contains(where: originals.contains) {
            if try await store.removeItem(for: variant.key) { removed += 1 }
        }
        return removed
    }
}
