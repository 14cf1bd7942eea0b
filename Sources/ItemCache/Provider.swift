import Foundation
import Synchronization

/// A typed cache of one kind of value (RxCache's providers): a `Codable` value, a lifetime, and
/// the caller's loader, with one record per dynamic key and group. The catalog's Usage section
/// shows one in use.
///
/// - A get returns the stored value while it is fresh; otherwise it runs the loader and stores
///   what it returns for ``lifetime``. Concurrent gets of one record run the loader once.
/// - When the loader fails and an expired value is stored, that value comes back marked
///   ``ItemSource/stale`` with the loader's error (``useExpiredDataIfLoaderFails``).
/// - ``evict(_:)`` removes the whole provider, one dynamic key (every group of it) or one
///   record; `get(_:evict: true)` drops the record and loads it again.
/// - ``update(_:for:)`` applies a ``ListAction`` to a stored array as one atomic step.
///
/// Records live in the ``ItemStore`` under ``ProviderKey/cacheKey(provider:)``: custom keys in the
/// context `provider`, tagged with the groups `provider:<name>` and `provider:<name>/<dynamic key>`,
/// so queries, `sync-agent cache ls` and the disk limit see them like any other item.
public struct CacheProvider<Value: Codable & Sendable>: Sendable {
    /// The provider's name: its records' keys and groups start with it.
    public let name: String
    /// The store the records live in.
    public let store: ItemStore
    /// How long a loaded value stays fresh. Default one day.
    public var lifetime: Expiry
    /// Return the expired value, marked ``ItemSource/stale``, when the loader fails. Default true.
    public var useExpiredDataIfLoaderFails: Bool

    /// A provider named `name` (any text) keeping its records in `store`.
    public init(_ name: String, store: ItemStore, lifetime: Expiry = .oneDay, useExpiredDataIfLoaderFails: Bool = true)
    {
        self.name = name
        self.store = store
        self.lifetime = lifetime
        self.useExpiredDataIfLoaderFails = useExpiredDataIfLoaderFails
    }

    // MARK: - Getting

    /// The value of `key`: the stored one while it is fresh, else what `loader` returns (stored
    /// for ``lifetime``). With `evict: true` the stored record is dropped first, so the loader
    /// always runs. The result says where the value came from.
    ///
    /// Throws ``ItemCacheError/Code/fetch`` when the loader fails and no stored value can stand
    /// in (the loader's error is its `underlying`), and ``ItemCacheError/Code/cancelled`` when
    /// the caller is cancelled, as ``ItemLoader`` does (the load goes on for other callers
    /// waiting for it, and stops when none is left).
    public func get(
        _ key: ProviderKey = .none, evict: Bool = false,
        loader: @escaping @Sendable () async throws -> Value
    ) async throws -> ProviderResult<Value> {
        let cacheKey = try key.cacheKey(provider: name)
        var stale: CachedItem?
        if evict {
            try await store.removeItem(for: cacheKey)
        } else if let stored = try await store.item(for: cacheKey) {
            if let value = decodeIfPossible(stored.item) {
                if !stored.item.info.isExpired(at: store.configuration.clock.now) {
                    return ProviderResult(value: value, source: stored.source, info: stored.item.info)
                }
                stale = stored.item
            }
        }
        do {
            let item = try await load(cacheKey, key: key, loader: loader)
            return ProviderResult(value: try item.decode(Value.self), source: .network, info: item.info)
        } catch let error where ItemCacheError.isCancellation(error) {
            throw ItemCacheError.cancelled(cacheKey)
        } catch {
            if useExpiredDataIfLoaderFails, let stale, let value = decodeIfPossible(stale) {
                return ProviderResult(value: value, source: .stale, info: stale.info, loaderError: error)
            }
            if let error = error as? ItemCacheError { throw error }
            throw ItemCacheError(
                code: .fetch,
                message: "provider \(name): the loader of \(key) failed and no stored value can stand in: \(error)",
                key: cacheKey, underlying: error)
        }
    }

