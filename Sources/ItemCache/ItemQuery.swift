import Foundation
import GRDB

/// A typed query over the stored items (RXWebCache's item collections): filters, an order, a
/// limit and an offset, built from values; callers never write SQL. ``ItemStore`` lists, counts
/// and deletes what a query matches.
///
/// Build one by chaining: `ItemQuery().urlPrefix(p).expired().ordered(by: .size, descending: true).limit(10)`.
public struct ItemQuery: Sendable, Equatable {
    /// What results are sorted by.
    public enum Order: String, Sendable, Equatable {
        /// When each item was stored.
        case added
        /// When each item was last used.
        case accessed
        /// The value's size.
        case size
        /// When each item expires (never-expiring ones last).
        case expires
        /// The key, byte by byte.
        case key
    }

    /// The URL starts with this (case-sensitive).
    public var urlPrefix: String?
    /// The URL ends with this.
    public var urlSuffix: String?
    /// The URL contains this.
    public var urlSubstring: String?
    /// The item's context.
    public var context: String?
    /// Groups or tags the item belongs to, every one of them.
    public var groups: [String] = []
    /// The first of ``groups``; setting it replaces them all.
    @available(*, deprecated, message: "use groups: group(_:) now adds a group, it no longer replaces one")
    public var group: String? {
        get { groups.first }
        set { groups = newValue.map { [$0] } ?? [] }
    }
    /// True: only expired items; false: only fresh ones; nil: both.
    public var isExpired: Bool?
    /// True: only pinned items; false: only unpinned ones; nil: both.
    public var isPinned: Bool?
    /// Stored within this range of dates.
    public var added: ClosedRange<Date>?
    /// Last used within this range of dates.
    public var accessed: ClosedRange<Date>?
    /// The value's size in bytes lies in this range.
    public var size: ClosedRange<Int64>?
    /// The order of results; default by key.
    public var order: Order = .key
    /// Largest first, newest first.
    public var descending = false
    /// At most this many results; nil for all.
    public var limit: Int?
    /// Results skipped before the first one returned.
    public var offset = 0

    /// A query that matches every item.
    public init() {}

    /// Only items whose URL starts with `prefix`.
    public func urlPrefix(_ prefix: String) -> ItemQuery { with { $0.urlPrefix = prefix } }
    /// Only items whose URL ends with `suffix`.
    public func urlSuffix(_ suffix: String) -> ItemQuery { with { $0.urlSuffix = suffix } }
    /// Only items whose URL contains `text`.
    public func urlContaining(_ text: String) -> ItemQuery { with { $0.urlSubstring = text } }
    /// Only items in `context`.
    public func context(_ context: String) -> ItemQuery { with { $0.context = context } }
    /// Only items in `group` (and in every group named before: `.group("a").group("b")` is the
    /// items in both).
    public func group(_ group: String) -> ItemQuery { with { $0.groups.append(group) } }
    /// Only expired items (or, with `false`, only fresh ones).
    public func expired(_ expired: Bool = true) -> ItemQuery { with { $0.isExpired = expired } }
    /// Only pinned items (or, with `false`, only unpinned ones).
    public func pinned(_ pinned: Bool = true) -> ItemQuery { with { $0.isPinned = pinned } }
    /// Only items stored within `range`.
    public func added(in range: ClosedRange<Date>) -> ItemQuery { with { $0.added = range } }
    /// Only items last used within `range`.
    public func accessed(in range: ClosedRange<Date>) -> ItemQuery { with { $0.accessed = range } }
    /// Only items whose size in bytes lies in `range`.
    public func size(in range: ClosedRange<Int64>) -> ItemQuery { with { $0.size = range } }
    /// Sorted by `order`.
    public func ordered(by order: Order, descending: Bool = false) -> ItemQuery {
        with {
            $0.order = order
            $0.descending = descending
        }
    }
    /// At most `count` results, after skipping `offset`.
    public func limit(_ count: Int, offset: Int = 0) -> ItemQuery {
        with {
            $0.limit = count
            $0.offset = offset
        }
    }

    private func with(_ change: (inout ItemQuery) -> Void) -> ItemQuery {
        var copy = self
        change(&copy)
        return copy
    }

