import ArgumentParser
internal import DateText
import FileKit
import Foundation
import ImageCatalog
import ItemCache
import SyncDaemon
import Transport

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
        subcommands: [
            CacheGetCommand.self, CacheListCommand.self, CacheRemoveCommand.self, CachePurgeCommand.self,
            CacheStatsCommand.self,
        ])
}

/// The options every `cache` subcommand takes.
package struct CacheFolderOptions: ParsableArguments {
    package init() {}

    @Option(
        name: .long,
        help: ArgumentHelp(
            "The cache folder: created (mode 0700) by get when missing; the other commands open only an existing cache. A folder that holds anything but a cache, or that others can write, is refused.",
            valueName: "DIR"))
    var cache: String

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(
            "Set the folder's disk limit in bytes (index, log and files together); kept in the folder for every later use and process, and a lower one evicts at once (without it: the folder's limit, 536870912 = 512 MiB for a new folder).",
            valueName: "BYTES"))
    var maxSize: String?

    @Flag(
        name: .long,
        help: "Share the folder with the group: a new one is 0770 (files 0660), and a group-writable one is accepted.")
    var sharedGroup = false

    /// The largest limit taken: 2^62 bytes (4 EiB), far above any disk.
    static let largestLimit: Int64 = 1 << 62

    /// `--max-size` as a number, or exit 6 naming the value and the range.
    func diskLimit() throws -> Int64? {
        guard let maxSize else { return nil }
        guard let value = Int64(maxSize.filter { $0 != "_" }), value > 0, value <= Self.largestLimit else {
            throw CLIFailure(
                code: 6,
                message:
                    "--max-size '\(maxSize)' is not a number of bytes from 1 to \(Self.largestLimit); write it as --max-size 104857600"
            )
        }
        return value
    }

    package func cacheConfiguration(create: Bool) throws -> CacheConfiguration {
        var configuration = CacheConfiguration(folder: FileSystem.absolutePath(cache))
        configuration.diskLimit = try diskLimit()
        configuration.createsFolder = create
        configuration.sharing = sharedGroup ? .group : .private
        return configuration
    }

    /// Opens the cache (only an existing one unless `create`), telling on stderr what opening
    /// repaired.
    func openStore(create: Bool = false) throws -> ItemStore {
        let store: ItemStore
        do {
            store = try ItemStore(configuration: cacheConfiguration(create: create))
        } catch let error as ItemCacheError {
            throw CLIFailure(cache: error)
        }
        warnAboutRepairs(store.openingRepairs)
        return store
    }

    package func warnAboutRepairs(_ repairs: CacheRepairs) {
        if repairs.indexSetAside {
            Console.standardError(
                "warning: the cache index in \(cache) was damaged; it was set aside as index.sqlite.damaged and the cache started empty (items are fetched again)\n"
            )
        }
    }

    /// Tells on stderr that the index turned out damaged after opening (a page read only now):
    /// it was set aside and the command went on with an empty one, so a miss or a small count
    /// has that cause.
    package func warnAboutDamageFoundWhileRunning(_ store: ItemStore) {
        guard store.indexesSetAsideSinceOpening > 0 else { return }
        Console.standardError(
            "warning: the cache index in \(cache) turned out damaged while it was read; it was set aside as index.sqlite.damaged and the cache went on empty (items are fetched again)\n"
        )
    }
}

/// `--param name=value`, repeatable: every value is kept, in order.
struct CacheParameters: ParsableArguments {
    @Option(
        name: .customLong("param"), parsing: .unconditionalSingleValue,
        help: ArgumentHelp(
            "A request parameter, merged into the URL's query and the key (repeatable; every value is kept, in order; sent escaped byte for byte, so + is a plus sign).",
            valueName: "k=v"))
    var parameters: [String] = []

