import Foundation
import Transport

/// How a private cache decides, from a response's headers, the request's `Cache-Control` and
/// the clock, whether a response may be stored, how long it is fresh, and what a later request
/// may do with it: RFC 9111 (HTTP caching) and RFC 5861 (stale-while-revalidate,
/// stale-if-error), for a cache that is private (one user's), not shared. A pure type,
/// table-tested row by row with the RFC section of each (`HTTPFreshnessModelTests`); the
/// loader carries out its verdicts.
///
/// The rules, directive by directive, are the table in the ItemCache guide ("HTTP caching").
public struct HTTPFreshnessModel: Sendable, Equatable {
    /// The lifetime of a response that states none (no valid `max-age` or `Expires`), for a
    /// status that may be cached without one (RFC 9111 §4.2.2).
    public enum Heuristic: Sendable, Equatable {
        /// A fixed lifetime: the loader's ``CacheConfiguration/defaultExpiry`` (one day by
        /// default, as RXWebCache keeps items).
        case defaultExpiry
        /// RFC 9111 §4.2.2's suggestion: this fraction (typically 0.1) of the time since
        /// `Last-Modified`; a response without `Last-Modified` gets none and is stale at once.
        case lastModifiedFraction(Double)
    }

    /// Whose freshness rule applies to responses that state none. Default ``Heuristic/defaultExpiry``.
    public var heuristic: Heuristic
    /// The lifetime ``Heuristic/defaultExpiry`` gives, as an expiry.
    public var defaultExpiry: Expiry

    /// A model with these rules.
    public init(heuristic: Heuristic = .defaultExpiry, defaultExpiry: Expiry = .oneDay) {
        self.heuristic = heuristic
        self.defaultExpiry = defaultExpiry
    }

    /// Statuses that may be stored and given a heuristic lifetime without explicit freshness
    /// (RFC 9110 §15.1: "cacheable by default"), less 206, which is never stored as the whole
    /// item.
    public static let cacheableByDefault: Set<Int> = [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]

    /// Statuses whose meaning this cache knows, for `must-understand` (RFC 9111 §5.2.2.3).
    public static let understood: Set<Int> = cacheableByDefault.union([302, 303, 307, 400, 403, 500, 502, 503, 504])

    // MARK: - Storing

    /// What storing a response comes to.
    public enum Storing: Sendable, Equatable {
        /// Store it, fresh until `expires` (nil: never expires), its age counted from `born`
        /// (the response time less its corrected initial age, §4.2.3), revalidated on every use
        /// when `revalidatesEveryUse` (`no-cache`), with a heuristic lifetime when `heuristic`.
        case store(expires: Date?, born: Date, revalidatesEveryUse: Bool, heuristic: Bool)
        /// Do not store it; `reason` says why (for the debug log and the tests).
        case doNotStore(reason: String)
    }

    /// Whether and how to store a `status` response with `headers` (combined, names lower-cased)
    /// to a GET whose `Cache-Control` is `request`, sent at `requestTime` and received at
    /// `responseTime` (RFC 9111 §3, §4.2).
    public func storing(
        status: Int, headers: [String: String], request: CacheDirectives, requestTime: Date, responseTime: Date
    ) -> Storing {
        let directives = CacheDirectives(headers["cache-control"])
        // §3: a final status; 206 and 304 are never stored as the item.
        guard status >= 200, status != 206, status != 304 else {
            return .doNotStore(reason: "a \(status) is never stored as the whole item")
        }
        if directives.has("must-understand") {
            // §5.2.2.3: stored only when the status is understood; then no-store gives way.
            guard Self.understood.contains(status) else {
                return .doNotStore(reason: "must-understand with a status (\(status)) this cache does not understand")
            }
        } else if directives.has("no-store") {
            return .doNotStore(reason: "the response's Cache-Control has no-store (RFC 9111 §5.2.2.5)")
        }
        if request.has("no-store") {
            return .doNotStore(reason: "the request's Cache-Control has no-store (RFC 9111 §5.2.1.5)")
        }
        if Self.varyNames(headers["vary"]) == nil {
            return .doNotStore(
                reason:
                    "Vary: * never matches a later request (RFC 9111 §4.1); nor is a Vary of more than \(Self.mostVaryNames) names or of no header names kept"
            )
        }
        let born = Self.born(headers: headers, requestTime: requestTime, responseTime: responseTime)
        let revalidatesEveryUse = directives.has("no-cache")
        // §4.2.1: max-age, else Expires against Date, else a heuristic where allowed.
        switch directives.seconds("max-age") {
        case .value(let seconds):
            return .store(
                expires: born.addingTimeInterval(Double(seconds)), born: born,
                revalidatesEveryUse: revalidatesEveryUse, heuristic: false)
        case .invalid, .bare:
            // §4.2.1, §5.2.2.1: an invalid max-age makes the response stale, not default-fresh.
            return .store(expires: born, born: born, revalidatesEveryUse: revalidatesEveryUse, heuristic: false)
        case .absent:
            break
        }
        if let expiresText = headers["expires"] {
            // §5.3: an invalid Expires (`0`, two dates, a bad form) means already expired.
            guard let expires = HTTPDate.parse(expiresText, now: responseTime) else {
                return .store(expires: born, born: born, revalidatesEveryUse: revalidatesEveryUse, heuristic: false)
            }
            let date = headers["date"].flatMap { HTTPDate.parse($0, now: responseTime) } ?? responseTime
            return .store(
                expires: born.addingTimeInterval(expires.timeIntervalSince(date)), born: born,
                revalidatesEveryUse: revalidatesEveryUse, heuristic: false)
        }
        // §3 (last bullet), §4.2.2: without explicit freshness only a status cacheable by default
        // (or a response marked public or private) is stored, with a heuristic lifetime.
        let heuristicAllowed = Self.cacheableByDefault.contains(status) || directives.has("public")
        guard heuristicAllowed || directives.has("private") else {
            return .doNotStore(reason: "a \(status) without explicit freshness is not cacheable by default")
        }
        guard heuristicAllowed else {
            return .store(expires: born, born: born, revalidatesEveryUse: revalidatesEveryUse, heuristic: false)
        }
        return .store(
            expires: heuristicExpiry(headers: headers, born: born, responseTime: responseTime), born: born,
            revalidatesEveryUse: revalidatesEveryUse, heuristic: true)
    }

