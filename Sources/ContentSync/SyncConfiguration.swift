import FileKit
import Foundation
import Logging
import StorageFormat
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
    /// Fetches everything. Default `nil`: the manager builds its own `CurlTransport` (using
    /// ``requestAdapter``), owns it, and ends it in ``CacheManager/shutdown()``.
    ///
    /// Given one, the manager uses it as it is and never shuts it down: the app owns its
    /// lifetime. One `CurlTransport` can serve several managers (and, later, the item cache);
    /// shut it down after the last of them. A custom transport also lets an app hand over bytes
    /// it fetched itself. The adapter is applied to its requests too.
    public var transport: (any Transport)?
    /// Downloads running at once: the connections to the storage's host. Default 8.
    ///
    /// With the manager's own transport, the engine hands it twice as many, which it holds
    /// queued until a connection is free, so the next download starts the moment one ends.
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
    /// How often a replay lists the whole content folder and checks every file's identity (the
    /// *full check*). Between full checks a replay plans from the tree index recorded at the
    /// last switch, as long as every folder's `ctime` is still the one read right after it: a
    /// file added, removed or renamed by hand moves its folder's time and brings the full check
    /// at once, but a file edited in place does not, and is found (and repaired) by the next full
    /// check. Default 24 hours; `.zero` makes every replay a full check, as before 0.13.
    /// `verify` always checks everything.
    public var fullCheckInterval: Duration = .seconds(86_400)
    /// Ed25519 public keys (base64 of 32 raw bytes) the status file must be signed by. Default
    /// none: signatures are not required. With keys, an unsigned, wrongly signed or expired
    /// status is refused, as is a version below the highest ever accepted (rollback), and the
    /// status must carry integrity data so every list and archive is tied to the signature.
    public var trustedSigningKeys: [String] = []
    /// Asked before every version switch (an update's, and the repair of
    /// ``CacheManager/verify(repair:)``), once the staged tree is complete and checked and before
    /// anything is marked or swapped; throwing vetoes the switch. Default none.
    ///
    /// A veto fails the update with ``SyncError/Code/vetoed``, the thrown error's text as the
    /// reason: the content folder and the recorded version stay as they were, the failure is
    /// recorded like any other, and the next update asks again. The staged tree is kept, as after
    /// an interruption, so that update resumes it instead of downloading it again (and checks it
    /// again before asking). Throwing `CancellationError` (the update's task was cancelled while
    /// it waited) ends the update as ``SyncError/Code/cancelled`` instead.
    public var beforeSwitch: (@Sendable (PendingSwitch) async throws -> Void)?
    /// Debug- and trace-level messages, dotted metadata keys. Default: a no-op logger.
    public var logger = Logger(label: "content-sync", factory: { _ in SwiftLogNoOpLogHandler() })

    /// A configuration mirroring `baseURL` into `contentDirectory`. Paths are made absolute; the
    /// state database defaults to ``defaultStatePath(for:)``.
    public init(baseURL: URL, contentDirectory: String, stateDatabasePath: String? = nil) {
        self.baseURL = baseURL
        let absolute = Self.absolutePath(contentDirectory)
        self.contentDirectory = absolute
        self.stateDatabasePath = stateDatabasePath.map(Self.absolutePath) ?? Self.defaultStatePath(for: absolute)
    }

    /// `$XDG_STATE_HOME/content-sync/<folder name>-<hash of its path>.sqlite`, falling back to
    /// `~/.local/state/content-sync/…`: one database per content folder, never inside it. Under a
    /// systemd unit with `StateDirectory=`, `$STATE_DIRECTORY/<folder name>-<hash>.sqlite` (its
    /// first entry) instead: the folder systemd made for the service.
    ///
    /// A relative `XDG_STATE_HOME` is ignored, as the XDG Base Directory spec says (it would
    /// otherwise be read from whatever the current folder happens to be), and so is a relative
    /// `HOME`, in favour of the account's home folder.
    public static func defaultStatePath(for contentDirectory: String) -> String {
        defaultStatePath(for: contentDirectory, environment: ProcessInfo.processInfo.environment)
    }

    static func defaultStatePath(for contentDirectory: String, environment: [String: String]) -> String {
        let absolute = { (value: String?) in value.flatMap { $0.hasPrefix("/") ? $0 : nil } }
        var hash = FNV1a64()
        hash.combine(absolutePath(contentDirectory))
        let file = "\((contentDirectory as NSString).lastPathComponent)-\(String(hash.value, radix: 16)).sqlite"
        // systemd sets it to the StateDirectory= entries, colon-separated.
        if let serviceState = absolute(environment["STATE_DIRECTORY"]?.split(separator: ":").first.map(String.init)) {
            return "\(serviceState)/\(file)"
        }
        let stateHome =
            absolute(environment["XDG_STATE_HOME"])
            ?? ((absolute(environment["HOME"]) ?? NSHomeDirectory()) + "/.local/state")
        return "\(stateHome)/content-sync/\(file)"
    }

    static func absolutePath(_ path: String) -> String { FileSystem.absolutePath(path) }
}