    func list() throws -> RequestParameters {
        var result = RequestParameters()
        for parameter in parameters {
            guard let equals = parameter.firstIndex(of: "="), equals != parameter.startIndex else {
                throw CLIFailure(
                    code: 6, message: "--param '\(parameter)' is not name=value; write it as --param page=2")
            }
            result.pairs.append(
                (name: String(parameter[..<equals]), value: String(parameter[parameter.index(after: equals)...])))
        }
        return result
    }
}

/// Refuses an argument that is not UTF-8, in every command (``SyncAgent/answerWithoutThreads(arguments:)``):
/// Swift's strings would replace its bytes with U+FFFD, so two different byte strings would
/// become one key, one account or one path, and a credential would be sent changed. Bytes that
/// are not text belong in a URL, percent-encoded (`q=%FF%FE`), where they are kept byte for byte.
/// The message names the argument by its number and its option, never its bytes (it may be a
/// header's secret).
package func refuseUnreadableArguments() throws {
    for index in 1..<Int(CommandLine.argc) {
        guard let argument = CommandLine.unsafeArgv[index] else { continue }
        let bytes = UnsafeBufferPointer(
            start: UnsafeRawPointer(argument).assumingMemoryBound(to: UInt8.self), count: strlen(argument))
        if String(validating: bytes, as: UTF8.self) == nil {
            var option = ""
            // The option before it, when that is a bare option name (`--header=…` holds its own
            // value, maybe a secret, and this argument is not it).
            if index > 1, let previous = CommandLine.unsafeArgv[index - 1], previous.pointee == UInt8(ascii: "-"),
                case let name = String(
                    decoding: UnsafeRawBufferPointer(start: previous, count: strlen(previous)), as: UTF8.self),
                !name.contains("="), name.count <= 40
            {
                option = " (the value of \(name))"
            }
            throw CLIFailure(
                code: 6,
                message:
                    "argument \(index)\(option) is not UTF-8 text, and would reach sync-agent changed; give it as UTF-8 (in a URL, such bytes percent-encoded, as ?q=%FF%FE)"
            )
        }
    }
}

/// What `rm` and `purge` print: `removed N items`, or `{"removed": N}`.
func removalReport(_ removed: Int, json: Bool) throws -> String {
    if json { return try cacheJSON(["removed": removed]) }
    return "removed \(removed) item\(removed == 1 ? "" : "s")\n"
}

/// JSON for people and scripts: sorted keys, pretty, slashes as they are (`https://`, not `https:\/\/`).
package func cacheJSON(_ object: Any) throws -> String {
    let data = try JSONSerialization.data(
        withJSONObject: object, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
    return String(decoding: data, as: UTF8.self) + "\n"
}

func parseCacheURL(_ text: String) throws -> URL {
    guard let url = URL(string: text), url.scheme != nil else {
        throw CLIFailure(
            code: 6, message: "'\(Redaction.text(text))' is not an absolute URL; give one such as https://host/path")
    }
    return url
}

/// `--account NAME`, refused when empty or blank (an empty name would silently be no account at all).
package func checkedAccount(_ account: String?) throws -> String? {
    guard let account else { return nil }
    guard !account.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
        throw CLIFailure(code: 6, message: "--account is empty; name the account, such as --account user-42")
    }
    return account
}