    /// The heuristic expiry of a response received at `responseTime` (§4.2.2).
    func heuristicExpiry(headers: [String: String], born: Date, responseTime: Date) -> Date? {
        switch heuristic {
        case .defaultExpiry:
            // The lifetime counts from the response's age base, as every lifetime does (§4.2.3).
            guard case .lifetime(let lifetime) = defaultExpiry else {
                return defaultExpiry.expirationDate(storedAt: responseTime)
            }
            return born.addingTimeInterval(lifetime.seconds)
        case .lastModifiedFraction(let fraction):
            let date = headers["date"].flatMap { HTTPDate.parse($0, now: responseTime) } ?? responseTime
            guard let modified = headers["last-modified"].flatMap({ HTTPDate.parse($0, now: responseTime) }),
                modified < date
            else { return born }
            return born.addingTimeInterval(date.timeIntervalSince(modified) * max(0, fraction))
        }
    }

    /// The response time less the corrected initial age (RFC 9111 §4.2.3): the current age at
    /// any later `now` is `now − born`.
    public static func born(headers: [String: String], requestTime: Date, responseTime: Date) -> Date {
        let date = headers["date"].flatMap { HTTPDate.parse($0, now: responseTime) }
        let apparentAge = max(0, date.map { responseTime.timeIntervalSince($0) } ?? 0)
        let responseDelay = max(0, responseTime.timeIntervalSince(requestTime))
        let correctedAgeValue = Double(age(headers["age"]) ?? 0) + responseDelay
        return responseTime.addingTimeInterval(-max(apparentAge, correctedAgeValue))
    }

    /// An `Age` value (§5.1): the first member of a list, when it is a delta-seconds (an overflow
    /// is 2^31); nil (ignored) when it is not one.
    public static func age(_ value: String?) -> Int? {
        guard let value else { return nil }
        let first = value.split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        return CacheDirectives.deltaSeconds(first.trimmingCharacters(in: .whitespaces)[...])
    }

    /// The most request headers a `Vary` may name for the response to be stored: each adds to
    /// its variant's key.
    public static let mostVaryNames = 16

    /// The request header names a `Vary` value names, lower-cased and sorted; nil for `Vary: *`
    /// (which no request matches) and for one that names more than ``mostVaryNames`` headers
    /// or something that is no header name (not stored either).
    public static func varyNames(_ value: String?) -> [String]? {
        guard let value else { return [] }
        let names = value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            .filter { !$0.isEmpty }
        if names.contains("*") { return nil }
        let unique = Array(Set(names)).sorted()
        let token = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz".unicodeScalars)
        guard unique.count <= mostVaryNames, unique.allSatisfy({ $0.unicodeScalars.allSatisfy(token.contains) })
        else { return nil }
        return unique
    }

    // MARK: - Using

    /// What a stored response may be used for at a given moment.
    public enum Use: Sendable, Equatable {
        /// Fresh for this request: serve it, no request (§4.2).
        case fresh
        /// Stale, but the request accepts that much staleness (`max-stale`, §5.2.1.2): serve it.
        case staleAccepted
        /// Stale inside its stale-while-revalidate window (RFC 5861 §3): serve it now and
        /// revalidate in the background.
        case staleWhileRevalidate
        /// It must be validated with the origin before use (§4.3): stale, `no-cache`, or not
        /// fresh enough for the request's `max-age` / `min-fresh` / `no-cache`.
        case revalidate
    }

    /// The verdict on a stored response for one request.
    public struct Verdict: Sendable, Equatable {
        /// What to do with it now.
        public var use: Use
        /// Whether it may stand in for a failed revalidation (RFC 5861 §4, RFC 9111 §4.2.4): the
        /// origin does not forbid it (`must-revalidate`, `no-cache`), and any stale-if-error
        /// window (the response's or the request's) still holds.
        public var mayServeStaleOnError: Bool
    }

