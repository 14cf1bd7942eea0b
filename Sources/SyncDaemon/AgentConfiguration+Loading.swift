import ContentSync
internal import DateText
import FileKit
import Foundation
import Transport
import Yams

extension AgentConfiguration {
    /// The largest config file read: 4 MiB.
    static let largestFile = 4 << 20

    /// Reads the YAML config file at `path`, resolving secrets from `environment` and files, and
    /// relative paths against the file's folder. Throws a ``ConfigurationError`` listing every
    /// problem with its line.
    ///
    /// ```yaml
    /// http: 127.0.0.1:9464          # /metrics, /healthz, /readyz (off when absent)
    /// defaults:                     # any storage key but base-url, dir and state
    ///   interval: 5m
    /// storages:
    ///   docs:
    ///     base-url: https://raw.githubusercontent.com/acme/site/main/storage
    ///     dir: /srv/mirror/docs
    ///     headers:
    ///       Authorization: {env: GITHUB_TOKEN, prefix: "token "}
    ///     hooks:
    ///       post-update:
    ///         - command: [/usr/bin/systemctl, reload, nginx]
    /// ```
    public static func load(path: String, environment: [String: String] = ProcessInfo.processInfo.environment)
        throws(ConfigurationError) -> AgentConfiguration
    {
        let absolute = FileSystem.absolutePath(path)
        let text: String
        do {
            // Bounded, and never blocked on a FIFO: a config of thousands of folders is well under.
            text = try SmallTextFile.read(absolute, limit: Self.largestFile)
        } catch {
            let remedy =
                switch error.description {
                case "is a folder, not a file": "give the config file's path"
                case let other where other.hasPrefix("cannot"): "check its permissions (the agent's user must read it)"
                default: error.remedy
                }
            throw ConfigurationError(
                path: path,
                problems: [.init(line: nil, message: "cannot read the config file: it \(error.description): \(remedy)")]
            )
        }
        var reader = ConfigReader(
            folder: (absolute as NSString).deletingLastPathComponent, environment: environment, configFile: absolute)
        guard var configuration = reader.read(text) else {
            // In the file's order, as a reader fixes them.
            var error = ConfigurationError(
                path: path,
                problems: reader.problems.sorted { ($0.line ?? 0, $0.column ?? 0) < ($1.line ?? 0, $1.column ?? 0) })
            error.unlisted = reader.unlisted
            throw error
        }
        configuration.path = absolute
        return configuration
    }

    /// The keys a storage takes, for the reference and for suggestions.
    static let storageKeys = [
        "base-url", "dir", "state", "interval", "jitter", "splay", "max-backoff", "max-failures", "concurrency",
        "force", "headers", "trust-key", "hooks", "full-check-interval",
    ]
}

/// Walks the YAML tree by hand, so that every problem names its line, and unknown keys are
/// refused (a typo such as `intreval` would otherwise be ignored in silence).
struct ConfigReader {
    let folder: String
    let environment: [String: String]
    /// The config file's absolute path, when it is read from one (not kept inside any storage's folder).
    let configFile: String?
    private(set) var problems: [ConfigurationProblem] = []
    /// Problems found past ``problemLimit``, counted, not listed: a file of 200,000 unknown keys
    /// would print 200,000 lines (and took minutes).
    private(set) var unlisted = 0
    static let problemLimit = 500
    /// Each problem's place and message, so that one met again is told in constant time (a
    /// file of 20,000 unknown keys took 32 s when each was compared with every earlier one).
    private var told: Set<String> = []
    /// The nodes ``expandingMerges(_:)`` may still visit: aliases of aliases make a short file
    /// an exponential tree (a "billion laughs"), which is refused, not walked.
    private var nodesLeft = ConfigReader.largestTree
    /// The most YAML nodes a config expands to, its aliases followed: far above any real fleet's.
    static let largestTree = 200_000

    init(folder: String, environment: [String: String], configFile: String? = nil) {
        self.folder = folder
        self.environment = environment
        self.configFile = configFile
    }

