import Foundation
import ItemCache

/// The store's synchronous calls, reached from the tool's async code on purpose: the kill loop
/// exercises both paths. (A synchronous function may call them; async code calls this.)
extension ItemStore {
    func blockingItem(for key: CacheKey) throws(ItemCacheError) -> StoredItem? { try itemNow(for: key) }
    func blockingStatistics() throws(ItemCacheError) -> CacheStatistics { try statisticsNow() }
    @discardableResult
    func blockingStore(_ data: Data, for key: CacheKey, options: StoreOptions) throws(ItemCacheError) -> CachedItem {
        try storeNow(data, for: key, options: options)
    }
}

extension ItemStore {
    func blockingClose() throws(ItemCacheError) { try closeNow() }
}