/// `--header 'Name: value'` lines as request headers (lines of one name combined), or exit 6
/// naming the bad one by its number (a value may be a secret, such as Authorization).
package func parseRequestHeaders(_ header: [String]) throws -> [String: String] {
    var headers: [String: String] = [:]
    var spelling: [String: String] = [:]
    // A value may be a secret (Authorization): messages name the header, never its value.
    for (index, line) in header.enumerated() {
        guard let colon = line.firstIndex(of: ":") else {
            throw CLIFailure(
                code: 6,
                message: "--header number \(index + 1) has no colon; write it as --header 'Accept: text/html'")
        }
        let name = line[..<colon].trimmingCharacters(in: .whitespaces)
        let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        let token = CharacterSet(
            charactersIn: "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        guard !name.isEmpty, name.unicodeScalars.allSatisfy(token.contains) else {
            throw CLIFailure(
                code: 6,
                message:
                    "--header number \(index + 1) has no valid header name before its colon; write it as --header 'Accept: text/html'"
            )
        }
        // The transport's one rule: no framing header, no control character in the value.
        if let problem = HTTPRequest.headerProblem(name: name, value: value) {
            throw CLIFailure(code: 6, message: "--header \(name): \(problem)")
        }
        let lowered = name.lowercased()
        let key = spelling[lowered] ?? name
        spelling[lowered] = key
        headers[key] = headers[key].map { $0 + ", " + value } ?? value
    }
    // Any value may be a secret (a header of the app's own, `X-Tenant-Token`): what an origin
    // echoes of one is masked in every message and stored failure, as `watch` does for a
    // config file's headers. Not the standard headers whose values are HTTP's own words: masked,
    // `only-if-cached` read `***` in the message about it.
    Redaction.registerSecrets(
        headers.filter { !publicHeaderNames.contains($0.key.lowercased()) }.values.flatMap {
            Redaction.secretParts(ofHeaderValue: $0)
        })
    return headers
}

/// Request headers whose values are never secrets, so never masked in messages.
let publicHeaderNames: Set<String> = [
    "cache-control", "pragma", "accept", "accept-language", "accept-encoding", "accept-charset",
]

