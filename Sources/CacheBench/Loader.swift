import Foundation
import ItemCache
import StorageServer
import ToolSupport
import Transport

/// The fetching API on a loopback StorageServer: fresh hits through ``ItemLoader`` (by URL, which
/// builds the key each time, and by a key built once); loads of a `no-cache` item, each a
/// conditional GET answered 304; and the same conditional GET through the transport alone. Runs
/// off the main actor, as an app's tasks do, so no call pays for a hop between executors.
func measureLoader(_ options: ToolOptions) async throws {
    let folder = try options.string("folder")
    let hits = try options.int("hits", 20_000)
    let revalidations = try options.int("revalidations", 500)
    let content = URL(fileURLWithPath: folder + "-content")
    try FileManager.default.createDirectory(at: content, withIntermediateDirectories: true)
    let value = Values(size: 4096, seed: 1).value(0)
    try value.write(to: content.appendingPathComponent("fresh.bin"))
    try value.write(to: content.appendingPathComponent("revalidate.bin"))
    let server = StorageServer(root: content)
    _ = try await server.start()
    server.setCacheControl("no-cache", forPath: "/revalidate.bin")
    var transportConfiguration = CurlTransport.Configuration()
    transportConfiguration.retry = .none
    let transport = try CurlTransport(configuration: transportConfiguration)
    let configuration = CacheConfiguration(folder: folder)
    let store = try ItemStore(configuration: configuration)
    let loader = ItemLoader(store: store, configuration: configuration, transport: transport)

    let freshURL = server.url(for: "fresh.bin")
    _ = try await loader.item(for: freshURL)
    let freshKey = try CacheKey(url: freshURL)
    for _ in 0..<1000 { _ = try await loader.item(for: freshURL) }
    var byURL: [UInt64] = []
    var byKey: [UInt64] = []
    byURL.reserveCapacity(hits)
    byKey.reserveCapacity(hits)
    for _ in 0..<hits {
        let start = nowNanoseconds()
        let loaded = try await loader.item(for: freshURL)
        byURL.append(nowNanoseconds() - start)
        guard loaded.source == .memory, loaded.data.count == value.count else {
            throw ToolFailure(
                "a fresh hit came from \(loaded.source) with \(loaded.data.count) bytes; expected memory, \(value.count)"
            )
        }
    }
    for _ in 0..<hits {
        let start = nowNanoseconds()
        let loaded = try await loader.item(for: freshKey, url: freshURL)
        byKey.append(nowNanoseconds() - start)
        guard loaded.source == .memory else { throw ToolFailure("a fresh hit by key came from \(loaded.source)") }
    }

    let revalidateURL = server.url(for: "revalidate.bin")
    _ = try await loader.item(for: revalidateURL)
    for _ in 0..<20 { _ = try await loader.item(for: revalidateURL) }
    server.resetLog()
    var revalidated: [UInt64] = []
    for _ in 0..<revalidations {
        let start = nowNanoseconds()
        let loaded = try await loader.item(for: revalidateURL)
        revalidated.append(nowNanoseconds() - start)
        guard loaded.source == .revalidated, loaded.data.count == value.count else {
            throw ToolFailure("a no-cache load came from \(loaded.source); expected a revalidation")
        }
    }
    let notModified = server.requests().filter { $0.status == 304 }.count
    guard notModified == revalidations else {
        throw ToolFailure("the server answered \(notModified) of \(revalidations) revalidations with 304")
    }
    // The floor under a revalidation: the same conditional GET straight through the transport,
    // with no cache work around it.
    guard let etag = try await store.info(for: CacheKey(url: revalidateURL))?.etag else {
        throw ToolFailure("the revalidated item has no ETag")
    }
    var conditional: [UInt64] = []
    for _ in 0..<revalidations {
        let start = nowNanoseconds()
        let response = try await transport.data(for: HTTPRequest(url: revalidateURL, headers: ["If-None-Match": etag]))
        conditional.append(nowNanoseconds() - start)
        guard response.statusCode == 304 else {
            throw ToolFailure("a conditional GET got \(response.statusCode); expected 304")
        }
    }
    try await loader.close()
    await transport.shutdown()
    await server.stop()
    emit(["measure": "loader-hit", "op": "url"].merging(latencyFields(byURL)) { $1 })
    emit(["measure": "loader-hit", "op": "key"].merging(latencyFields(byKey)) { $1 })
    emit(
        ["measure": "revalidate304", "op": "loader", "status_304": notModified].merging(latencyFields(revalidated)) {
            $1
        })
    emit(["measure": "revalidate304", "op": "transport"].merging(latencyFields(conditional)) { $1 })
}
