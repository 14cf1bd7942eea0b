import ArgumentParser
import FileKit
import Foundation
import ItemCache

/// `sync-agent cache`: the item cache from the command line, sharing its folder with apps and
/// other processes.
struct CacheCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cache",
        abstract: "Fetch through, list, remove and inspect an item cache folder.",
        discussion: """
            The folder (--cache) may be shared with apps and other sync-agent processes at the \
            same time: one fetch per URL across all of them, and the size limit holds.
            """,
        subcommands: [CacheGetCommand.self, CacheListCommand.self, CacheRemoveCommand.self, CachePurgeCommand.self, CacheStatsCommand.self])
}

/// The options every `cache` subcommand takes.
struct CacheFolderOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The cache folder (created when missing).", valueName: "DIR"))
    var cache: String

    @Option(name: .long, help: ArgumentHelp("Set the folder's disk limit in bytes; it is kept in the folder for every later use and process (without it: the folder's limit, 536870912 = 512 MiB for a new folder).", valueName: "BYTES"))
    var maxSize: Int64?

    func validate() throws {
        if let maxSize, maxSize <= 0 { throw ValidationError("--max-size must be a positive number of bytes, such as 104857600") }
    }

    var cacheConfiguration: CacheConfiguration {
        var configuration = CacheConfiguration(folder: FileSystem.absolutePath(cache))
        if let maxSize { configuration.diskLimit = maxSize }
        return configuration
    }

    func openStore() throws -> ItemStore {
        do {
            return try ItemStore(configuration: cacheConfiguration)
        } catch {
            throw CLIFailure(cache: error)
        }
    }
}

/// `--param name=value`, repeatable.
struct CacheParameters: ParsableArguments {
    @Option(name: .customLong("param"), help: ArgumentHelp("A request parameter, merged into the URL's query and the key (repeatable).", valueName: "k=v"))
    var parameters: [String] = []

    func dictionary() throws -> [String: String] {
        var result: [String: String] = [:]
        for parameter in parameters {
            guard let equals = parameter.firstIndex(of: "="), equals != parameter.startIndex else {
                throw CLIFailure(code: 6, message: "--param '\(parameter)' is not name=value; write it as --param page=2")
            }
            result[String(parameter[..<equals])] = String(parameter[parameter.index(after: equals)...])
        }
        return result
    }
}

func parseCacheURL(_ text: String) throws -> URL {
    guard let url = URL(string: text), url.scheme != nil else {
        throw CLIFailure(code: 6, message: "'\(text)' is not an absolute URL; give one such as https://host/path")
    }
    return url
}

/// `sync-agent cache get`.
struct CacheGetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Write an item's bytes to stdout or a file, fetching it when the cache cannot answer.",
        discussion: """
            A fresh stored item is written without a request; an expired one with an ETag or \
            Last-Modified is revalidated (a 304 moves no body). Without --ttl, --expires or \
            --no-store the server's Cache-Control and Expires decide, else one day. \
            When the fetch fails and a stale copy is stored, that copy is written, one warning \
            goes to stderr, and the exit code is 0. A failure with nothing stored exits 3; \
            --offline never uses the network and exits 8 when nothing is stored.
            """)

    @Argument(help: "The URL.") var url: String
    @OptionGroup var folder: CacheFolderOptions
    @OptionGroup var parameters: CacheParameters

    @Option(name: .long, help: ArgumentHelp("Keep the item this many seconds.", valueName: "SECONDS"))
    var ttl: Double?

    @Option(name: .long, help: ArgumentHelp("Keep the item until this date (2026-12-31T23:59:59Z or a UNIX timestamp).", valueName: "DATE"))
    var expires: String?

    @Flag(name: .long, help: "Fetch and write the item, but keep nothing.")
    var noStore = false

    @Flag(name: .long, help: "Never touch the network: a stored item (even expired) or exit 8.")
    var offline = false

    @Option(name: [.customShort("o"), .long], help: ArgumentHelp("Write the bytes to FILE instead of stdout.", valueName: "FILE"))
    var output: String?

    func validate() throws {
        if [ttl != nil, expires != nil, noStore].filter({ $0 }).count > 1 {
            throw ValidationError("give at most one of --ttl, --expires and --no-store")
        }
        if let ttl, !(ttl >= 0 && ttl.isFinite) { throw ValidationError("--ttl must be a number of seconds, 0 or more, such as 3600") }
    }

    func run() async throws {
        let url = try parseCacheURL(url)
        var options = LoadOptions(policy: offline ? .offline : .useCache)
        if let ttl { options.expiry = .lifetime(.milliseconds(Int64(ttl * 1000))) }
        if noStore { options.expiry = .dontStore }
        if let expires {
            do {
                options.expiry = try Expiry.parse(expires)
            } catch {
                throw CLIFailure(code: 6, message: "--expires: \(error.message)")
            }
        }
        let parameters = try parameters.dictionary()
        let loader: ItemLoader
        do {
            loader = try ItemLoader(configuration: folder.cacheConfiguration)
        } catch {
            throw CLIFailure(cache: error)
        }
        let result: Result<LoadedItem, ItemCacheError>
        do {
            result = .success(try await loader.item(for: url, parameters: parameters, options: options))
        } catch {
            result = .failure(error)
        }
        try? await loader.close()
        let loaded: LoadedItem
        switch result {
        case .success(let value): loaded = value
        case .failure(let error): throw CLIFailure(cache: error)
        }
        if loaded.source == .stale {
            let since = loaded.item.info.expires.map { " (expired \(ISO8601DateFormatter().string(from: $0)))" } ?? ""
            let why = loaded.fetchError.map { ": \($0.message)" } ?? (offline ? ": --offline" : "")
            Console.standardError("warning: \(url.absoluteString): serving stale data\(since)\(why)\n")
        }
        if let output {
            do {
                try AtomicFile.write(loaded.data, to: FileSystem.absolutePath(output))
            } catch {
                throw CLIFailure(code: 5, message: "-o: \(error)")
            }
        } else {
            FileHandle.standardOutput.write(loaded.data)
        }
    }
}