extension SyncConfiguration {
    /// One of the settings, for errors that blame it (``SyncError/setting``).
    public enum Setting: String, Sendable, Equatable {
        /// ``SyncConfiguration/baseURL``.
        case baseURL
        /// ``SyncConfiguration/contentDirectory``.
        case contentDirectory
        /// ``SyncConfiguration/stateDatabasePath``.
        case stateDatabasePath
        /// ``SyncConfiguration/allowReplacingUnknownContent``.
        case allowReplacingUnknownContent
        /// ``SyncConfiguration/trustedSigningKeys``.
        case trustedSigningKeys
        /// ``SyncConfiguration/verifyIntegrity``.
        case verifyIntegrity
    }
}

extension SyncConfiguration {
    /// Refuses layouts in which an update would destroy its own state: a state database inside
    /// the content folder (which holds content only and is swapped out at every update) or
    /// inside its staging folder (emptied at every update). `--dir` naming the folder that holds
    /// state databases is the same mistake, and with `--force` it would replace every other
    /// mirror's state. Paths are compared after resolving symlinks.
    public func validateLayout() throws(SyncError) {
        try validateLayout(environment: ProcessInfo.processInfo.environment)
    }

    /// The staging folder beside `contentDirectory` (`/data/.app.content-sync` for `/data/app`),
    /// where an update builds the next version and keeps the previous one: emptied and
    /// replaced by updates as the content folder is, so no other folder may lie in it.
    public static func stagingFolder(for contentDirectory: String) -> String {
        StagingArea(contentDirectory: contentDirectory).location
    }

    /// ``validateLayout()`` with the environment that names the default state folder.
    func validateLayout(environment: [String: String]) throws(SyncError) {
        func refuse(_ message: String, _ setting: Setting) -> SyncError {
            var error = SyncError(code: .configuration, message: message)
            error.setting = setting
            return error
        }
        let content = Self.canonicalPath(contentDirectory)
        let state = Self.canonicalPath(stateDatabasePath)
        let staging = Self.canonicalPath(StagingArea(contentDirectory: contentDirectory).location)
        // Replacing these with --force would take everything in them. The home folder is the
        // account's and `$HOME`, which `~` and the shell use (sudo keeping HOME, a container's
        // HOME=/app): either one.
        let homes = [NSHomeDirectory(), environment["HOME"]].compactMap { $0 }.filter { $0.hasPrefix("/") }
        if content == "/" || homes.contains(where: { Self.path(Self.canonicalPath($0), isWithin: content) }) {
            throw refuse(
                "\(contentDirectory) is \(content == "/" ? "the root folder" : "the home folder or holds it"); a content folder is replaced at every update: choose a folder of its own, such as ~/mirror",
                .contentDirectory)
        }
        // The staging folder's name is the content folder's with 15 bytes more: over the 255
        // bytes a name may have, every update failed at its first step, forever.
        let stagingName = (staging as NSString).lastPathComponent
        if stagingName.utf8.count > Int(NAME_MAX) {
            let name = (content as NSString).lastPathComponent
            throw refuse(
                "the name of \(contentDirectory) is \(name.utf8.count) bytes long; its staging folder beside it (.\(name.prefix(16))….content-sync) would be \(stagingName.utf8.count), over the \(NAME_MAX) bytes a name can have: name the folder in at most \(Int(NAME_MAX) - (stagingName.utf8.count - name.utf8.count)) bytes",
                .contentDirectory)
        }
        // A mount point (a container's volume, a tmpfs) cannot be renamed: every update failed
        // at its very end, at the swap, with EBUSY.
        if content != "/", FileSystem.isMountPoint(content) {
            throw refuse(
                "\(contentDirectory) is a mount point, which an update cannot replace (it swaps a new version in by renaming the folder, and the staging folder beside it is on another filesystem); mirror into a folder inside it, such as \(contentDirectory)/mirror",
                .contentDirectory)
        }
        // The folder of the default state databases, whichever database this run uses: with
        // --force, a content folder that is or holds it would replace every mirror's state.
        let stateFolder = Self.canonicalPath(
            (Self.defaultStatePath(for: contentDirectory, environment: environment) as NSString)
                .deletingLastPathComponent)
        if Self.path(stateFolder, isWithin: content) {
            throw refuse(
                "\(contentDirectory) is or holds \(stateFolder), the folder of content-sync's state databases (one per mirror); a content folder is replaced at every update: choose a folder of its own, such as ~/mirror",
                .contentDirectory)
        }
        if Self.path(state, isWithin: content) {
            throw refuse(
                "the state database \(stateDatabasePath) is inside the content folder \(contentDirectory), which holds content only and is replaced at every update; "
                    + "keep the state database outside it (elsewhere, or at the default under $XDG_STATE_HOME), or choose another content folder",
                .stateDatabasePath)
        }
        if Self.path(state, isWithin: staging) {
            throw refuse(
                "the state database \(stateDatabasePath) is inside \(staging), the staging folder of \(contentDirectory), which is emptied at every update; keep the state database elsewhere",
                .stateDatabasePath)
        }
    }

    /// `path` made absolute, with every symlink in its deepest existing ancestor resolved (the
    /// rest may not exist yet).
    static func canonicalPath(_ path: String) -> String { FileSystem.canonicalPath(absolutePath(path)) }

    /// Whether `path` is `folder` or lies below it (both canonical).
    static func path(_ path: String, isWithin folder: String) -> Bool { FileSystem.path(path, isWithin: folder) }
}