    mutating func read(_ text: String) -> AgentConfiguration? {
        let root: Node?
        do {
            root = try Yams.compose(yaml: text)
        } catch let error as YamlError {
            problems.append(Self.problem(error))
            return nil
        } catch {
            problems.append(.init(line: nil, message: "\(error)"))
            return nil
        }
        guard let root = root.map({ expandingMerges($0) }), let top = mapping(root, "the file") else {
            if problems.isEmpty {
                problems.append(.init(line: 1, message: "the file is empty: it needs a `storages:` mapping"))
            }
            return nil
        }
        var configuration = AgentConfiguration(storages: [])
        var defaults: Node.Mapping?
        var storagesNode: (key: Node, value: Node)?
        respellings(in: top, at: "the top level")
        for (key, value) in top {
            switch Self.field(key) {
            case "http":
                if let listen = string(value, "http") {
                    do {
                        _ = try AgentEndpoint.Address(parsing: listen)
                        configuration.endpoint = listen
                    } catch {
                        problem(value, "http: \(error)")
                    }
                }
            case "log-format":
                if let format = string(value, "log-format") {
                    if ["text", "journald", "json"].contains(format) {
                        configuration.logFormat = format
                    } else {
                        problem(value, "log-format '\(format)': use text, journald or json")
                    }
                }
            case "defaults":
                defaults = mapping(value, "defaults")
            case "storages":
                storagesNode = (key, value)
            default:
                unknown(key, in: "the top level", known: ["storages", "defaults", "http", "log-format"])
            }
        }
        guard let storagesNode else {
            problems.append(
                .init(
                    line: 1,
                    message:
                        "no `storages:` mapping: list each storage under it by name (see `sync-agent check-config --help`)"
                ))
            return nil
        }
        guard let storages = storageEntries(storagesNode.value) else { return nil }
        // A list whose items were each refused already said why; "empty" would be a second,
        // wrong reason.
        if storages.count == 0, Self.isEmptyCollection(storagesNode.value) {
            problem(storagesNode.key, "`storages:` is empty: name at least one storage under it")
        }
        if let defaults {
            respellings(in: defaults, at: "defaults")
            for (key, _) in defaults where ["base-url", "dir", "state"].contains(Self.field(key) ?? "") {
                problem(key, "defaults.\(Self.field(key) ?? ""): each storage has its own; move it under the storage")
            }
            // Once, not once a storage.
            for (key, _) in defaults where !AgentConfiguration.storageKeys.contains(Self.field(key) ?? "") {
                unknown(key, in: "defaults", known: AgentConfiguration.storageKeys)
            }
        }
        for (key, value) in storages {
            guard let name = string(key, "a storage name") else { continue }
            if name.isEmpty || !name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) {
                problem(
                    key,
                    "storage name '\(name)': use letters, digits, '.', '_' and '-' (it names the storage in logs, metrics and hooks)"
                )
                continue
            }
            if let settings = storage(named: name, value, defaults: defaults) {
                configuration.storages.append(settings)
            }
        }
        checkOverlaps(configuration.storages, storages)
        return problems.isEmpty ? configuration : nil
    }

    /// Finds two spellings of one key in `mapping` (`dir:` and `folder:`, `base_url:` and
    /// `base-url:`), a problem each: which one counted depended on their order, silently. YAML
    /// itself refuses the same spelling twice. Returns the later spellings, to be skipped.
    @discardableResult
    private mutating func respellings(in mapping: Node.Mapping, at place: String) -> [Node] {
        var first: [String: Node] = [:]
        var later: [Node] = []
        for (key, _) in mapping {
            guard let field = Self.field(key) else { continue }
            guard let earlier = first[field] else {
                first[field] = key
                continue
            }
            later.append(key)
            problem(
                key,
                "\(place): '\(key.string ?? field)' gives \(field) again ('\(earlier.string ?? field)' on line \(earlier.mark.map { "\($0.line)" } ?? "?") gives it); keep one"
            )
        }
        return later
    }

    /// A key of the file's own schema: `base_url` reads as `base-url`, and the other names people
    /// write for a key (`url`, `folder`, `state-path`, `trust-keys`) read as it.
    static func field(_ key: Node) -> String? {
        key.string.map { text in
            let dashed = text.replacingOccurrences(of: "_", with: "-")
            return aliases[dashed] ?? dashed
        }
    }

    static let aliases = [
        "url": "base-url", "directory": "dir", "folder": "dir", "state-path": "state", "state-database": "state",
        "trust-keys": "trust-key", "header": "headers", "hook": "hooks",
    ]

    /// `storages:` as a mapping of names to settings, or as a list of settings that each carry
    /// `name:`; either way, (name, settings) pairs.
    private mutating func storageEntries(_ node: Node) -> Node.Mapping? {
        guard case .sequence(let list) = node else { return mapping(node, "storages") }
        var pairs: [(Node, Node)] = []
        for (index, item) in list.enumerated() {
            guard case .mapping(let fields) = item else {
                problem(item, "storages[\(index)] must be a mapping with name:, base-url: and dir:")
                continue
            }
            guard let name = fields.first(where: { Self.field($0.key) == "name" }) else {
                problem(
                    item,
                    "storages[\(index)]: no name: give each storage a name (it names the storage in logs, metrics and hooks)"
                )
                continue
            }
            let rest = Node.Mapping(
                fields.filter { Self.field($0.key) != "name" }.map { ($0.key, $0.value) }, .implicit, .any, fields.mark)
            pairs.append((name.value, .mapping(rest)))
        }
        let names = pairs.compactMap { $0.0.string }
        for (name, count) in Dictionary(names.map { ($0, 1) }, uniquingKeysWith: +) where count > 1 {
            problem(
                pairs.last { $0.0.string == name }!.0,
                "the storage name \(name) appears \(count) times; names must be unique")
        }
        return Node.Mapping(pairs, .implicit, .any, node.mark)
    }

    // MARK: - One storage

    private mutating func storage(named name: String, _ node: Node, defaults: Node.Mapping?) -> StorageSettings? {
        guard let fields = mapping(node, "storages.\(name)") else { return nil }
        let start = problems.count + unlisted
        var values: [String: (key: Node, value: Node)] = [:]
        // Not the keys `defaults` may not set (reported there once): applied, they made
        // follow-on problems on every storage (a shared state database no storage named).
        for (key, value) in defaults ?? Node.Mapping([]) {
            if let name = Self.field(key), !["base-url", "dir", "state"].contains(name) { values[name] = (key, value) }
        }
        let respelled = respellings(in: fields, at: "storages.\(name)")
        for (key, value) in fields where !respelled.contains(where: { $0 == key }) {
            guard let field = Self.field(key), AgentConfiguration.storageKeys.contains(field) else {
                unknown(key, in: "storages.\(name)", known: AgentConfiguration.storageKeys)
                continue
            }
            values[field] = (key, value)
        }
        let where_ = "storages.\(name)"
        guard let baseNode = values["base-url"]?.value else {
            problem(node, "\(where_): no base-url: give the storage folder's URL (the one holding RXCacheConfig/)")
            return nil
        }
        guard let dirNode = values["dir"]?.value else {
            problem(node, "\(where_): no dir: give the local folder to keep in step")
            return nil
        }
        guard let baseText = string(baseNode, "\(where_).base-url"), let directory = string(dirNode, "\(where_).dir")
        else { return nil }
        // What the client takes (StorageLayout): http or https with a host.
        guard let baseURL = URL(string: baseText), let scheme = baseURL.scheme?.lowercased(),
            ["http", "https"].contains(scheme), baseURL.host != nil
        else {
            problem(baseNode, "\(where_).base-url '\(Redaction.text(baseText))' is not an http(s) URL")
            return nil
        }
        var settings = StorageSettings(
            name: name, baseURL: baseURL, directory: resolve(directory),
            statePath: values["state"].flatMap { string($0.value, "\(where_).state") }.map(resolve))
        // What the agent would refuse when it starts the storage, found now (check-config, and
        // a reload, which runs it first): a dir that is a file, a state that is a folder.
        var info = stat()
        if lstat(settings.directory, &info) == 0, info.st_mode & S_IFMT == S_IFLNK {
            // The agent swaps the folder itself at each update, so it refuses a link there
            // (even one whose target is not made yet).
            problem(
                dirNode,
                "\(where_).dir \(settings.directory) is a symlink; give the real folder's path (an update replaces the folder itself)"
            )
        } else if stat(settings.directory, &info) == 0, info.st_mode & S_IFMT != S_IFDIR {
            problem(dirNode, "\(where_).dir \(settings.directory) exists and is not a folder; give a folder's path")
        }
        if stat(settings.statePath, &info) == 0, info.st_mode & S_IFMT != S_IFREG {
            problem(
                values["state"]?.value ?? dirNode,
                "\(where_).state \(settings.statePath) exists and is not a file; give the state database's file path")
        }
        if let (_, value) = values["interval"], let interval = duration(value, "\(where_).interval") {
            if interval < .seconds(1) {
                problem(value, "\(where_).interval must be at least 1s")
            } else {
                settings.interval = interval
            }
        }
        if let (_, value) = values["jitter"], let jitter = number(value, "\(where_).jitter") {
            if (0...0.9).contains(jitter) {
                settings.jitter = jitter
            } else {
                problem(value, "\(where_).jitter must be between 0 and 0.9, such as 0.1 for ±10%")
            }
        }
        if let (_, value) = values["splay"], let splay = duration(value, "\(where_).splay", allowingZero: true) {
            settings.splay = splay
        }
        if let (_, value) = values["max-backoff"], let backoff = duration(value, "\(where_).max-backoff") {
            settings.maxBackoff = backoff
        }
        if let (_, value) = values["full-check-interval"],
            let interval = duration(value, "\(where_).full-check-interval", allowingZero: true)
        {
            settings.fullCheckInterval = interval
        }
        if let (_, value) = values["max-failures"], let count = integer(value, "\(where_).max-failures") {
            if count >= 0 {
                settings.maxFailures = count
            } else {
                problem(value, "\(where_).max-failures must be 0 (never) or more")
            }
        }
        if let (_, value) = values["concurrency"], let count = integer(value, "\(where_).concurrency") {
            if (1...64).contains(count) {
                settings.concurrency = count
            } else {
                problem(value, "\(where_).concurrency must be between 1 and 64")
            }
        }
        if let (_, value) = values["force"], let force = bool(value, "\(where_).force") { settings.force = force }
        if let (_, value) = values["headers"], let headers = mapping(value, "\(where_).headers") {
            for (key, value) in headers {
                guard let headerName = string(key, "a header name") else { continue }
                if let header = header(headerName, value, where_) { settings.headers.append(header) }
            }
        }
        if let (_, value) = values["trust-key"] {
            let nodes: [Node]
            if case .sequence(let list) = value { nodes = Array(list) } else { nodes = [value] }
            for node in nodes {
                guard let path = string(node, "\(where_).trust-key") else { continue }
                if let key = trustedKey(resolve(path), node, where_) { settings.trustedKeys.append(key) }
            }
        }
        if let (_, value) = values["hooks"], let hooks = mapping(value, "\(where_).hooks") {
            for (key, value) in hooks {
                switch Self.field(key) {
                case "pre-switch": settings.preSwitchHooks = hookList(value, "\(where_).hooks.pre-switch")
                case "post-update": settings.postUpdateHooks = hookList(value, "\(where_).hooks.post-update")
                default: unknown(key, in: "\(where_).hooks", known: ["pre-switch", "post-update"])
                }
            }
        }
        // What the agent would refuse when it starts the storage, found here, with its line:
        // check-config then refuses what watch would.
        if baseURL.query != nil || baseURL.fragment != nil {
            problem(
                baseNode,
                "\(where_).base-url '\(Redaction.text(baseText))' has a query or fragment: give the plain folder URL, and a token as a header (headers: {Authorization: {env: VARIABLE}})"
            )
        }
        do {
            try settings.clientConfiguration(transport: nil, logger: nil).validateLayout()
        } catch {
            let node = error.setting == .stateDatabasePath ? values["state"]?.value ?? dirNode : dirNode
            problem(node, "\(where_): \(error.message)")
        }
        return problems.count + unlisted == start ? settings : nil
    }

    /// `Name: value`, or `Name: {env: VAR}` / `{file: PATH}` with an optional `prefix:`.
    private mutating func header(_ name: String, _ node: Node, _ where_: String) -> StorageSettings.Header? {
        let label = "\(where_).headers.\(name)"
        if let problem = StorageSettings.Header.problem(name: name, value: "") {
            self.problem(node, "\(label): \(problem)")
            return nil
        }
        if case .scalar = node, let value = node.string {
            if let problem = StorageSettings.Header.problem(name: name, value: value) {
                self.problem(node, "\(label): \(problem)")
                return nil
            }
            return StorageSettings.Header(name: name, value: value)
        }
        guard let fields = mapping(node, label) else { return nil }
        var prefix = ""
        var resolved: (value: String, source: String)?
        let sources = fields.compactMap { Self.field($0.key) }.filter { $0 == "env" || $0 == "file" }
        if sources.count > 1 {
            // Which one would win is not something to guess for a secret.
            problem(node, "\(label): give either env: or file:, not both")
            return nil
        }
        for (key, value) in fields {
            switch Self.field(key) {
            case "prefix":
                prefix = string(value, "\(label).prefix") ?? ""
            case "env":
                guard let variable = string(value, "\(label).env") else { continue }
                guard StorageSettings.Header.isVariableName(variable) else {
                    // Not quoted back: a value given by mistake where the name belongs is a secret.
                    problem(
                        value,
                        "\(label).env must be the name of an environment variable (letters, digits and _), "
                            + "not the header's value; put the value in a variable and give its name")
                    continue
                }
                guard let secret = environment[variable], !secret.isEmpty else {
                    problem(
                        value,
                        "\(label): the environment variable \(variable) is not set (or empty); set it for the service, "
                            + "e.g. in its EnvironmentFile=")
                    continue
                }
                resolved = (secret, "env \(variable)")
            case "file":
                guard let path = string(value, "\(label).file").map(resolve) else { continue }
                // Each refusal says what the file is (a FIFO, a folder, not UTF-8, too large), as
                // the config file's own do; a FIFO is never waited on.
                let text: String
                do throws(SmallTextFile.Refusal) {
                    text = try SmallTextFile.read(path)
                } catch {
                    let remedy =
                        error.description.hasPrefix("cannot")
                        ? "check that the agent's user can read it" : error.remedy
                    problem(value, "\(label): the secret file \(path) \(error.description); \(remedy)")
                    continue
                }
                let secret = text.trimmingCharacters(in: .newlines)
                guard !secret.isEmpty else {
                    problem(value, "\(label): the secret file \(path) is empty")
                    continue
                }
                resolved = (secret, "file \(path)")
            default:
                unknown(key, in: label, known: ["env", "file", "prefix"])
            }
        }
        guard let resolved else {
            if problems.isEmpty || fields.count == 0 {
                problem(node, "\(label): give a value, or {env: VARIABLE} or {file: PATH} for a secret")
            }
            return nil
        }
        if let problem = StorageSettings.Header.problem(name: name, value: prefix + resolved.value) {
            self.problem(node, "\(label): \(problem)")
            return nil
        }
        return StorageSettings.Header(
            name: name, value: prefix + resolved.value, source: resolved.source,
            secret: prefix.isEmpty ? nil : resolved.value)
    }

    private mutating func trustedKey(_ path: String, _ node: Node, _ where_: String) -> String? {
        do {
            return try TrustedKeyFile.read(path)
        } catch {
            problem(node, "\(where_).trust-key \(error)")
            return nil
        }
    }

    /// `- command: [/usr/bin/x, arg]` with optional `timeout:` and `name:`; a bare list or string is the command.
    private mutating func hookList(_ node: Node, _ label: String) -> [Hook] {
        guard case .sequence(let list) = node else {
            problem(node, "\(label) must be a list of hooks, each `- command: [/path/to/program, arg, …]`")
            return []
        }
        var hooks: [Hook] = []
        for (index, item) in list.enumerated() {
            let itemLabel = "\(label)[\(index)]"
            var commandNode: Node?
            var timeout: Duration = .seconds(60)
            var name: String?
            if case .mapping(let fields) = item {
                for (key, value) in fields {
                    switch Self.field(key) {
                    case "command": commandNode = value
                    case "timeout": if let parsed = duration(value, "\(itemLabel).timeout") { timeout = parsed }
                    case "name": name = string(value, "\(itemLabel).name")
                    default: unknown(key, in: itemLabel, known: ["command", "timeout", "name"])
                    }
                }
            } else {
                commandNode = item
            }
            guard let commandNode else {
                problem(item, "\(itemLabel): no command: give `command: [/path/to/program, arg, …]`")
                continue
            }
            let command: [String]
            switch commandNode {
            case .sequence(let words): command = words.compactMap { string($0, "\(itemLabel).command") }
            case .scalar: command = commandNode.string.map { [$0] } ?? []
            default:
                problem(commandNode, "\(itemLabel).command must be a list: [/path/to/program, arg, …]")
                continue
            }
            guard let program = command.first, !program.isEmpty else {
                problem(commandNode, "\(itemLabel).command is empty")
                continue
            }
            // Found now as the runner will find it, a relative path taken from the file's folder.
            let located = program.contains("/") && !program.hasPrefix("/") ? "\(folder)/\(program)" : program
            let executable: String
            switch HookRunner.resolve(located, path: environment["PATH"]) {
            case .success(let path):
                executable = path
            case .failure(let failure):
                problem(
                    commandNode,
                    "\(itemLabel).command: \(failure.text) (no shell runs it: write [/bin/sh, -c, '…'] for one)")
                continue
            }
            hooks.append(
                Hook(
                    command: [executable] + command.dropFirst(), timeout: timeout,
                    name: name ?? (program as NSString).lastPathComponent))
        }
        return hooks
    }

    // MARK: - Whole-file checks

    /// Two storages may not share a folder or a state database, nor nest one folder in another:
    /// each would undo the other's updates. A storage's folders are its `dir` and the staging
    /// folder beside it (`.NAME.content-sync`), which its updates empty and replace too: a state
    /// database or another storage's `dir` there was deleted by the first update.
    private mutating func checkOverlaps(_ storages: [StorageSettings], _ nodes: Node.Mapping) {
        let lines = Dictionary(
            nodes.compactMap { key, _ in key.string.map { ($0, key) } }, uniquingKeysWith: { first, _ in first })
        /// The folders each storage's updates replace, each with how a message names it: made
        /// once, and found by path (a file of 500 storages took 6 s when every pair was compared).
        let folders: [[(path: String, shown: String)]] = storages.map { storage in
            let staging = SyncConfiguration.stagingFolder(for: storage.directory)
            return [
                (storage.directory, "storages.\(storage.name)'s folder \(storage.directory)"),
                (staging, "storages.\(storage.name)'s staging folder \(staging)"),
            ]
        }
        var byPath: [String: [(storage: Int, order: Int)]] = [:]
        for (index, owned) in folders.enumerated() {
            for (order, folder) in owned.enumerated() { byPath[folder.path, default: []].append((index, order)) }
        }
        /// The folders (of any storage) that are `path` or hold it, shallowest first.
        func holders(of path: String) -> [(storage: Int, order: Int)] {
            var found: [(storage: Int, order: Int)] = []
            var prefix = ""
            for component in path.split(separator: "/", omittingEmptySubsequences: false).dropFirst() {
                prefix += "/" + component
                found += byPath[prefix] ?? []
            }
            return found
        }
        for storage in storages {
            let key = lines[storage.name] ?? Node("")
            // A state database inside a storage's folder is deleted by its next switch, and a
            // config file there is content the update replaces (or `force` deletes).
            // Files the agent reads again on each reload or run (a secret file, a hook's
            // program) in a dir are deleted by the first full check or restore as extra files.
            let read =
                storage.headers.compactMap { header in
                    header.source.hasPrefix("file ")
                        ? ("the secret file of \(header.name)", String(header.source.dropFirst(5))) : nil
                }
                + (storage.preSwitchHooks + storage.postUpdateHooks).compactMap { hook in
                    hook.command.first.map { ("the hook program", $0) }
                }
            /// The folders strictly above `path`, in storage order (as every pair was met).
            func above(_ path: String) -> [(path: String, shown: String)] {
                holders(of: path).filter { folders[$0.storage][$0.order].path != path }
                    .sorted { ($0.storage, $0.order) < ($1.storage, $1.order) }
                    .map { folders[$0.storage][$0.order] }
            }
            for folder in above(storage.statePath) {
                problem(
                    key,
                    "storages.\(storage.name).state \(storage.statePath) lies inside \(folder.shown), where an update "
                        + "would delete it; keep state databases outside every dir and its staging folder")
            }
            for (what, path) in read {
                for folder in above(path) {
                    problem(
                        key,
                        "storages.\(storage.name): \(what) \(path) lies inside \(folder.shown), where an update would "
                            + "delete it as a file the storage does not have; keep it outside every dir")
                }
            }
            if let file = configFile {
                for folder in above(file) {
                    problem(
                        key,
                        "the config file \(file) lies inside \(folder.shown), where an update would replace or delete it; "
                            + "keep it outside every dir")
                }
            }
        }
        // For each storage, the other storages' folders at or below one of its own: (that
        // storage, that folder's order, its own folder's order).
        var held = [[(storage: Int, order: Int, holder: Int)]](repeating: [], count: storages.count)
        for (index, owned) in folders.enumerated() {
            for (order, folder) in owned.enumerated() {
                for holder in holders(of: folder.path) where holder.storage != index {
                    held[holder.storage].append((index, order, holder.order))
                }
            }
        }
        var dirs: [String: Int] = [:]
        var states: [String: Int] = [:]
        for (index, storage) in storages.enumerated() {
            let key = lines[storage.name] ?? Node("")
            // The earlier storages this one meets, each with the first pair of their folders
            // that meet (this one's folders in order, then the other's).
            var met: [Int: (mine: Int, theirs: Int)] = [:]
            func meet(_ other: Int, _ mine: Int, _ theirs: Int) {
                guard other < index else { return }
                if let found = met[other], (found.mine, found.theirs) <= (mine, theirs) { return }
                met[other] = (mine, theirs)
            }
            for (mine, folder) in folders[index].enumerated() {
                // Theirs at or above mine.
                for holder in holders(of: folder.path) { meet(holder.storage, mine, holder.order) }
            }
            // Theirs below mine.
            for inner in held[index] { meet(inner.storage, inner.holder, inner.order) }
            let sameDir = dirs[storage.directory]
            if let other = sameDir {
                problem(
                    key,
                    "storages.\(storage.name).dir \(storage.directory) is also storages.\(storages[other].name)'s folder; give each storage its own"
                )
            }
            if let other = states[storage.statePath], other != sameDir {
                problem(
                    key,
                    "storages.\(storage.name).state \(storage.statePath) is also storages.\(storages[other].name)'s state database; give each its own"
                )
            }
            for (other, pair) in met.sorted(by: { $0.key < $1.key })
            where storages[other].directory != storage.directory {
                let (mine, theirs) = (folders[index][pair.mine], folders[other][pair.theirs])
                problem(
                    key,
                    "\(mine.shown) and \(theirs.shown) \(mine.path == theirs.path ? "are one folder" : "nest"); "
                        + "each update would replace the other's files")
            }
            if dirs[storage.directory] == nil { dirs[storage.directory] = index }
            if states[storage.statePath] == nil { states[storage.statePath] = index }
        }
    }

    // MARK: - Typed reads

    private func resolve(_ path: String) -> String {
        if path.hasPrefix("/") { return path }
        if path == "~" || path.hasPrefix("~/") { return (environment["HOME"] ?? NSHomeDirectory()) + path.dropFirst() }
        return FileSystem.absolutePath("\(folder)/\(path)")
    }

    private mutating func mapping(_ node: Node, _ label: String) -> Node.Mapping? {
        if case .mapping(let mapping) = node { return mapping }
        problem(node, "\(label) must be a mapping of `key: value` lines")
        return nil
    }

    /// A scalar's text. A NUL (YAML's `"\\0"` escape) is refused for every field: no path,
    /// URL, name or command can hold one, and a path was cut at it by the system calls (the
    /// folder synced was another than the one named).
    private mutating func string(_ node: Node, _ label: String) -> String? {
        if case .scalar(let scalar) = node {
            guard !scalar.string.utf8.contains(0) else {
                problem(node, "\(label) contains a NUL character (\\0); remove it")
                return nil
            }
            return scalar.string
        }
        problem(node, "\(label) must be a single value")
        return nil
    }

    /// Whether `node` is a mapping or a list with no entries (or no value at all).
    private static func isEmptyCollection(_ node: Node) -> Bool {
        switch node {
        case .mapping(let fields): fields.count == 0
        case .sequence(let items): items.count == 0
        case .scalar(let scalar): scalar.string.isEmpty
        default: false
        }
    }

    private mutating func duration(_ node: Node, _ label: String, allowingZero: Bool = false) -> Duration? {
        guard let text = string(node, label) else { return nil }
        guard let duration = DurationText.parse(text, bareSeconds: true, allowingZero: allowingZero) else {
            problem(node, "\(label) '\(text)' is not a duration: give \(DurationText.help), or seconds")
            return nil
        }
        return duration
    }

    private mutating func number(_ node: Node, _ label: String) -> Double? {
        guard let text = string(node, label) else { return nil }
        guard let value = DecimalText.parse(text) else {
            problem(node, "\(label) '\(text)' is not a number such as 0.1")
            return nil
        }
        return value
    }

    private mutating func integer(_ node: Node, _ label: String) -> Int? {
        guard let text = string(node, label) else { return nil }
        guard let value = Int(text) else {
            problem(node, "\(label) '\(text)' is not a whole number")
            return nil
        }
        return value
    }

    private mutating func bool(_ node: Node, _ label: String) -> Bool? {
        guard let text = string(node, label) else { return nil }
        switch text.lowercased() {
        case "true", "yes", "on": return true
        case "false", "no", "off": return false
        default:
            problem(node, "\(label) '\(text)' is not true or false")
            return nil
        }
    }

    private mutating func unknown(_ key: Node, in place: String, known: [String]) {
        // Past the limit it is only counted: no suggestion to work out.
        guard problems.count < Self.problemLimit else {
            unlisted += 1
            return
        }
        let name = key.string ?? "?"
        // Only a key within 2 edits is suggested, so only keys within 2 characters' length are
        // measured, each once.
        let close = known.filter { abs($0.count - name.count) <= 2 }.map { ($0, Self.distance($0, name)) }
            .filter { $0.1 <= 2 }.min { $0.1 < $1.1 }?.0
        let hint = close.map { " (did you mean \($0)?)" } ?? ""
        problem(key, "unknown key '\(name)' in \(place)\(hint); known: \(known.joined(separator: ", "))")
    }

    /// `node` with YAML's merge keys (`<<: *defaults`, YAML 1.1's merge type, as docker-compose
    /// files use them) expanded at every level: a mapping's own keys win over merged ones, and an
    /// earlier merged mapping over a later one. A merge of anything but a mapping or a list of
    /// mappings is a problem.
    private mutating func expandingMerges(_ node: Node) -> Node {
        guard nodesLeft > 0 else { return node }
        nodesLeft -= 1
        if nodesLeft == 0 {
            problem(
                node,
                "the file expands to more than \(Self.largestTree) YAML nodes through its aliases (*name); write the settings out, or use fewer aliases of aliases"
            )
            return node
        }
        switch node {
        case .mapping(let mapping):
            var own: [(Node, Node)] = []
            var merged: [(Node, Node)] = []
            for (key, value) in mapping {
                guard key.tag.rawValue == Tag.Name.merge.rawValue else {
                    own.append((key, expandingMerges(value)))
                    continue
                }
                let sources: [Node]
                if case .sequence(let list) = value { sources = Array(list) } else { sources = [value] }
                for source in sources {
                    guard case .mapping(let pairs) = expandingMerges(source) else {
                        // At the merge key: an alias's node has its anchor's place, lines away.
                        problem(key, "a merge key (<<) takes a mapping or a list of mappings (<<: *defaults)")
                        continue
                    }
                    for (mergedKey, mergedValue) in pairs where !merged.contains(where: { $0.0 == mergedKey }) {
                        merged.append((mergedKey, mergedValue))
                    }
                }
            }
            let pairs = own + merged.filter { pair in !own.contains { $0.0 == pair.0 } }
            return .mapping(Node.Mapping(pairs, mapping.tag, mapping.style, mapping.mark))
        case .sequence(let list):
            return .sequence(Node.Sequence(list.map { expandingMerges($0) }, list.tag, list.style, list.mark))
        default:
            return node
        }
    }

    private mutating func problem(_ node: Node, _ message: String) {
        let (line, column) = (node.mark?.line, node.mark?.column)
        // Once: an alias's node is met at each use, and a merge of a list at each member.
        guard told.insert("\(line ?? -1):\(column ?? -1):\(message)").inserted else { return }
        guard problems.count < Self.problemLimit else {
            unlisted += 1
            return
        }
        problems.append(ConfigurationProblem(line: line, column: column, message: message))
    }

    private static func problem(_ error: YamlError) -> ConfigurationProblem {
        switch error {
        case .scanner(_, let problem, let mark, _), .parser(_, let problem, let mark, _),
            .composer(_, let problem, let mark, _):
            // libyaml's words name its own API: say what the file does instead.
            let said =
                problem.hasPrefix("Maximum nesting level reached")
                ? "it nests more than 1,000 levels deep (a config needs a few); flatten it" : problem
            return ConfigurationProblem(line: mark.line, column: mark.column, message: "not valid YAML: \(said)")
        case .reader(let problem, let offset, let value, let yaml):
            // A character YAML refuses (a NUL, a control character): its place, on one line.
            let place = offset.map { Self.place(in: yaml.prefix($0)) }
            let (line, column) = (place?.line, place?.column)
            let character = value >= 0 ? String(format: " (U+%04X)", value) : ""
            return ConfigurationProblem(
                line: line, column: column, message: "not valid YAML: \(problem)\(character); remove it")
        case .duplicatedKeysInMapping(let duplicates, let context):
            // libyaml marks the first spelling; the problem is the later one: its line, found as
            // the next line of the same indentation that spells the key.
            let later = Self.laterSpelling(of: duplicates.first ?? "", after: context.mark, in: context.text)
            return ConfigurationProblem(
                line: later?.line ?? context.mark.line, column: later?.column ?? context.mark.column,
                message:
                    "the key\(duplicates.count == 1 ? " \(duplicates[0]) appears" : "s \(duplicates.joined(separator: ", ")) appear") twice in one mapping"
                    + (later == nil ? "" : " (first on line \(context.mark.line))")
            )
        default:
            let first = "\(error)".split(separator: "\n", omittingEmptySubsequences: true).first ?? ""
            return ConfigurationProblem(line: nil, message: "not valid YAML: \(first)")
        }
    }

    /// Where `key` is spelled again in the mapping whose first spelling is at `mark`: the next
    /// line indented as that one whose text starts `key:` (or `"key":`); nil when none is.
    static func laterSpelling(of key: String, after mark: Mark, in text: String) -> (line: Int, column: Int)? {
        guard !key.isEmpty else { return nil }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard mark.line >= 1, mark.line <= lines.count else { return nil }
        let indent = mark.column - 1
        for number in mark.line..<lines.count {
            let line = lines[number]
            let leading = line.prefix { $0 == " " }.count
            guard leading == indent else { continue }
            let rest = line.dropFirst(leading)
            if rest.hasPrefix(key + ":") || rest.hasPrefix("\"\(key)\":") || rest.hasPrefix("'\(key)':") {
                return (number + 1, mark.column)
            }
        }
        return nil
    }

    /// The line and column just after `text`, as libyaml counts them: a line break is CR LF,
    /// CR, LF, NEL, or U+2028 or U+2029, and a column is a code point (Swift's `Character`
    /// counts CR LF, and a letter with its accents, as one).
    static func place(in text: Substring) -> (line: Int, column: Int) {
        var (line, column) = (1, 1)
        var afterCR = false
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x0A where afterCR:
                break
            case 0x0A, 0x0D, 0x85, 0x2028, 0x2029:
                line += 1
                column = 1
            default:
                column += 1
            }
            afterCR = scalar.value == 0x0D
        }
        return (line, column)
    }

    /// Levenshtein distance, for "did you mean".
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        var row = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var previous = row[0]
            row[0] = i
            for j in stride(from: 1, through: b.count, by: 1) {
                let current = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                previous = current
            }
        }
        return row[b.count]
    }
}
