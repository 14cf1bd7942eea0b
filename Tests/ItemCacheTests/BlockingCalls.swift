import Foundation

@testable import ItemCache

/// The store's synchronous calls for tests that check disk state from async code: these tests
/// look at the index and files right after an operation, on purpose on the calling thread (a
/// synchronous function may call the `noasync` API; async code calls this).
extension ItemStore {
    func blockingItem(for key: CacheKey) throws(ItemCacheError) -> StoredItem? { try itemNow(for: key) }
    func blockingStatistics() throws(ItemCacheError) -> CacheStatistics { try statisticsNow() }
    func blockingInfo(for key: CacheKey) throws(ItemCacheError) -> ItemInfo? { try infoNow(for: key) }
    func blockingItems(matching query: ItemQuery) throws(ItemCacheError) -> [ItemSummary] {
        try itemsNow(matching: query)
    }
    func blockingCount(matching query: ItemQuery) throws(ItemCacheError) -> Int { try countNow(matching: query) }
    func blockingClose() throws(ItemCacheError) { try closeNow() }
    @discardableResult
    func blockingStore(_ data: Data, for key: CacheKey, options: StoreOptions = StoreOptions()) throws(ItemCacheError)
        -> CachedItem
    {
        try storeNow(data, for: key, options: options)
    }
}

extension CacheProvider {
    func blockingCached(_ key: ProviderKey = .none) throws(ItemCacheError) -> ProviderResult<Value>? { try cached(key) }
}