    /// The stored value of `key`, fresh or not (see ``ProviderResult/info``), without running
    /// any loader; nil when there is none or it is not a `Value`. Synchronous: memory and disk only.
    @available(*, noasync, message: "use the async get(_:evict:loader:); this one blocks on disk")
    public func cached(_ key: ProviderKey = .none) throws(ItemCacheError) -> ProviderResult<Value>? {
        guard let stored = try store.itemNow(for: key.cacheKey(provider: name)),
            let value = decodeIfPossible(stored.item)
        else { return nil }
        return ProviderResult(
            value: value,
            source: stored.item.info.isExpired(at: store.configuration.clock.now) ? .stale : stored.source,
            info: stored.item.info)
    }

    /// Runs the loader once for all concurrent gets of one record, and stores its value.
    private func load(_ cacheKey: CacheKey, key: ProviderKey, loader: @escaping @Sendable () async throws -> Value)
        async throws -> CachedItem
    {
        let (flight, isNew) = store.providerLoads.claim(cacheKey.rawValue)
        guard isNew else { return try await flight.wait() }
        store.providerLoads.start(flight, for: cacheKey.rawValue) { [self] in
            let data = try Self.json(try await loader(), provider: name, key: cacheKey)
            return try await store.store(data, for: cacheKey, options: options(for: key))
        }
        return try await flight.wait()
    }

    /// `value` as the JSON a record holds (keys sorted, so equal values store equal bytes).
    private static func json(_ value: some Encodable, provider: String, key: CacheKey) throws(ItemCacheError) -> Data {
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            return try encoder.encode(value)
        } catch {
            throw ItemCacheError(
                code: .decoding,
                message:
                    "provider \(provider): \(type(of: value)) for \(key.rawValue) cannot be encoded as JSON: \(error)",
                key: key, underlying: error)
        }
    }

    /// How a record of `key` is stored.
    private func options(for key: ProviderKey) -> StoreOptions {
        StoreOptions(expiry: lifetime, groups: key.groups(provider: name), contentType: "application/json")
    }

    /// The stored value, or nil when it no longer decodes (the type changed since it was
    /// stored): such a record is reloaded, as if it were missing.
    private func decodeIfPossible(_ item: CachedItem) -> Value? {
        try? item.decode(Value.self)
    }

    // MARK: - Evicting

    /// Removes the records `scope` covers; returns how many went.
    @discardableResult
    public func evict(_ scope: EvictionScope = .provider) async throws(ItemCacheError) -> Int {
        switch scope.base {
        case .provider:
            return try await store.removeItems(matching: ItemQuery().group(ProviderKey.providerGroup(name)))
        case .dynamicKey(let dynamicKey):
            return try await store.removeItems(
                matching: ItemQuery().group(ProviderKey.dynamicKeyGroup(name, dynamicKey)))
        case .record(let key):
            return try await store.removeItem(for: key.cacheKey(provider: name)) ? 1 : 0
        }
    }

    // MARK: - List actions

    /// Applies `action` to the array stored for `key`, as one atomic step (no write of any
    /// process sharing the folder comes between the read and the write), and returns the new
    /// array. A missing record is an empty array; the record keeps its expiry (an edit is not a
    /// load), and a new one gets ``lifetime``.
    ///
    /// Throws ``ItemCacheError/Code/invalidAction`` when the action does not apply (an index out
    /// of range, removing from an empty array) and ``ItemCacheError/Code/decoding`` when the
    /// stored value is not a JSON array of `Element`; in both cases nothing changes.
    @discardableResult
    public func update<Element>(_ action: ListAction<Element>, for key: ProviderKey = .none)
        async throws(ItemCacheError) -> [Element]
    where Value == [Element] {
        let cacheKey = try key.cacheKey(provider: name)
        let providerName = name
        let stored = try await store.update(cacheKey, options: options(for: key)) {
            current throws(ItemCacheError) -> Data? in
            var list = try current.map { item throws(ItemCacheError) in try item.decode([Element].self) } ?? []
            try action.apply(&list, provider: providerName, key: cacheKey)
            return try Self.json(list, provider: providerName, key: cacheKey)
        }
        return try stored?.decode([Element].self) ?? []
    }
}