/// `sync-agent cache get`.
struct CacheGetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Write an item's bytes to stdout or a file, fetching it when the cache cannot answer.",
        discussion: """
            HTTP caching as RFC 9111 and 5861 define it for a private cache: a fresh stored \
            response is written without a request; a stale one with an ETag or Last-Modified is \
            revalidated (a 304 moves no body). Without --ttl, --expires or --no-store the \
            server's Cache-Control, Expires and Age decide, else one day. Request headers \
            (--header) go to the server, select among the stored variants of a response that \
            names them in Vary, and their Cache-Control (no-cache, no-store, max-age, \
            max-stale, min-fresh, only-if-cached) is honoured. Statuses that may be cached \
            (404, 410, 301…) are stored and served like a 200. When the origin fails (no \
            answer, or a 500, 502, 503 or 504) and it allows stale data (no must-revalidate or \
            no-cache, within any stale-if-error), the stale copy is written with one warning \
            and the exit code is 0; a failing origin is then left alone for a backoff that \
            grows from 1 s to 60 s. Exit codes: 0 for a 2xx (or 3xx); 22 for a 4xx and 23 for \
            a 5xx served, their body still written; 3 for a failure with nothing to serve; 5 \
            for the cache folder; 6 for a bad option; 8 for --offline or only-if-cached with \
            nothing usable stored.
            """)

    @Argument(help: "The URL.") var url: String
    @OptionGroup var folder: CacheFolderOptions
    @OptionGroup var parameters: CacheParameters

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp("Keep the item this many seconds (0 to 3153600000, a hundred years).", valueName: "SECONDS"))
    var ttl: String?

    @Option(
        name: .long, parsing: .unconditional,
        help: ArgumentHelp(
            "Keep the item until this date (2026-12-31T23:59:59Z, RFC 3339, or a UNIX timestamp), or for a lifetime (90s, 15m, 2h, 7d).",
            valueName: "DATE"))
    var expires: String?

    @Flag(name: .long, help: "Fetch and write the item, but keep nothing.")
    var noStore = false

    @Flag(
        name: .long,
        help:
            "Never touch the network: a stored item (even expired, unless its origin said must-revalidate or no-cache) or exit 8."
    )
    var offline = false

    @Option(
        name: [.customShort("o"), .long],
        help: ArgumentHelp("Write the bytes to FILE instead of stdout.", valueName: "FILE"))
    var output: String?

    @Option(
        name: [.customShort("H"), .long],
        help: ArgumentHelp(
            "A request header (repeatable): sent to the server, matched against a stored response's Vary, and its Cache-Control honoured; what a credential (Authorization, Cookie, an API key, like a URL's password) fetched is kept for that credential alone.",
            valueName: "'Name: value'"))
    var header: [String] = []

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Keep what this load fetches for NAME (a user id) rather than for the credential it sends, so the account's next token finds it.",
            valueName: "NAME"))
    var account: String?

    @Flag(
        name: [.customShort("i"), .long],
        help:
            "Write the status line and the response headers (with the item's current Age) before the body, as curl -i does."
    )
    var include = false

    @Flag(
        name: .long,
        help:
            "Print a JSON object instead of the bytes (which go to -o FILE when given): url, key, status, headers, source (network, memory, disk, revalidated, stale), stale, age, size, stored, expires, contentType, etag, warning, output."
    )
    var json = false

    /// The exit code of a served 4xx.
    static let clientErrorExit: Int32 = 22
    /// The exit code of a served 5xx.
    static let serverErrorExit: Int32 = 23

    /// `--header` lines as request headers (lines of one name combined), or exit 6 naming the
    /// bad one.
    func requestHeaders() throws -> [String: String] { try parseRequestHeaders(header) }

    /// The longest --ttl: a hundred years.
    static let longestTTL = Expiry.longestLifetime

    func validate() throws {
        if [ttl != nil, expires != nil, noStore].filter({ $0 }).count > 1 {
            throw ValidationError("give at most one of --ttl, --expires and --no-store")
        }
    }

    func run() async throws {
        if let output {
            try OutputFile.refuse(output, inside: folder.cache)
            try OutputFile.checkWritable(output)
        }
        let url = try parseCacheURL(url)
        // The fetchers sync-agent has (the library's apps register more: `cache rm` takes any key).
        guard let scheme = url.scheme?.lowercased(), ["http", "https", "file"].contains(scheme) else {
            throw CLIFailure(
                code: 6,
                message:
                    "'\(Redaction.url(url))' is not an http, https or file URL; give one such as https://host/path or file:///srv/mirror/data.json"
            )
        }
        var options = LoadOptions(policy: offline ? .offline : .useCache)
        options.headers = try requestHeaders()
        options.account = try checkedAccount(account)
        if let ttl {
            // Decimal only, as --expires reads it: `Double` also reads `0x10`, `1e9` and `-0`.
            guard let seconds = DecimalText.parse(ttl), seconds <= Self.longestTTL
            else {
                throw CLIFailure(
                    code: 6,
                    message:
                        "--ttl '\(ttl)' is not a number of seconds from 0 to \(Int(Self.longestTTL)) (a hundred years); write it as --ttl 3600"
                )
            }
            options.expiry = .lifetime(.milliseconds(Int64(seconds * 1000)))
        }
        if noStore { options.expiry = .dontStore }
        if let expires {
            do {
                options.expiry = try Expiry.parse(expires)
            } catch {
                throw CLIFailure(code: 6, message: "--expires: \(error.message)")
            }
        }
        let parameters = try parameters.list()
        let loader: ItemLoader
        do {
            loader = try ItemLoader(configuration: folder.cacheConfiguration(create: true))
        } catch let error as ItemCacheError {
            throw CLIFailure(cache: error)
        }
        if let store = loader.store as? ItemStore { folder.warnAboutRepairs(store.openingRepairs) }
        defer { if let store = loader.store as? ItemStore { folder.warnAboutDamageFoundWhileRunning(store) } }
        // As a value, not an item: a large one is written from its file, never held whole.
        let result: Result<LoadedValue, ItemCacheError>
        do {
            result = .success(try await loader.value(for: url, parameters: parameters, options: options))
        } catch {
            result = .failure(error)
        }
        let loaded: LoadedValue
        switch result {
        case .success(let value): loaded = value
        case .failure(let error):
            try? await loader.close()
            throw CLIFailure(cache: error)
        }
        let delivered = Result { try deliver(loaded, url: url, options: options) }
        // A stale answer inside stale-while-revalidate started a refresh: with the bytes out,
        // let it finish and be stored before the process ends.
        await loader.finishFetches()
        try? await loader.close()
        try delivered.get()
    }

    /// Writes the item (and the warning, the head, the JSON) and throws the exit code of a
    /// served error status.
    func deliver(_ loaded: LoadedValue, url: URL, options: LoadOptions) throws {
        let shown = Redaction.url(url)
        var warning: String?
        if loaded.source == .stale {
            let since = loaded.info.expires.map { " (expired \(InternetDateTime.formatWholeSeconds($0)))" } ?? ""
            let why = loaded.fetchError.map { ": \($0.message)" } ?? (offline ? ": --offline" : "")
            warning = "serving stale data\(since)\(why)"
        } else if let storeError = loaded.storeError {
            warning = "not kept in the cache: \(storeError.message)"
        }
        // One line: a failure's words may quote what an origin (or a neighbour's row) wrote.
        if let warning {
            Console.standardError("warning: \(shown): \(LogText.escaped(CLIFailure.namingFlags(warning)))\n")
        }
        let info = loaded.info
        let age = Int(info.age(at: Date()).rounded(.down))
        let head = include ? Self.head(status: info.status, fields: info.response?.headerFields ?? [], age: age) : nil
        // The head, then the value chunk by chunk (a value in a file is checked as it is read).
        let produce = { (write: (UnsafeRawBufferPointer) throws -> Void) throws in
            if var head { try head.withUTF8 { try write(UnsafeRawBufferPointer($0)) } }
            try loaded.forEachChunk { try write($0) }
        }
        do {
            if let output {
                try OutputFile.write(to: output, produce)
            } else if !json {
                try produce { try Console.output($0) }
            }
        } catch let error as ItemCacheError {
            throw CLIFailure(cache: error)
        }
        if json {
            let time = { (date: Date) in InternetDateTime.formatWholeSeconds(date) }
            let stored = loaded.isStored
            var object: [String: Any] = [
                "url": shown, "key": Redaction.text(loaded.key.rawValue), "source": loaded.source.description,
                "size": loaded.size, "status": info.status, "age": age,
                "headers": HTTPHeaderField.combined(info.response?.headerFields ?? []),
                "stored": stored, "stale": loaded.source == .stale,
            ]
            if stored, let expires = info.expires { object["expires"] = time(expires) }
            if let contentType = info.contentType { object["contentType"] = contentType }
            if let etag = info.etag { object["etag"] = etag }
            if let warning { object["warning"] = warning }
            if let output { object["output"] = FileSystem.absolutePath(output) }
            try Console.output(try cacheJSON(object))
        }
        // A served error status: its body was written; the exit code says what it was, and one
        // line on stderr says so too (the exit code alone was all a script's log showed).
        guard info.status >= 400 else { return }
        Console.standardError(
            "\(shown): the origin answered \(info.status)\(loaded.source == .network ? "" : " (a stored answer)"); its body was written\n"
        )
        throw ExitCode(info.status < 500 ? Self.clientErrorExit : Self.serverErrorExit)
    }

    /// The status line and header lines `--include` writes, curl's way: `HTTP/1.1 200 OK`, the
    /// stored fields (the item's current `Age` in place of the stored one), an empty line.
    static func head(status: Int, fields: [HTTPHeaderField], age: Int) -> String {
        var text = "HTTP/1.1 \(status) \(reasonPhrase(status))\r\n"
        // A stored value holding a line break (a bare CR from the origin, a damaged row) would
        // forge header lines of its own: control characters are escaped.
        for field in fields where field.name != "age" {
            text += "\(LogText.escaped(field.name)): \(LogText.escaped(Redaction.text(field.value)))\r\n"
        }
        text += "age: \(age)\r\n\r\n"
        return text
    }

    static func reasonPhrase(_ status: Int) -> String {
        HTTPReasonPhrase.phrase(for: status) ?? ""
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

    @Flag(
        name: .long,
        help:
            "Print a JSON array of objects: key, url, context, size, created, accessed, expires, expired, pinned, groups, etag, lastModified, contentType; images add image (width, height, format, orientation) and variants the key of their original."
    )
    var json = false

    func run() async throws {
        let store = try folder.openStore()
        defer { folder.warnAboutDamageFoundWhileRunning(store) }
        var query = ItemQuery()
        if let prefix { query = query.urlPrefix(prefix) }
        if expired { query = query.expired() }
        let items: [ItemSummary]
        do {
            items = try await store.items(matching: query)
        } catch {
            throw CLIFailure(cache: error)
        }
        let time = { (date: Date) in InternetDateTime.formatWholeSeconds(date) }
        // Image originals by their variants' group, to list each variant under its original.
        let originals = Dictionary(
            items.filter { $0.key.context == ImageCatalog.originalContext }.map {
                (ImageCatalog.variantGroup(of: $0.key), $0)
            }, uniquingKeysWith: { first, _ in first })
        if json {
            let objects: [[String: Any]] = items.map { item in
                var object: [String: Any] = [
                    "key": Redaction.text(item.key.rawValue), "url": item.key.url.map(Redaction.text) as Any,
                    "context": item.key.context,
                    "size": item.info.size, "created": time(item.info.created), "accessed": time(item.info.accessed),
                    "expires": item.info.expires.map(time) as Any, "expired": item.info.isExpired(),
                    "pinned": item.info.pinned,
                    "groups": item.info.groups, "etag": item.info.etag as Any,
                    "lastModified": item.info.lastModified as Any,
                    "contentType": item.info.contentType as Any,
                ]
                if let image = ImageMetadata(stored: item.info.metadata, bytes: item.info.size) {
                    object["image"] = [
                        "width": image.width, "height": image.height, "format": image.format,
                        "orientation": image.orientation,
                    ]
                }
                if item.key.context == ImageCatalog.variantContext {
                    let original = ImageCatalog.originalGroup(ofVariant: item.info).flatMap { originals[$0] }
                    object["original"] =
                        original.map { Redaction.text($0.key.rawValue) }
                        ?? item.info.metadata[ImageMetadata.originalFileName] as Any
                }
                return object
            }
            try Console.output(try cacheJSON(objects))
            return
        }
        func line(_ item: ItemSummary, _ name: String) -> String {
            let expiry = item.info.expires.map { (item.info.isExpired() ? "expired " : "") + time($0) } ?? "never"
            return "\(item.info.size)\t\(expiry)\t\(name)\n"
        }
        // A variant shows under its original: `  variant 720x480 jpeg (w=720;h=;mode=fit;…)`.
        func variantName(_ item: ItemSummary) -> String {
            let image = ImageMetadata(stored: item.info.metadata, bytes: item.info.size)
            let made = item.info.metadata[ImageMetadata.variantName].map { " (\(LogText.escaped($0)))" } ?? ""
            return "  variant \(image.map { "\($0.width)x\($0.height) \($0.format)" } ?? "?")\(made)"
        }
        var variants: [String: [ItemSummary]] = [:]
        // Variants of a mirrored folder's files, whose originals are read in place, by file.
        var ofFiles: [String: [ItemSummary]] = [:]
        var orphans: [ItemSummary] = []
        for item in items where item.key.context == ImageCatalog.variantContext {
            if let group = ImageCatalog.originalGroup(ofVariant: item.info), originals[group] != nil {
                variants[group, default: []].append(item)
            } else if let file = item.info.metadata[ImageMetadata.originalFileName] {
                ofFiles[file, default: []].append(item)
            } else {
                orphans.append(item)
            }
        }
        var text = ""
        for item in items where item.key.context != ImageCatalog.variantContext {
            // What a load with a credential kept shows as such: two lines of one URL differ.
            let credential =
                item.key.credentialDigest.map {
                    $0.hasPrefix(CacheKey.accountMark)
                        ? " (for the account \($0.dropFirst(CacheKey.accountMark.count)))"
                        : " (for the credential \($0))"
                } ?? ""
            text += line(item, Redaction.text(item.key.url ?? item.key.rawValue) + credential)
            if item.key.context == ImageCatalog.originalContext {
                for variant in variants[ImageCatalog.variantGroup(of: item.key)] ?? [] {
                    text += line(variant, variantName(variant))
                }
            }
        }
        for (file, fileVariants) in ofFiles.sorted(by: { $0.key < $1.key }) {
            text += "-\t-\t\(LogText.escaped(file)) (a mirrored file, read in place)\n"
            for variant in fileVariants { text += line(variant, variantName(variant)) }
        }
        if !orphans.isEmpty {
            text += "(variants whose original is gone; cache rm or purge removes them)\n"
            for variant in orphans { text += line(variant, variantName(variant)) }
        }
        try Console.output(text)
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

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Remove every item whose URL starts with P (not empty: `cache purge --all` removes everything).",
            valueName: "P"))
    var prefix: String?

    @Flag(name: .long, help: "Print a JSON object: removed.")
    var json = false

    func validate() throws {
        if (url == nil) == (prefix == nil) { throw ValidationError("give either a URL or --prefix") }
    }

    func run() async throws {
        if prefix == "" {
            throw CLIFailure(
                code: 6,
                message: "--prefix '' would remove every item; to empty the cache, run `sync-agent cache purge --all`")
        }
        var key: CacheKey?
        if let url { key = try CacheKeyArgument.key(url, parameters.list()) }
        let store = try folder.openStore()
        defer { folder.warnAboutDamageFoundWhileRunning(store) }
        var removed: Int
        do {
            if let key {
                // The URL names an item, or an image original (with its variants).
                var count = try await store.removeItems(for: key)
                if let url = key.url.flatMap(URL.init(string:)),
                    let image = try? CacheKey(url: url, context: ImageCatalog.originalContext)
                {
                    count += try await store.removeItems(for: image)
                }
                removed = count
            } else {
                removed = try await store.removeItems(matching: ItemQuery().urlPrefix(prefix ?? ""))
            }
            // An image original's variants go with it.
            removed += (try? await ImageCatalog.removeOrphanVariants(in: store)) ?? 0
            try await store.close()
        } catch {
            throw CLIFailure(cache: error)
        }
        try Console.output(try removalReport(removed, json: json))
    }
}

