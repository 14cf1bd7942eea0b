import Foundation
import ItemCache
import StorageServer
import Testing

@testable import ImageCache

@Suite("Images fetched with a credential are that credential's")
struct ImageCredentialTests {
    /// An image loaded with a credential is that credential's, variants included: a load
    /// without it asks the origin for its own original (and is refused here).
    @Test func anImageLoadedWithACredentialIsNotServedWithout() async throws {
        let fixture = try PipelineFixture()
        let body = try colouredImage(width: 40, height: 30, rgb: (10, 20, 30), format: "png")
        fixture.serve("/private.png", body, contentType: "image/png")
        let pipeline = try fixture.pipeline()
        var request = fixture.request("/private.png", 20, nil)
        request.headers = ["Authorization": "Bearer img-t0ken"]
        let first = try await pipeline.image(for: request)
        #expect(first.wasMade && first.metadata.width == 20)
        let again = try await pipeline.image(for: request)
        #expect(!again.wasMade && again.data == first.data)
        #expect(try await pipeline.isCached(request))
        #expect(fixture.origin.requestCount(forPath: "/private.png") == 1)
        // Without the credential: nothing is cached for it, and the origin is asked.
        let anonymous = fixture.request("/private.png", 20, nil)
        #expect(try await !pipeline.isCached(anonymous))
        fixture.answers.withLock { $0["/private.png"] = ScriptedOrigin.Answer(status: 401, body: Data("who?".utf8)) }
        await #expect(throws: ImageCacheError.self) { try await pipeline.image(for: anonymous) }
        #expect(fixture.origin.requestCount(forPath: "/private.png") == 2)
        // With it, still served.
        #expect(try await pipeline.image(for: request).data == first.data)
        #expect(fixture.origin.requestCount(forPath: "/private.png") == 2)
        // Removing the URL removes the credential's original and its variant (none is left
        // behind as an orphan).
        #expect(try await pipeline.remove(.url(fixture.url("/private.png"))) == 2)
        #expect(try await !pipeline.isCached(request))
        #expect(try await pipeline.loader.count(matching: ItemQuery()) == 0)
    }

    /// An image loaded for an account is found by the account's next token, variants and
    /// `isCached` included; another account's load asks the origin.
    @Test func anAccountsImageOutlivesItsToken() async throws {
        let fixture = try PipelineFixture()
        let body = try colouredImage(width: 40, height: 30, rgb: (10, 20, 30), format: "png")
        fixture.serve("/avatar.png", body, contentType: "image/png")
        let pipeline = try fixture.pipeline()
        var request = fixture.request("/avatar.png", 20, nil)
        request.headers = ["Authorization": "Bearer t0ken-one"]
        request.account = "user-42"
        let first = try await pipeline.image(for: request)
        #expect(first.wasMade && first.metadata.width == 20)
        request.headers = ["Authorization": "Bearer t0ken-two"]
        #expect(try await pipeline.isCached(request))
        let refreshed = try await pipeline.image(for: request)
        #expect(!refreshed.wasMade && refreshed.data == first.data)
        #expect(fixture.origin.requestCount(forPath: "/avatar.png") == 1)
        var other = request
        other.account = "user-43"
        #expect(try await !pipeline.isCached(other))
        fixture.answers.withLock { $0["/avatar.png"] = ScriptedOrigin.Answer(status: 401, body: Data("who?".utf8)) }
        await #expect(throws: ImageCacheError.self) { try await pipeline.image(for: other) }
        #expect(fixture.origin.requestCount(forPath: "/avatar.png") == 2)
        #expect(try await pipeline.remove(.url(fixture.url("/avatar.png"))) == 2)
        #expect(try await !pipeline.isCached(request))
    }
}
