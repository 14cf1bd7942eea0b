import Foundation
import StorageServer
import Testing
import Transport

@testable import ItemCache

/// What one credential fetched is never served to a load with another credential or none:
/// each credential a load sends (a header such as `Authorization` or `Cookie`, or the URL's
/// user part) has entries of its own, and the secret never reaches the index.
@Suite("Entries fetched with a credential are that credential's")
struct CredentialPartitionTests {
    /// An origin whose every answer says which credential came (cacheable for a minute, no
    /// `Vary`: the server does not say the answer depends on it, as many do not).
    static func echoingOrigin() throws -> ScriptedOrigin {
        try ScriptedOrigin { request in
            let sent = [request.header("authorization"), request.header("cookie"), request.header("x-api-key")]
                .map { $0 ?? "-" }.joined(separator: "|")
            return ScriptedOrigin.Answer(headers: ["Cache-Control: max-age=60"], body: Data("for \(sent)".utf8))
        }
    }

    static func url(_ origin: ScriptedOrigin, _ path: String, user: String? = nil, password: String? = nil) -> URL {
        var components = URLComponents(url: origin.url(path), resolvingAgainstBaseURL: false)!
        components.user = user
        components.password = password
        return components.url!
    }

    /// A loader on a new cache folder in front of ``echoingOrigin()``, for `body`; closed after.
    static func withEchoingLoader(
        _ name: String = #function, _ body: (ScriptedOrigin, String, ItemStore, ItemLoader) async throws -> Void
    ) async throws {
        let origin = try echoingOrigin()
        defer { origin.stop() }
        let folder = temporaryCacheFolder(name)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let transport = try CurlTransport()
        let configuration = CacheConfiguration(folder: folder)
        let store = try ItemStore(configuration: configuration)
        let loader = ItemLoader(store: store, loading: configuration.loading, transport: transport)
        do {
            try await body(origin, folder, store, loader)
        } catch {
            try? await loader.close()
            await transport.shutdown()
            throw error
        }
        try? await loader.close()
        await transport.shutdown()
    }

    @Test func eachCredentialHasItsOwnEntriesAndNoneLeaks() async throws {
        try await Self.withEchoingLoader { origin, folder, store, loader in
            let plain = Self.url(origin, "/me")
            func load(_ url: URL, _ headers: [String: String] = [:]) async throws -> (String, ItemSource) {
                let loaded = try await loader.item(for: url, options: LoadOptions(headers: headers))
                return (String(decoding: loaded.data ?? Data(), as: UTF8.self), loaded.source)
            }
            let loads: [(URL, [String: String])] = [
                (plain, ["Authorization": "Bearer alice-t0ken"]),
                (plain, ["Authorization": "Bearer bob-t0ken"]),
                (plain, ["Cookie": "session=carol-c00kie"]),
                (plain, ["X-Api-Key": "dave-k3y"]),
                (Self.url(origin, "/me", user: "erin", password: "erin-passw0rd"), [:]),
                (Self.url(origin, "/me", user: "erin", password: "other-passw0rd"), [:]),
                (Self.url(origin, "/me", user: "frank-t0ken"), [:]),
                (plain, [:]),
            ]
            // Each load in turn: a fetch of its own, never another's answer.
            var answers: [String] = []
            for (index, (url, headers)) in loads.enumerated() {
                let (body, source) = try await load(url, headers)
                #expect(source == .network, "load \(index) was served \(body) from \(source)")
                #expect(!answers.contains(body), "load \(index) got an answer another credential got: \(body)")
                answers.append(body)
                #expect(origin.requestCount(forPath: "/me") == index + 1)
            }
            // Again, in reverse: each is served its own, from the cache.
            for (index, (url, headers)) in loads.enumerated().reversed() {
                let (body, source) = try await load(url, headers)
                #expect(body == answers[index], "load \(index)")
                #expect(source != .network, "load \(index)")
            }
            #expect(origin.requestCount(forPath: "/me") == loads.count)
            // One entry each; the index holds no secret.
            #expect(try await store.count(matching: ItemQuery()) == loads.count)
            let keys = try await store.items(matching: ItemQuery()).map(\.key.rawValue)
            #expect(keys.filter { $0.contains(CacheKey.credentialMarker) }.count == loads.count - 1)
            try await store.close()
            let index = try Data(contentsOf: URL(fileURLWithPath: folder + "/index.sqlite"))
            for secret in ["alice-t0ken", "bob-t0ken", "carol-c00kie", "dave-k3y", "erin-passw0rd", "frank-t0ken"] {
                #expect(index.range(of: Data(secret.utf8)) == nil, "\(secret) reached the index")
                #expect(!keys.joined().contains(secret), "\(secret) reached a key")
            }
        }
    }

