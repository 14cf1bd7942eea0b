import Foundation
import Synchronization
import Testing
import Transport

@testable import ItemCache

/// What reaches the server: parameters escaped byte for byte, every value of a name, in order.
@Suite("Parameters on the wire")
struct RequestParametersTests {
    @Test(
        "a parameter's + reaches the fetcher as %2B, repeated names keep every value, and the URL's own query stays as written"
    )
    func parametersOnTheWire() async throws {
        let folder = temporaryCacheFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let configuration = CacheConfiguration(folder: folder)
        let store = try ItemStore(configuration: configuration)
        let transport = try CurlTransport()
        let loader = ItemLoader(store: store, configuration: configuration, transport: transport)
        let seen = Mutex<[String]>([])
        loader.register(
            ClosureFetcher { request in
                seen.withLock { $0.append(request.url?.absoluteString ?? "") }
                return Data("ok".utf8)
            }, for: "https")
        let base = URL(string: "https://example.com/search?lang=c++")!
        let parameters = RequestParameters([
            (name: "q", value: "a+b c"), (name: "city", value: "Oslo"), (name: "city", value: "Bergen"),
        ])
        let loaded = try await loader.item(for: base, parameters: parameters)
        #expect(seen.withLock { $0 } == ["https://example.com/search?lang=c++&q=a%2Bb%20c&city=Oslo&city=Bergen"])
        #expect(loaded.item.key.rawValue == "https://example.com/search?city=Oslo&city=Bergen&lang=c++&q=a%2Bb%20c")
        // `+` written in the URL and `%2B` are two requests.
        _ = try await loader.item(for: URL(string: "https://example.com/search?lang=c%2B%2B")!)
        #expect(seen.withLock { $0.count } == 2)
        try await loader.close()
        await transport.shutdown()
    }
}