/// `sync-agent cache ls`.
struct CacheListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls",
        abstract: "List the stored items: size, expiry and URL, one a line.")

    @OptionGroup var folder: CacheFolderOptions

    @Option(name: .long, help: ArgumentHelp("Only items whose URL starts with P.", valueName: "P"))
    var prefix: String?

    @Flag(name: .long, help: "Only expired items.")
    var expired = false

    @Flag(name: .long, help: "Print a JSON array of objects: key, url, context, size, created, accessed, expires, expired, pinned, groups, etag, lastModified, contentType.")
    var json = false

    func run() async throws {
        let store = try folder.openStore()
        var query = ItemQuery()
        if let prefix { query = query.urlPrefix(prefix) }
        if expired { query = query.expired() }
        let items: [ItemSummary]
        do {
            items = try store.items(matching: query)
        } catch {
            throw CLIFailure(cache: error)
        }
        let time = { (date: Date) in ISO8601DateFormatter().string(from: date) }
        if json {
            let objects: [[String: Any]] = items.map { item in
                [
                    "key": item.key.rawValue, "url": item.key.url as Any, "context": item.key.context,
                    "size": item.info.size, "created": time(item.info.created), "accessed": time(item.info.accessed),
                    "expires": item.info.expires.map(time) as Any, "expired": item.info.isExpired(), "pinned": item.info.pinned,
                    "groups": item.info.groups, "etag": item.info.etag as Any, "lastModified": item.info.lastModified as Any,
                    "contentType": item.info.contentType as Any,
                ]
            }
            let data = try JSONSerialization.data(withJSONObject: objects, options: [.prettyPrinted, .sortedKeys])
            print(String(decoding: data, as: UTF8.self))
            return
        }
        for item in items {
            let expiry = item.info.expires.map { (item.info.isExpired() ? "expired " : "") + time($0) } ?? "never"
            print("\(item.info.size)\t\(expiry)\t\(item.key.url ?? item.key.rawValue)")
        }
    }
}

/// `sync-agent cache rm`.
struct CacheRemoveCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rm",
        abstract: "Remove one item by URL, or every item whose URL starts with --prefix.")

    @Argument(help: "The item's URL.") var url: String?
    @OptionGroup var folder: CacheFolderOptions
    @OptionGroup var parameters: CacheParameters

    @Option(name: .long, help: ArgumentHelp("Remove every item whose URL starts with P.", valueName: "P"))
    var prefix: String?

    func validate() throws {
        if (url == nil) == (prefix == nil) { throw ValidationError("give either a URL or --prefix") }
    }

    func run() async throws {
        let store = try folder.openStore()
        let removed: Int
        do {
            if let url {
                let key = try CacheKey(url: try parseCacheURL(url), parameters: try parameters.dictionary())
                removed = try await store.removeItem(for: key) ? 1 : 0
            } else {
                removed = try await store.removeItems(matching: ItemQuery().urlPrefix(prefix ?? ""))
            }
            try await store.close()
        } catch let error as ItemCacheError {
            throw CLIFailure(cache: error)
        }
        print("removed \(removed) item\(removed == 1 ? "" : "s")")
    }
}

/// `sync-agent cache purge`.
struct CachePurgeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "purge",
        abstract: "Remove every expired item (--expired) or every item (--all).")

    @OptionGroup var folder: CacheFolderOptions

    @Flag(name: .long, help: "Remove the expired items.") var expired = false
    @Flag(name: .long, help: "Remove every item, pinned ones too.") var all = false

    func validate() throws {
        if expired == all { throw ValidationError("give either --expired or --all") }
    }

    func run() async throws {
        let store = try folder.openStore()
        let removed: Int
        do {
            removed = expired ? try await store.removeExpired() : try await store.removeItems(matching: ItemQuery())
            try await store.close()
        } catch {
            throw CLIFailure(cache: error)
        }
        print("removed \(removed) item\(removed == 1 ? "" : "s")")
    }
}

/// `sync-agent cache stats`.
struct CacheStatsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Show the item count, bytes, limit, pinned and expired items.")

    @OptionGroup var folder: CacheFolderOptions

    @Flag(name: .long, help: "Print a JSON object: count, bytes, limit, pinned, pinnedBytes, expired.")
    var json = false

    func run() async throws {
        let store = try folder.openStore()
        let statistics: CacheStatistics
        do {
            statistics = try store.statistics()
        } catch {
            throw CLIFailure(cache: error)
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(statistics), as: UTF8.self))
            return
        }
        print("""
            count:   \(statistics.count)
            bytes:   \(statistics.bytes)
            limit:   \(statistics.limit)
            pinned:  \(statistics.pinned) (\(statistics.pinnedBytes) bytes)
            expired: \(statistics.expired)
            """)
    }
}

extension CLIFailure {
    /// A cache failure's exit code: 3 network with nothing stored, 8 an offline miss, 5 the
    /// cache folder or its limit, 6 a bad option value.
    init(cache error: ItemCacheError) {
        let code: Int32 = switch error.code {
        case .fetch: 3
        case .notCached: 8
        case .storage, .tooLarge: 5
        case .invalidKey, .invalidExpiry: 6
        default: 1
        }
        self.init(code: code, message: error.message)
    }
}
