import Foundation
import StorageServer
import Synchronization
import Testing
import Transport

@testable import ItemCache

/// A load that misses, then takes the key's cross-process slot only after another process's
/// fetch of the key has ended and stored it, is answered by that store: it does not fetch again.
/// (It used to look again only when it had waited for the slot, and so fetched twice when it
/// came just after; eight `sync-agent image get` processes showed it.)
@Suite("Cross-process coalescing: a fetch that ended just before this one took the slot")
struct CoalescingRaceTests {
    final class Gate: Sendable {
        let opened = Atomic<Bool>(false)
        let entered = Atomic<Bool>(false)
        func wait() async {
            while !opened.load(ordering: .acquiring) { try? await Task.sleep(for: .milliseconds(2)) }
        }
    }

    @Test("the second process finds the first one's value after taking the slot, and does not fetch")
    func storedJustBefore() async throws {
        let origin = try ScriptedOrigin { _ in
            ScriptedOrigin.Answer(headers: ["Cache-Control: max-age=600"], body: Data("value".utf8))
        }
        defer { origin.stop() }
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let transport = try CurlTransport()
        defer { Task { await transport.shutdown() } }
        // Two stores on one folder: two processes, as far as the folder can tell.
        let first = try ItemStore(configuration: CacheConfiguration(folder: folder))
        let second = try ItemStore(configuration: CacheConfiguration(folder: folder))
        var loading = LoadingConfiguration()
        loading.maxConcurrentFetches = 1
        let loaderA = ItemLoader(store: first, loading: loading, transport: transport)
        let loaderB = ItemLoader(store: second, loading: LoadingConfiguration(), transport: transport)
        // A's only fetch slot is held by a slow custom fetch until the gate opens.
        let gate = Gate()
        loaderA.register(
            ClosureFetcher { _ in
                gate.entered.store(true, ordering: .releasing)
                await gate.wait()
                return Data("slow".utf8)
            }, for: "slow")
        let slow = Task { try await loaderA.item(for: try CacheKey.custom("s", context: "slow"), url: nil) }
        while !gate.entered.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(2)) }
        // A looks the URL up (a miss) and waits for a fetch slot...
        let url = origin.url("/value")
        let waiting = Task { try await loaderA.item(for: url) }
        let key = try CacheKey(url: url)
        while case .notFound = await loaderA.state(for: key) { try await Task.sleep(for: .milliseconds(2)) }
        // ...while B fetches and stores it, and lets its cross-process slot go.
        let fetched = try await loaderB.item(for: url)
        #expect(fetched.source == .network)
        gate.opened.store(true, ordering: .releasing)
        _ = try await slow.value
        let answered = try await waiting.value
        #expect(answered.data == Data("value".utf8))
        #expect(answered.source == .disk)
        #expect(origin.requestCount(forPath: "/value") == 1)
    }
}