    /// A load that names its account keeps what it fetched for the account, whatever credential
    /// it sends: the account's next token is served it; another account, a load without an
    /// account and the old credential without an account are not. The name reaches no key.
    @Test func anAccountsEntriesOutliveItsToken() async throws {
        try await Self.withEchoingLoader { origin, folder, store, loader in
            let url = Self.url(origin, "/feed")
            func load(_ token: String?, account: String?) async throws -> (String, ItemSource) {
                let headers = token.map { ["Authorization": "Bearer \($0)"] } ?? [:]
                let loaded = try await loader.item(for: url, options: LoadOptions(headers: headers, account: account))
                return (String(decoding: loaded.data ?? Data(), as: UTF8.self), loaded.source)
            }
            let first = try await load("t0ken-one", account: "user-alice@example.com")
            #expect(first == ("for Bearer t0ken-one|-|-", .network))
            // The token was refreshed: the account's entry serves, without a request.
            let refreshed = try await load("t0ken-two", account: "user-alice@example.com")
            #expect(refreshed.0 == first.0 && refreshed.1 != .network, "\(refreshed)")
            #expect(origin.requestCount(forPath: "/feed") == 1)
            // Another account, the same token without an account, and no credential: each fetches.
            let bob = try await load("t0ken-two", account: "user-bob")
            #expect(bob == ("for Bearer t0ken-two|-|-", .network))
            let bare = try await load("t0ken-one", account: nil)
            #expect(bare.1 == .network, "a load without an account is not served the account's entry")
            let none = try await load(nil, account: nil)
            #expect(none == ("for -|-|-", .network))
            // An account without a credential is its own too; an empty name is no account.
            let noToken = try await load(nil, account: "user-alice@example.com")
            #expect(noToken.0 == first.0 && noToken.1 != .network, "the account's entry, whatever is sent")
            let empty = try await load(nil, account: "")
            #expect(empty == ("for -|-|-", .disk) || empty == ("for -|-|-", .memory), "\(empty)")
            #expect(origin.requestCount(forPath: "/feed") == 4)
            let keys = try await store.items(matching: ItemQuery()).map(\.key)
            #expect(keys.count == 4)
            #expect(keys.filter { $0.credentialDigest?.hasPrefix(CacheKey.accountMark) == true }.count == 2)
            #expect(Set(keys.map(\.withoutCredentials)).count == 1)
            // Removing the URL removes the accounts' entries too.
            #expect(try await store.removeItems(for: CacheKey(url: url)) == 4)
            try await store.close()
            let index = try Data(contentsOf: URL(fileURLWithPath: folder + "/index.sqlite"))
            for secret in ["alice@example.com", "user-bob", "t0ken-one", "t0ken-two"] {
                #expect(index.range(of: Data(secret.utf8)) == nil, "\(secret) reached the index")
                #expect(!keys.map(\.rawValue).joined().contains(secret), "\(secret) reached a key")
            }
        }
    }

    /// The account's part of a key: one digest of the name, apart from every credential's, and
    /// a key that has a credential part keeps it.
    @Test func anAccountsKeyIsADigestOfTheName() throws {
        let url = try #require(URL(string: "https://api.example.com/me"))
        let key = try CacheKey(url: url)
        let alice = key.sentWith(headers: ["Authorization": "Bearer a"], url: url, account: "alice")
        #expect(alice == key.sentWith(headers: ["Authorization": "Bearer b"], url: url, account: "alice"))
        #expect(alice == key.sentWith(headers: [:], url: url, account: "alice"))
        #expect(alice != key.sentWith(headers: [:], url: url, account: "bob"))
        #expect(alice != key.sentWith(headers: ["Authorization": "Bearer a"], url: url))
        #expect(alice.credentialDigest?.hasPrefix(CacheKey.accountMark + "sha256-") == true)
        #expect(!alice.rawValue.contains("alice"))
        #expect(alice.withoutCredentials == key)
        #expect(alice.sentWith(headers: [:], url: url, account: "bob") == alice)
        #expect(key.sentWith(headers: [:], url: url, account: "") == key)
    }

