import Foundation

/// What a load does with what the cache holds: a pure decision, table-tested
/// (`LoadDecisionTests`), that ``ItemLoader`` carries out. Freshness itself is
/// ``HTTPFreshnessModel``'s verdict.
enum LoadDecision: Equatable, Sendable {
    /// The stored value is fresh: serve it, no request (RFC 9111 §4.2).
    case serveFresh
    /// Expired but inside the stale-while-revalidate window: serve it now and refresh it in
    /// the background (RFC 5861 §3). Never for a value that must revalidate on every use.
    case serveStaleAndRefresh
    /// Serve the stored value marked stale, no request: the request accepts that much
    /// staleness (`max-stale`, RFC 9111 §5.2.1.2), or only-if-cached finds it in its
    /// stale-while-revalidate window.
    case serveStale
    /// Offline: serve the stored value, fresh or not, marked stale when expired; never an
    /// expired one whose origin forbids stale use (`no-cache`, `must-revalidate`: a
    /// disconnected cache answers with an error instead, RFC 9111 §4.2.4, §5.2.2.2).
    case serveOffline
    /// Offline (or `only-if-cached`, RFC 9111 §5.2.1.7) with nothing usable stored:
    /// ``ItemCacheError/Code/notCached``.
    case offlineMiss
    /// Expired: ask the origin, conditionally when the value has validators (RFC 9111 §4.3.1);
    /// the stored value stands in if the fetch fails and stale-if-error allows.
    case revalidate
    /// Nothing usable stored, or a reload: an unconditional request. A stored value (a reload's)
    /// still stands in if the fetch fails.
    case fetch

    /// The decision for a load with `policy` whose request `Cache-Control` is `request`, at
    /// `now`, when the cache holds `stored` (nil: nothing), with the caller's
    /// stale-while-revalidate window `staleWhileRevalidate` for responses that set none.
    static func decide(
        stored: ItemInfo?, policy: LoadPolicy, request: CacheDirectives = CacheDirectives(nil), now: Date,
        staleWhileRevalidate: Duration
    ) -> LoadDecision {
        switch policy {
        case .offline:
            guard let stored else { return .offlineMiss }
            let rules = stored.freshnessState
            if rules.revalidatesEveryUse || (stored.isExpired(at: now) && rules.forbidsStale) { return .offlineMiss }
            return .serveOffline
        case .reload:
            return .fetch
        case .useCache:
            let onlyIfCached = request.has("only-if-cached")
            guard let stored else { return onlyIfCached ? .offlineMiss : .fetch }
            // The common case costs no parsing: a fresh value and a request that sets nothing.
            if request.directives.isEmpty, !stored.isExpired(at: now) { return .serveFresh }
            let verdict = HTTPFreshnessModel.verdict(
                for: stored.freshnessState, request: request, now: now,
                staleWhileRevalidate: staleWhileRevalidate.seconds, staleOnError: .whenPermitted)
            switch verdict.use {
            case .fresh: return .serveFresh
            case .staleAccepted: return .serveStale
            case .staleWhileRevalidate: return onlyIfCached ? .serveStale : .serveStaleAndRefresh
            case .revalidate: return onlyIfCached ? .offlineMiss : .revalidate
            }
        }
    }
}

extension ItemInfo {
    /// Whether an offline load may serve this item at `now`: fresh, or expired with an origin
    /// that allows stale use (``LoadDecision/serveOffline``). The image pipeline asks it of an
    /// original before it serves a variant of it offline.
    package func isUsableOffline(at now: Date) -> Bool {
        LoadDecision.decide(stored: self, policy: .offline, now: now, staleWhileRevalidate: .zero) == .serveOffline
    }

    /// The rules the freshness model judges this item by: its expiry (the server's or the
    /// caller's), its age base, and its response's `Cache-Control`.
    var freshnessState: HTTPFreshnessModel.StoredResponse {
        HTTPFreshnessModel.StoredResponse(
            expires: expires, born: response?.born ?? created, revalidatesEveryUse: mustRevalidate,
            directives: CacheDirectives(response?.headers["cache-control"]))
    }
}