    /// The stored response's rules, as its headers and the stored times give them.
    public struct StoredResponse: Sendable, Equatable {
        /// When it stops being fresh (the caller's expiry when one was set); nil for never.
        public var expires: Date?
        /// Its age base: the current age is `now − born`.
        public var born: Date
        /// Validate on every use (`no-cache`).
        public var revalidatesEveryUse: Bool
        /// Its `Cache-Control` directives.
        public var directives: CacheDirectives

        /// A stored response's rules.
        public init(expires: Date?, born: Date, revalidatesEveryUse: Bool, directives: CacheDirectives) {
            self.expires = expires
            self.born = born
            self.revalidatesEveryUse = revalidatesEveryUse
            self.directives = directives
        }

        /// Whether the origin forbids serving it stale without validation, offline or on an
        /// error alike (`no-cache`, `must-revalidate`: §4.2.4, §5.2.2.2, §5.2.2.4).
        public var forbidsStale: Bool {
            revalidatesEveryUse || directives.has("no-cache") || directives.has("must-revalidate")
        }
    }

    /// The verdict on `stored` for a request whose `Cache-Control` is `request`, at `now`.
    /// `staleWhileRevalidate` is the caller's window for responses that state none; `staleOnError`
    /// is the caller's rule for failed fetches.
    public static func verdict(
        for stored: StoredResponse, request: CacheDirectives, now: Date, staleWhileRevalidate: Double,
        staleOnError: StaleIfErrorPolicy
    ) -> Verdict {
        let age = now.timeIntervalSince(stored.born)
        let remaining = stored.expires.map { $0.timeIntervalSince(now) } ?? .infinity
        let staleness = -remaining
        let forbidsStale = stored.forbidsStale
        var fresh = remaining > 0 && !stored.revalidatesEveryUse
        // The request's limits (§5.2.1).
        if request.has("no-cache") { fresh = false }
        // max-age=0 asks for a response validated now, as browsers send it on reload (an age
        // of a fraction of a second would otherwise still pass as 0).
        if case .value(let maxAge) = request.seconds("max-age"), maxAge == 0 || age > Double(maxAge) {
            fresh = false
        }
        if case .value(let minFresh) = request.seconds("min-fresh"), remaining < Double(minFresh) { fresh = false }
        let onError = mayServeStaleOnError(
            stored: stored, request: request, staleness: staleness, forbidsStale: forbidsStale, policy: staleOnError)
        if fresh { return Verdict(use: .fresh, mayServeStaleOnError: onError) }
        if !forbidsStale, !request.has("no-cache"), remaining <= 0 {
            switch request.seconds("max-stale") {
            case .bare: return Verdict(use: .staleAccepted, mayServeStaleOnError: onError)
            case .value(let maxStale) where staleness <= Double(maxStale):
                return Verdict(use: .staleAccepted, mayServeStaleOnError: onError)
            default: break
            }
            // RFC 5861 §3: the response's window, else the caller's; not past a request's max-age.
            var window = staleWhileRevalidate
            if case .value(let seconds) = stored.directives.seconds("stale-while-revalidate") {
                window = Double(seconds)
            }
            if staleness < window, request.seconds("max-age") == .absent, request.seconds("min-fresh") == .absent {
                return Verdict(use: .staleWhileRevalidate, mayServeStaleOnError: onError)
            }
        }
        return Verdict(use: .revalidate, mayServeStaleOnError: onError)
    }

    /// Whether a stale response may stand in for a failed fetch.
    static func mayServeStaleOnError(
        stored: StoredResponse, request: CacheDirectives, staleness: Double, forbidsStale: Bool,
        policy: StaleIfErrorPolicy
    ) -> Bool {
        switch policy {
        case .never: return false
        case .always: return true
        case .whenPermitted:
            if forbidsStale { return false }
            // RFC 5861 §4: a window in the response or the request bounds it; the larger wins.
            var windows: [Double] = []
            for directives in [stored.directives, request] {
                switch directives.seconds("stale-if-error") {
                case .value(let seconds): windows.append(Double(seconds))
                case .invalid, .bare: windows.append(0)
                case .absent: break
                }
            }
            guard let window = windows.max() else { return true }
            return staleness <= window
        }
    }
}

/// When a stale stored value stands in for a failed fetch (a 500, 502, 503 or 504, or no
/// answer at all; never a 4xx, which is the origin's answer).
public enum StaleIfErrorPolicy: Sendable, Equatable {
    /// Never: the failure is the answer.
    case never
    /// When the origin permits it: not for a response with `must-revalidate` or `no-cache`
    /// (RFC 9111 §4.2.4), and within its `stale-if-error` window when it (or the request) sets
    /// one (RFC 5861 §4); without a window, however stale. The default.
    case whenPermitted
    /// Always, whatever the origin said (RxCache's `useExpiredDataIfLoaderFails`): the caller
    /// takes responsibility for serving data the origin forbade serving stale.
    case always
}
