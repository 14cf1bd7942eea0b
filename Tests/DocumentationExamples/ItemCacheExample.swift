import Foundation
import ItemCache

// snippet:begin item-cache-loader
/// A weather report the app shows.
struct Forecast: Codable, Sendable {
    var city: String
    var celsius: Int
}

/// Reads a forecast through a cache folder that other processes (the `sync-agent cache` CLI, other
/// workers) may share: a fresh copy comes from memory or disk, an expired one is revalidated with
/// its ETag (a 304 moves no body), and a failed fetch falls back to the stale copy.
func forecast(for city: String, from api: URL, cacheFolder: String) async throws -> Forecast {
    var configuration = CacheConfiguration(folder: cacheFolder)
    configuration.diskLimit = 64 << 20          // kept in the folder; every process enforces it
    configuration.freshness = .server            // honour Cache-Control, Expires and Age
    let loader = try ItemLoader(configuration: configuration)

    let loaded = try await loader.item(for: api, parameters: ["city": city])
    print(loaded.source)                         // memory, disk, network, revalidated or stale
    let forecast = try loaded.item.decode(Forecast.self)
    try await loader.close()                     // writes pending reads, ends its transport
    return forecast
}
// snippet:end item-cache-loader

// snippet:begin item-cache-provider
/// Keeps the app's favourite cities in a typed provider: loaded once a day, edited in place.
func favouriteCities(store: ItemStore, user: String, load: @escaping @Sendable () async throws -> [String]) async throws -> [String] {
    let favourites = CacheProvider<[String]>("favourites", store: store, lifetime: .lifetime(.seconds(86_400)))
    let current = try await favourites.get(.dynamicKey(user), loader: load)
    print(current.source)                        // network the first time, then memory or disk

    // One atomic read-modify-write, even with other processes editing the same list.
    let edited = try await favourites.update(.addFirst("Lisbon"), for: .dynamicKey(user))
    try await favourites.evict(.dynamicKey("someone-else"))   // or .provider, .record(…)
    return edited
}
// snippet:end item-cache-provider
