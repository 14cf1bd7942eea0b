import Foundation
import ItemCache

/// Where an image pipeline keeps originals and variants: an item cache (``ItemCaching``) that
/// also answers records without values, hands a value over as its file, lists items by query
/// and keeps counters that every process sharing it adds to. ``ItemStore`` is the default (a
/// cache folder); a test or an app can bring its own and give it to the pipeline's loader.
public protocol ImageStorage: ItemCaching {
    /// The clock stored items' expiry is read against.
    var clock: any CacheClock { get }
    /// The record of `key` without its value; nil when there is none.
    func info(for key: CacheKey) async throws(ItemCacheError) -> ItemInfo?
    /// Opens the stored value of `key` (checked), passes it to `body` and closes it; nil when
    /// nothing is stored. `body` may block (a decoder reading the file): run it off the
    /// cooperative pool.
    func withValue<T: Sendable>(
        for key: CacheKey, _ body: @escaping @Sendable (borrowing StoredValue) throws -> T
    ) async throws -> T?
    /// The items `query` selects.
    func items(matching query: ItemQuery) async throws(ItemCacheError) -> [ItemSummary]
    /// Adds `amounts` to the named counters.
    func addToCounters(_ amounts: [String: Int64]) async throws(ItemCacheError)
    /// The counters' totals.
    func counters() async throws(ItemCacheError) -> [String: Int64]
}

extension ItemStore: ImageStorage {
    /// The configuration's clock.
    public var clock: any CacheClock { configuration.clock }
}
