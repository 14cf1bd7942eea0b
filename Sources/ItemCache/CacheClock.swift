import Foundation

/// Where the cache reads the time: expiries, freshness, record times. Injected through
/// ``CacheConfiguration/clock`` so a test (or an app replaying a recorded session) decides
/// what "now" is.
public protocol CacheClock: Sendable {
    /// The current time.
    var now: Date { get }
}

/// The system's wall clock, ``CacheConfiguration/clock``'s default.
public struct SystemCacheClock: CacheClock {
    /// A system clock.
    public init() {}
    /// `Date()`.
    public var now: Date { Date() }
}