/// A URL argument and `--param`s as the key they name.
enum CacheKeyArgument {
    static func key(_ text: String, _ parameters: RequestParameters) throws -> CacheKey {
        let url = try parseCacheURL(text)
        do {
            return try CacheKey(url: url, parameters: parameters)
        } catch {
            throw CLIFailure(cache: error)
        }
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
    @Flag(name: .long, help: "Print a JSON object: removed.") var json = false

    func validate() throws {
        if expired == all { throw ValidationError("give either --expired or --all") }
    }

    func run() async throws {
        let store = try folder.openStore()
        defer { folder.warnAboutDamageFoundWhileRunning(store) }
        var removed: Int
        do {
            removed = expired ? try await store.removeExpired() : try await store.removeItems(matching: ItemQuery())
            removed += (try? await ImageCatalog.removeOrphanVariants(in: store)) ?? 0
            try await store.close()
        } catch {
            throw CLIFailure(cache: error)
        }
        try Console.output(try removalReport(removed, json: json))
    }
}

/// `sync-agent cache stats`.
struct CacheStatsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Show the item count, bytes, limit, pinned and expired items, and what opening repaired.")

    @OptionGroup var folder: CacheFolderOptions

    @Flag(
        name: .long,
        help:
            "Print a JSON object: count, bytes (the values'), limit, footprint (the folder's, which the limit bounds), pinned, pinnedBytes, expired, repairs, images (originals, variants, made, hits, refusals)."
    )
    var json = false