    /// The query as a GRDB request on table `item`, evaluated at `now`.
    func request(now: Date) -> QueryInterfaceRequest<Row> {
        let url = Column("url")
        let expires = Column("expires")
        var request = Table("item").all()
        if let urlPrefix { request = request.filter(url.like(Self.escaped(urlPrefix) + "%", escape: "\\")) }
        if let urlSuffix { request = request.filter(url.like("%" + Self.escaped(urlSuffix), escape: "\\")) }
        if let urlSubstring { request = request.filter(url.like("%" + Self.escaped(urlSubstring) + "%", escape: "\\")) }
        if let context {
            // `context <> ''` as the partial index `item_context` states it, so SQLite uses it.
            request =
                context.isEmpty
                ? request.filter(Column("context") == "")
                : request.filter(sql: "context = ? AND context <> ''", arguments: [context])
        }
        for group in groups {
            let members = Table("itemGroup").filter(Column("name") == group).select(Column("itemId"))
            request = request.filter(members.contains(Column("id")))
        }
        if let isExpired {
            let expired = Column("mustRevalidate") == true || (expires != nil && expires <= now.timeIntervalSince1970)
            request = request.filter(isExpired ? expired : !expired)
        }
        if let isPinned { request = request.filter(Column("pinned") == isPinned) }
        if let added {
            request = request.filter(
                (added.lowerBound.timeIntervalSince1970...added.upperBound.timeIntervalSince1970).contains(
                    Column("created")))
        }
        if let accessed {
            request = request.filter(
                (accessed.lowerBound.timeIntervalSince1970...accessed.upperBound.timeIntervalSince1970).contains(
                    Column("accessed")))
        }
        if let size { request = request.filter(size.contains(Column("size"))) }
        let column: SQLExpression =
            switch order {
            case .added: Column("created").sqlExpression
            case .accessed: Column("accessed").sqlExpression
            case .size: Column("size").sqlExpression
            case .expires: Column("expires").sqlExpression
            case .key: Column("key").sqlExpression
            }
        if order == .expires {
            request = request.order(descending ? expires.descNullsFirst : expires.ascNullsLast, Column("key"))
        } else {
            request = request.order(descending ? column.desc : column.asc, Column("key"))
        }
        if let limit {
            request = request.limit(limit, offset: offset)
        } else if offset > 0 {
            request = request.limit(-1, offset: offset)
        }
        return request
    }

    /// `text` with LIKE's wildcards and the escape character escaped.
    static func escaped(_ text: String) -> String {
        var out = ""
        for character in text {
            if character == "%" || character == "_" || character == "\\" { out.append("\\") }
            out.append(character)
        }
        return out
    }
}

/// One item as a query lists it: its key and record, without its bytes.
public struct ItemSummary: Sendable, Equatable {
    /// The item's key.
    public var key: CacheKey
    /// Its record.
    public var info: ItemInfo
}

extension ItemStore {
    /// The items `query` matches, in its order, without their bytes.
    public func items(matching query: ItemQuery) async throws(ItemCacheError) -> [ItemSummary] {
        try await io.run { () throws(ItemCacheError) in
            try self.onDisk { disk throws(ItemCacheError) in try disk.summaries(query) }
        }
    }

    /// ``items(matching:)`` on the calling thread, for code that cannot await.
    @available(*, noasync, message: "use the async items(matching:); this one blocks on disk")
    public func itemsNow(matching query: ItemQuery) throws(ItemCacheError) -> [ItemSummary] {
        try disk.summaries(query)
    }

    /// How many items `query` matches (its limit and offset aside).
    public func count(matching query: ItemQuery) async throws(ItemCacheError) -> Int {
        try await io.run { () throws(ItemCacheError) in
            try self.onDisk { disk throws(ItemCacheError) in try disk.count(query) }
        }
    }

    /// ``count(matching:)`` on the calling thread, for code that cannot await.
    @available(*, noasync, message: "use the async count(matching:); this one blocks on disk")
    public func countNow(matching query: ItemQuery) throws(ItemCacheError) -> Int {
        try disk.count(query)
    }

    /// Deletes the items `query` matches (within its limit and offset), pinned ones included if
    /// it matches them; returns how many went.
    @discardableResult
    public func removeItems(matching query: ItemQuery) async throws(ItemCacheError) -> Int {
        try await flush()
        let removed = try await io.run { () throws(ItemCacheError) in
            try self.onDisk { disk throws(ItemCacheError) in
                try disk.remove { db in try Int64.fetchAll(db, query.request(now: disk.clock.now).select(Column("id")))
                }
            }
        }
        memory.removeAll()
        return removed
    }

    /// Deletes every expired item; returns how many went.
    @discardableResult
    public func removeExpired() async throws(ItemCacheError) -> Int {
        try await removeItems(matching: ItemQuery().expired())
    }
}
