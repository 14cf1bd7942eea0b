import Foundation
import GRDB
import Testing

@testable import ItemCache

/// The typed queries select, order, count and delete exactly what they say, on a real index.
@Suite("Typed queries over the index")
struct ItemQueryTests {
    /// Six items: a name, its URL, size, group, context, age in seconds, and whether it expired.
    static let items:
        [(name: String, url: String, size: Int, group: String?, context: String, age: Double, expired: Bool)] = [
            ("a", "https://cdn.example.com/thumbs/a.jpg", 100, "thumbs", "", 500, false),
            ("b", "https://cdn.example.com/thumbs/b.png", 300, "thumbs", "", 400, true),
            ("c", "https://cdn.example.com/data/c.json", 200, nil, "", 300, false),
            ("d", "https://api.example.com/v1/d.json?page=2", 50, "api", "", 200, true),
            ("e", "https://cdn.example.com/Thumbs/e.jpg", 400, nil, "", 100, false),
            ("f", "https://cdn.example.com/100%_done.txt", 10, nil, "lists", 0, false),
        ]

    static func populate() async throws -> (ItemStore, String, [String: String]) {
        let folder = temporaryCacheFolder("query")
        let store = try ItemStore(configuration: CacheConfiguration(folder: folder))
        var names: [String: String] = [:]
        for item in items {
            let key = try CacheKey(url: URL(string: item.url)!, context: item.context)
            names[key.rawValue] = item.name
            let now = Date().addingTimeInterval(-item.age)
            var write = PendingWrite(
                key: key, data: Data(count: item.size),
                info: ItemInfo(size: Int64(item.size), created: now, accessed: now))
            write.info.expires = item.expired ? Date(timeIntervalSinceNow: -1) : Date(timeIntervalSinceNow: 3600)
            write.info.groups = item.group.map { [$0] } ?? []
            try store.disk.write([write])
        }
        return (store, folder, names)
    }

    @Test(arguments: [
        (ItemQuery(), "abcdef"),
        (ItemQuery().urlPrefix("https://cdn.example.com/thumbs/"), "ab"), // case-sensitive: not e
        (ItemQuery().urlSuffix(".json"), "c"), // d's URL ends with its query
        (ItemQuery().urlContaining(".json"), "cd"),
        (ItemQuery().urlContaining("0%25_"), "f"), // the stored URL is normalized
        (ItemQuery().urlContaining("1_0"), ""), // LIKE's wildcards are literal
        (ItemQuery().urlContaining("%"), "f"),
        (ItemQuery().group("thumbs"), "ab"),
        (ItemQuery().context("lists"), "f"),
        (ItemQuery().context(""), "abcde"), // no context: outside the partial index, still found
        (ItemQuery().expired(), "bd"),
        (ItemQuery().expired(false), "acef"),
        (ItemQuery().size(in: 100...300), "abc"),
        (ItemQuery().ordered(by: .size), "fdacbe"),
        (ItemQuery().ordered(by: .size, descending: true).limit(2), "eb"),
        (ItemQuery().ordered(by: .added).limit(2, offset: 1), "bc"),
        (ItemQuery().ordered(by: .accessed, descending: true).urlPrefix("https://cdn"), "fecba"),
        (ItemQuery().group("thumbs").expired(), "b"),
        // Groups add up: items in both (none), never the last group alone (it was "d").
        (ItemQuery().group("thumbs").group("api"), ""),
        (ItemQuery().group("api").group("api"), "d"),
    ])
    func selects(query: ItemQuery, expected: String) async throws {
        try await Self.expect(query, selects: expected)
    }

    /// A range of times is taken when the test runs, not when its arguments are made: a run
    /// queued 50 s behind the others found other items.
    @Test func addedSelectsByTheTimeOfTheWrite() async throws {
        try await Self.expect(
            ItemQuery().added(in: Date(timeIntervalSinceNow: -350)...Date(timeIntervalSinceNow: -150)), selects: "cd")
    }

    static func expect(_ query: ItemQuery, selects expected: String) async throws {
        let (store, folder, names) = try await Self.populate()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var found = try store.blockingItems(matching: query).map { names[$0.key.rawValue] ?? "?" }.joined()
        if query.order == .key { found = String(found.sorted()) } // keys sort by their text, not by these names
        #expect(found == expected)
        var unlimited = query
        unlimited.limit = nil
        unlimited.offset = 0
        #expect(try store.blockingCount(matching: query) == store.blockingItems(matching: unlimited).count)
    }

    /// `item_context` leaves out items without a context (one index page fewer a write); a
    /// query for a context must still be answered from it, not by reading every row.
    @Test func aContextQueryUsesThePartialIndex() async throws {
        let (store, folder, _) = try await Self.populate()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let request = ItemQuery().context("lists").request(now: Date())
        let plan = try await store.disk.pool.read { db in
            let statement = try request.makePreparedRequest(db, forSingleResult: false).statement
            return try Row.fetchAll(
                db, sql: "EXPLAIN QUERY PLAN " + statement.sql, arguments: statement.arguments
            ).map { $0["detail"] as String }.joined(separator: "; ")
        }
        #expect(plan.contains("USING INDEX item_context"), "plan: \(plan)")
    }

    @Test("the injected clock decides expiry for queries, statistics, removeExpired and recorded reads, as for loads")
    func injectedClockDecidesExpiry() async throws {
        let folder = temporaryCacheFolder("clock")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let clock = LoadDecisionTests.ManualClock()
        var configuration = CacheConfiguration(folder: folder)
        configuration.clock = clock
        let store = try ItemStore(configuration: configuration)
        let key = try CacheKey(url: URL(string: "https://cdn.example.com/a.json")!)
        try await store.store(Data("a".utf8), for: key, options: StoreOptions(expiry: .lifetime(.seconds(60))))
        #expect(try store.blockingCount(matching: ItemQuery().expired()) == 0)
        #expect(try store.blockingStatistics().expired == 0)
        clock.advance(61) // the wall clock has not moved a minute; the cache's clock has
        #expect(try store.blockingCount(matching: ItemQuery().expired()) == 1)
        #expect(try store.blockingStatistics().expired == 1)
        #expect(try store.blockingItem(for: key)?.item.info.isExpired(at: clock.now) == true)
        // A read records the cache's time: accessed is the clock's, not the wall's.
        store.purgeMemory()
        _ = try store.blockingItem(for: key)
        store.disk.flushTouches()
        let accessed = try #require(try store.blockingInfo(for: key)?.accessed)
        #expect(abs(accessed.timeIntervalSince(clock.now)) < 1, "accessed \(accessed), clock \(clock.now)")
        #expect(try await store.removeExpired() == 1)
        #expect(try store.blockingItem(for: key) == nil)
    }

    @Test("deleting what a query matches, and removeExpired")
    func deletes() async throws {
        let (store, folder, names) = try await Self.populate()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(try await store.removeExpired() == 2)
        #expect(try await store.removeItems(matching: ItemQuery().urlPrefix("https://cdn.example.com/thumbs/")) == 1)
        #expect(
            try String(store.blockingItems(matching: ItemQuery()).map { names[$0.key.rawValue]! }.joined().sorted())
                == "cef")
        #expect(try store.blockingStatistics().bytes == 610)
    }
}