    func run() async throws {
        let store = try folder.openStore()
        defer { folder.warnAboutDamageFoundWhileRunning(store) }
        let statistics: CacheStatistics
        do {
            statistics = try await store.statistics()
        } catch {
            throw CLIFailure(cache: error)
        }
        var repairs = store.openingRepairs
        // Damage met by this command's own reads counts as well: the numbers above are the new index's.
        if store.indexesSetAsideSinceOpening > 0 { repairs.indexSetAside = true }
        let footprint = await store.footprint()
        let images: (originals: Int, variants: Int, counts: ImageCatalog.Counts)
        do {
            images = (
                try await store.count(matching: ItemQuery().context(ImageCatalog.originalContext)),
                try await store.count(matching: ItemQuery().context(ImageCatalog.variantContext)),
                try await ImageCatalog.storedCounts(in: store)
            )
        } catch {
            throw CLIFailure(cache: error)
        }
        if json {
            let object: [String: Any] = [
                "images": [
                    "originals": images.originals, "variants": images.variants, "made": images.counts.made,
                    "hits": images.counts.hits, "refusals": images.counts.refusals,
                ],
                "count": statistics.count, "bytes": statistics.bytes, "limit": statistics.limit, "footprint": footprint,
                "pinned": statistics.pinned,
                "pinnedBytes": statistics.pinnedBytes, "expired": statistics.expired,
                "repairs": [
                    "orphanFiles": repairs.orphanFiles, "orphanRows": repairs.orphanRows,
                    "statsRepaired": repairs.statsRepaired, "indexSetAside": repairs.indexSetAside,
                ],
            ]
            try Console.output(try cacheJSON(object))
            return
        }
        var repaired: [String] = []
        if repairs.indexSetAside { repaired.append("damaged index set aside") }
        if repairs.statsRepaired { repaired.append("totals counted again") }
        if repairs.orphanRows > 0 { repaired.append("\(repairs.orphanRows) items without a whole value dropped") }
        if repairs.orphanFiles > 0 { repaired.append("\(repairs.orphanFiles) stray files removed") }
        try Console.output(
            """
            count:   \(statistics.count)
            bytes:   \(statistics.bytes)
            limit:   \(statistics.limit)
            disk:    \(footprint) (the folder: values, index, log and folders; \(footprint <= statistics.limit ? "at most the limit" : "above the limit: the index, its log and the folder alone take about 130 KiB, or writers are still committing"))
            pinned:  \(statistics.pinned) (\(statistics.pinnedBytes) bytes)
            expired: \(statistics.expired)
            images:  \(images.originals) originals, \(images.variants) variants; \(images.counts.made) variants made, \(images.counts.hits) hits, \(images.counts.refusals) refused (every process, since the folder was made)
            repaired: \(repaired.isEmpty ? "nothing" : repaired.joined(separator: ", "))

            """)
    }
}

extension CLIFailure {
    /// A cache failure's exit code: 3 network with nothing stored, 22 or 23 when the origin's
    /// failing status (a 503, a 429) is the answer but its body is not at hand (another process
    /// fetched it, or the origin's backoff answered), 8 an offline miss, 5 the cache folder or
    /// its limit, 6 a bad option value or a task limit that left the transport no thread (as
    /// `sync`).
    package init(cache error: ItemCacheError) {
        let code: Int32 =
            switch error.code {
            case .fetch where (error.underlying as? TransportError)?.code == .threadLimit: 6
            case .fetch where (500...599).contains(error.httpStatus ?? 0): CacheGetCommand.serverErrorExit
            case .fetch where (400...499).contains(error.httpStatus ?? 0): CacheGetCommand.clientErrorExit
            case .fetch: 3
            case .notCached: 8
            case .storage, .tooLarge, .folderRefused, .damagedIndex: 5
            case .invalidKey, .invalidExpiry: 6
            case .cancelled: 130
            case .rejected: 4
            default: 1
            }
        self.init(code: code, message: Self.namingFlags(error.message))
    }
}
