import FileKit
import StorageFormat

/// Decides whether transfers may run now, e.g. "only on Wi-Fi" or "not on a metered link".
///
/// It is consulted before an update fetches anything (not even the status goes out while it
/// says no), before each download, and about four times a second while an update runs. When it turns false mid-update, the manager suspends and emits
/// ``CacheManagerEvent/connectionNotAllowed``, so the app can ask its user; calling
/// ``CacheManager/resume(overridingPolicy:)`` with `true` continues anyway.
public struct ConnectionPolicy: Sendable {
    private let check: @Sendable () async -> Bool

    /// A policy that asks `check` each time; it should answer quickly, as an update asks several
    /// times a second.
    public init(_ check: @escaping @Sendable () async -> Bool) {
        self.check = check
    }

    /// Transfers are always allowed.
    public static let always = ConnectionPolicy { true }

    /// Whether transfers may run now, as the check answers.
    public func allowsTransfers() async -> Bool {
        await check()
    }
}

extension ConnectionPolicy {
    /// Fails with ``SyncError/Code/connectionNotAllowed`` when the policy forbids transfers now.
    func requireTransfers() async throws(SyncError) {
        if !(await allowsTransfers()) {
            throw SyncError(
                code: .connectionNotAllowed,
                message: "the connection policy does not allow transfers now; resume when it does, or override it")
        }
    }
}