    /// A failing answer to one credential (a 503: one user's rate limit) backs off that URL for
    /// that credential alone: another credential, an account and a load without one still ask.
    @Test func oneCredentialsFailureBacksOffThatCredentialAlone() async throws {
        let origin = try ScriptedOrigin { request in
            request.header("authorization") == "Bearer limited"
                ? ScriptedOrigin.Answer(status: 503, body: Data("slow down".utf8))
                : ScriptedOrigin.Answer(headers: ["Cache-Control: max-age=60"], body: Data("ok".utf8))
        }
        defer { origin.stop() }
        let folder = temporaryCacheFolder(#function)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let transport = try CurlTransport()
        var configuration = CacheConfiguration(folder: folder)
        // Long enough that no wait of a loaded machine ends it within the test.
        configuration.loading.originBackoff = OriginBackoff(initial: .seconds(3600), maximum: .seconds(3600))
        let store = try ItemStore(configuration: configuration)
        let loader = ItemLoader(store: store, loading: configuration.loading, transport: transport)
        let url = origin.url("/feed")
        func load(_ headers: [String: String], account: String? = nil) async -> String {
            do {
                let loaded = try await loader.item(for: url, options: LoadOptions(headers: headers, account: account))
                return "\(loaded.status) " + String(decoding: loaded.data ?? Data(), as: UTF8.self)
            } catch {
                return "failed: \(error.message)"
            }
        }
        let limited = await load(["Authorization": "Bearer limited"])
        #expect(limited == "503 slow down", "\(limited)")
        let asked = origin.requestCount(forPath: "/feed")
        #expect(asked >= 1)
        // Backed off: no request for that credential.
        let again = await load(["Authorization": "Bearer limited"])
        #expect(again.contains("is failing"), "\(again)")
        #expect(origin.requestCount(forPath: "/feed") == asked)
        // The others are asked, and answered.
        #expect(await load(["Authorization": "Bearer other"]) == "200 ok")
        #expect(await load([:]) == "200 ok")
        #expect(origin.requestCount(forPath: "/feed") == asked + 2)
        // An account is asked too, even with the credential that failed (the origin answers
        // that credential 503 again).
        #expect(await load(["Authorization": "Bearer limited"], account: "bob") == "503 slow down")
        #expect(origin.requestCount(forPath: "/feed") > asked + 2)
        try? await loader.close()
        await transport.shutdown()
    }

    /// Removing a URL removes what every credential's load kept of it; a key with a credential
    /// part is that entry alone.
    @Test func removingTheURLRemovesEveryCredentialsEntries() async throws {
        try await Self.withEchoingLoader { origin, _, store, loader in
            let plain = Self.url(origin, "/x")
            let other = Self.url(origin, "/y")
            for url in [plain, other] {
                for headers in [["Authorization": "Bearer a"], ["Authorization": "Bearer b"], [:]] {
                    _ = try await loader.item(for: url, options: LoadOptions(headers: headers))
                }
            }
            #expect(try await store.count(matching: ItemQuery()) == 6)
            let alice = try CacheKey(url: plain).sentWith(headers: ["authorization": "Bearer a"], url: plain)
            #expect(alice.credentialDigest != nil)
            #expect(try await store.item(for: alice) != nil)
            #expect(try await store.removeItem(for: alice))
            #expect(try await store.count(matching: ItemQuery()) == 5, "a credential's key is its entry alone")
            #expect(try await store.removeItem(for: CacheKey(url: plain)))
            let left = try await store.items(matching: ItemQuery()).compactMap(\.key.url)
            #expect(left.count == 3 && left.allSatisfy { $0.hasSuffix("/y") }, "\(left)")
        }
    }

    /// The key of a load is its caller's key with the credential part, whichever way it is
    /// asked: the same credential (in any header case, with other whitespace) is one key; the
    /// part is added once.
    @Test func theCredentialPartIsOneDigestOfWhatIsSent() throws {
        let url = URL(string: "https://h.example/p")!
        let key = try CacheKey(url: url)
        #expect(key.sentWith(headers: [:], url: url) == key)
        #expect(key.sentWith(headers: ["Accept": "image/png"], url: url) == key)
        let one = key.sentWith(headers: ["Authorization": "Bearer  x"], url: url)
        #expect(one != key && one.credentialDigest?.hasPrefix(CacheKey.digestMark) == true)
        #expect(key.sentWith(headers: ["authorization": " Bearer x "], url: url) == one)
        #expect(one.sentWith(headers: ["Authorization": "Bearer y"], url: url) == one)
        #expect(key.sentWith(headers: ["Authorization": "Bearer y"], url: url) != one)
        #expect(key.sentWith(headers: ["Cookie": "Bearer x"], url: url) != one, "the header's name counts")
        let withUser = URL(string: "https://u:p@h.example/p")!
        let userKey = try CacheKey(url: withUser)
        #expect(userKey.sentWith(headers: [:], url: withUser) != userKey)
        #expect(
            userKey.sentWith(headers: [:], url: withUser)
                != userKey.sentWith(headers: [:], url: URL(string: "https://u:q@h.example/p")!))
        #expect(one.withoutCredentials == key && one.url == key.url)
    }
}