/// Which record of a provider: its dynamic key (e.g. a filter or a user id) and the group
/// within it (e.g. a page). Both optional; an empty string is the same as none.
public struct ProviderKey: Hashable, Sendable, CustomStringConvertible {
    /// The dynamic key, e.g. a page or a filter.
    public var dynamicKey: String?
    /// The group within the dynamic key (RxCache's `DynamicKeyGroup`), e.g. a page of a filter.
    public var group: String?

    /// The provider's one record when it has no dynamic keys.
    public static let none = ProviderKey()

    /// The record of `dynamicKey`, with no group.
    public static func dynamicKey(_ dynamicKey: String) -> ProviderKey { ProviderKey(dynamicKey: dynamicKey) }

    /// The record of `group` within `dynamicKey`.
    public static func dynamicKey(_ dynamicKey: String, group: String) -> ProviderKey {
        ProviderKey(dynamicKey: dynamicKey, group: group)
    }

    /// A key with these parts.
    public init(dynamicKey: String? = nil, group: String? = nil) {
        self.dynamicKey = dynamicKey?.isEmpty == true ? nil : dynamicKey
        self.group = group?.isEmpty == true ? nil : group
    }

    /// `dynamicKey/group`, or `(none)`.
    public var description: String {
        switch (dynamicKey, group) {
        case (nil, nil): "(none)"
        case (let dynamicKey?, nil): dynamicKey
        case (let dynamicKey, let group?): "\(dynamicKey ?? "")/\(group)"
        }
    }

    /// The item's key in the store: the custom key `<provider>/<dynamic key>/<group>` in the
    /// context `provider`, each part with `%` and `/` escaped so no two records share a key.
    public func cacheKey(provider: String) throws(ItemCacheError) -> CacheKey {
        try CacheKey.custom(
            [provider, dynamicKey ?? "", group ?? ""].map(Self.escape).joined(separator: "/"), context: "provider")
    }

    /// The groups a record is tagged with: one for its provider, one for its dynamic key.
    func groups(provider: String) -> [String] {
        [Self.providerGroup(provider)] + (dynamicKey.map { [Self.dynamicKeyGroup(provider, $0)] } ?? [])
    }

    static func providerGroup(_ provider: String) -> String { "provider:" + escape(provider) }

    static func dynamicKeyGroup(_ provider: String, _ dynamicKey: String) -> String {
        "provider:" + escape(provider) + "/" + escape(dynamicKey)
    }

    private static func escape(_ part: String) -> String {
        part.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "/", with: "%2F")
    }
}

/// What ``CacheProvider/evict(_:)`` removes (RxCache's `EvictProvider`, `EvictDynamicKey` and
/// `EvictDynamicKeyGroup`).
public struct EvictionScope: Hashable, Sendable {
    enum Base: Hashable, Sendable {
        case provider
        case dynamicKey(String)
        case record(ProviderKey)
    }

    let base: Base

    /// Every record of the provider.
    public static let provider = EvictionScope(base: .provider)

    /// Every record of one dynamic key, whatever its group.
    public static func dynamicKey(_ dynamicKey: String) -> EvictionScope {
        EvictionScope(base: .dynamicKey(dynamicKey))
    }

    /// The one record of `group` within `dynamicKey`.
    public static func dynamicKeyGroup(_ dynamicKey: String, group: String) -> EvictionScope {
        EvictionScope(base: .record(.dynamicKey(dynamicKey, group: group)))
    }

    /// Exactly the record of `key`.
    public static func record(_ key: ProviderKey) -> EvictionScope { EvictionScope(base: .record(key)) }
}

