import Foundation

/// What a load does with what the cache holds: a pure decision, table-tested
/// (`LoadDecisionTests`), that ``ItemLoader`` carries out.
enum LoadDecision: Equatable, Sendable {
    /// The stored value is fresh: serve it, no request (RFC 9111 §4.2).
    case serveFresh
    /// Expired but inside the stale-while-revalidate window: serve it now and refresh it in
    /// the background (RFC 5861 §3). Never for a value that must revalidate on every use.
    case serveStaleAndRefresh
    /// Offline: serve the stored value, fresh or not, marked stale when expired.
    case serveOffline
    /// Offline with nothing stored: ``ItemCacheError/Code/notCached``.
    case offlineMiss
    /// Expired: ask the origin, conditionally when the value has validators (RFC 9111 §4.3.1);
    /// the stored value stands in if the fetch fails (stale-if-error).
    case revalidate
    /// Nothing usable stored, or a reload: an unconditional request. A stored value (a reload's)
    /// still stands in if the fetch fails.
    case fetch

    /// The decision for a load with `policy` at `now`, when the cache holds `stored` (nil:
    /// nothing), with a stale-while-revalidate window of `staleWhileRevalidate`.
    static func decide(stored: ItemInfo?, policy: LoadPolicy, now: Date, staleWhileRevalidate: Duration) -> LoadDecision
    {
        switch policy {
        case .offline:
            return stored == nil ? .offlineMiss : .serveOffline
        case .reload:
            return .fetch
        case .useCache:
            guard let stored else { return .fetch }
            if !stored.isExpired(at: now) { return .serveFresh }
            if let expires = stored.expires, !stored.mustRevalidate, staleWhileRevalidate > .zero,
                now < expires.addingTimeInterval(staleWhileRevalidate.seconds)
            {
                return .serveStaleAndRefresh
            }
            return .revalidate
        }
    }
}
