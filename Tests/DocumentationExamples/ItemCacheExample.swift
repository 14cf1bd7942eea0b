import Foundation
import ItemCache

// snippet:begin item-cache-loader
/// A weather report the app shows.
struct Forecast: Codable, Sendable {
    var city: String
    var celsius: Int
}

/// The app's forecasts, read through one loader for the app's whole life (its memory tier
/// answers repeated reads without touching the disk). The cache folder may be shared with other
/// processes (the `sync-agent cache` CLI, other workers): a fresh copy comes from memory or disk,
/// an expired one is revalidated with its ETag (a 304 moves no body), a failed fetch falls back to
/// the stale copy, and processes waiting on one URL share one fetch and its failure.
final class ForecastService: Sendable {
    let loader: ItemLoader
    let api: URL

    init(api: URL, cacheFolder: String) throws {
        var configuration = CacheConfiguration(folder: cacheFolder) // made 0700 when missing
        configuration.diskLimit = 64 << 20 // the folder's whole footprint; every process enforces it
        configuration.loading.freshness = .server // honour Cache-Control, Expires and Age
        loader = try ItemLoader(configuration: configuration)
        self.api = api
    }

    func forecast(for city: String) async throws -> Forecast {
        let loaded = try await loader.item(for: api, parameters: ["city": city])
        print(loaded.source) // network, then memory; disk, revalidated or stale
        return try loaded.item.decode(Forecast.self)
    }

    /// At the app's end: writes the recorded reads and ends the loader's transport.
    func shutdown() async throws {
        try await loader.close()
    }
}
// snippet:end item-cache-loader

// snippet:begin item-cache-provider
/// Keeps the app's favourite cities in a typed provider: loaded once a day, edited in place.
func favouriteCities(store: ItemStore, user: String, load: @escaping @Sendable () async throws -> [String]) async throws
    -> [String]
{
    let favourites = CacheProvider<[String]>("favourites", store: store, lifetime: .lifetime(.seconds(86_400)))
    let current = try await favourites.get(.dynamicKey(user), loader: load)
    print(current.source) // network the first time, then memory or disk

    // One atomic read-modify-write, even with other processes editing the same list.
    let edited = try await favourites.update(.addFirst("Lisbon"), for: .dynamicKey(user))
    try await favourites.evict(.dynamicKey("someone-else")) // or .provider, .record(…)
    return edited
}
// snippet:end item-cache-provider