/// A provider's answer: the value and where it came from.
public struct ProviderResult<Value: Sendable>: Sendable {
    /// The value.
    public var value: Value
    /// ``ItemSource/memory``, ``ItemSource/disk``, ``ItemSource/network`` (the loader ran), or
    /// ``ItemSource/stale`` (expired, returned because the loader failed).
    public var source: ItemSource
    /// The record as stored: when it was loaded and when it expires.
    public var info: ItemInfo
    /// The loader's failure, when ``source`` is ``ItemSource/stale``.
    public var loaderError: (any Error)?

    /// A result with these parts.
    public init(value: Value, source: ItemSource, info: ItemInfo, loaderError: (any Error)? = nil) {
        (self.value, self.source, self.info, self.loaderError) = (value, source, info, loaderError)
    }
}

/// One change to a stored array (RxCache's `ActionsList`), applied by ``CacheProvider/update(_:for:)``
/// as one atomic step.
public struct ListAction<Element: Sendable>: Sendable {
    private let body: @Sendable (inout [Element]) -> String?

    /// An action from a closure that changes the array, or returns why it cannot (the reason
    /// becomes an ``ItemCacheError/Code/invalidAction`` error and nothing is stored).
    public init(_ body: @escaping @Sendable (inout [Element]) -> String?) {
        self.body = body
    }

    func apply(_ list: inout [Element], provider: String, key: CacheKey) throws(ItemCacheError) {
        if let reason = body(&list) {
            throw ItemCacheError(
                code: .invalidAction,
                message:
                    "provider \(provider): \(reason) in \(key.rawValue), which holds \(list.count) elements; nothing was changed",
                key: key)
        }
    }

    /// Inserts `element` at the front.
    public static func addFirst(_ element: Element) -> ListAction {
        ListAction {
            $0.insert(element, at: 0)
            return nil
        }
    }

    /// Appends `element`.
    public static func addLast(_ element: Element) -> ListAction {
        ListAction {
            $0.append(element)
            return nil
        }
    }

    /// Inserts `element` at `index` (0...count).
    public static func insert(_ element: Element, at index: Int) -> ListAction {
        ListAction { list in
            guard (0...list.count).contains(index) else { return "cannot insert at index \(index)" }
            list.insert(element, at: index)
            return nil
        }
    }

    /// Removes the first element.
    public static var removeFirst: ListAction {
        ListAction { list in
            guard !list.isEmpty else { return "cannot remove the first element of an empty list" }
            list.removeFirst()
            return nil
        }
    }

    /// Removes the last element.
    public static var removeLast: ListAction {
        ListAction { list in
            guard !list.isEmpty else { return "cannot remove the last element of an empty list" }
            list.removeLast()
            return nil
        }
    }

    /// Removes the element at `index`.
    public static func remove(at index: Int) -> ListAction {
        ListAction { list in
            guard list.indices.contains(index) else { return "cannot remove index \(index)" }
            list.remove(at: index)
            return nil
        }
    }

    /// Removes every element `predicate` accepts (none is fine).
    public static func removeAll(where predicate: @escaping @Sendable (Element) -> Bool) -> ListAction {
        ListAction {
            $0.removeAll(where: predicate)
            return nil
        }
    }

    /// Empties the list (the record stays, with its expiry).
    public static var removeAll: ListAction {
        ListAction {
            $0.removeAll()
            return nil
        }
    }

    /// Replaces the element at `index` with what `transform` makes of it.
    public static func update(at index: Int, _ transform: @escaping @Sendable (Element) -> Element) -> ListAction {
        ListAction { list in
            guard list.indices.contains(index) else { return "cannot update index \(index)" }
            list[index] = transform(list[index])
            return nil
        }
    }

    /// Replaces every element `predicate` accepts with what `transform` makes of it.
    public static func updateAll(
        where predicate: @escaping @Sendable (Element) -> Bool, _ transform: @escaping @Sendable (Element) -> Element
    ) -> ListAction {
        ListAction { list in
            for index in list.indices where predicate(list[index]) { list[index] = transform(list[index]) }
            return nil
        }
    }
}
