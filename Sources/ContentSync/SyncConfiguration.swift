import Foundation
import Logging
import Transport

/// Everything a ``CacheManager`` (and the engine under it) needs to know. Every field but the
/// first two has a default.
public struct SyncConfiguration: Sendable {
    /// The storage folder: the URL that holds `RXCacheConfig/` and `RXCacheContent/`.
    public var baseURL: URL
    /// The local folder to keep in step with the storage's content. It holds content only.
    public var contentDirectory: String
    /// The state database. Default: ``defaultStatePath(for:)``, outside the content folder.
    public var stateDatabasePath: String
    /// Rewrites every request (URL, method, query, headers), e.g. to add a token. Default none.
    public var requestAdapter: (any RequestAdapter)?
    /// Fetches everything. Default `nil`: a ``CurlTransport`` using ``requestAdapter``. A custom
    /// transport lets an app hand over bytes it fetched itself; the adapter is applied to its
    /// requests too.
    public var transport: (any Transport)?
    /// Downloads running at once. Default 8.
    public var maxConcurrentDownloads = 8
    /// Consulted before and during transfers. Default: always allowed.
    public var connectionPolicy: ConnectionPolicy = .always
    /// Replace a non-empty content folder that no state database knows about. Default `false`:
    /// such a folder is refused, because pointing the agent at the wrong folder would otherwise
    /// replace its contents.
    public var allowReplacingUnknownContent = false
    /// Verify downloads and the staged tree against the integrity extension's data when the
    /// storage publishes it. Default `true`; `false` behaves like a client that ignores the
    /// extension (signatures, when keys are set, are still required).
    public var verifyIntegrity = true
    /// Ed25519 public keys (base64 of 32 raw bytes) the status file must be signed by. Default
    /// none: signatures are not required. With keys, an unsigned, wrongly signed or expired
    /// status is refused, as is a version below the highest ever accepted (rollback), and the
    /// status must carry integrity data so every list and archive is tied to the signature.
    public var trustedSigningKeys: [String] = []
    /// Debug- and trace-level messages, dotted metadata keys. Default: a no-op logger.
    public var logger = Logger(label: "content-sync", factory: { _ in SwiftLogNoOpLogHandler() })

    public init(baseURL: URL, contentDirectory: String, stateDatabasePath: String? = nil) {
        self.baseURL = baseURL
        let absolute = Self.absolutePath(contentDirectory)
        self.contentDirectory = absolute
        self.stateDatabasePath = stateDatabasePath.map(Self.absolutePath) ?? Self.defaultStatePath(for: absolute)
    }

    /// `$XDG_STATE_HOME/content-sync/<folder name>-<hash of its path>.sqlite`, falling back to
    /// `~/.local/state/content-sync/…`: one database per content folder, never inside it.
    public static func defaultStatePath(for contentDirectory: String) -> String {
        let environment = ProcessInfo.processInfo.environment
        let stateHome = environment["XDG_STATE_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? ((environment["HOME"] ?? NSHomeDirectory()) + "/.local/state")
        var hash = FNV1a64()
        hash.combine(absolutePath(contentDirectory))
        let name = (contentDirectory as NSString).lastPathComponent
        return "\(stateHome)/content-sync/\(name)-\(String(hash.value, radix: 16)).sqlite"
    }

    static func absolutePath(_ path: String) -> String {
        let expanded = (path as NSString).expandingTildeInPath
        let absolute = expanded.hasPrefix("/") ? expanded : FileManager.default.currentDirectoryPath + "/" + expanded
        var standardized = (absolute as NSString).standardizingPath
        while standardized.count > 1 && standardized.hasSuffix("/") { standardized.removeLast() }
        return standardized
    }
}

extension SyncConfiguration {
    /// Makes a command-line path absolute the way the configuration does.
    public static func absolutePathForCLI(_ path: String) -> String { absolutePath(path) }
}
