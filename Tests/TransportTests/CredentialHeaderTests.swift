import Testing

@testable import Transport

/// Which request headers are credentials: the cache keeps what they fetched for them alone, and
/// a redirect to another origin does not carry them.
@Suite("Credential headers")
struct CredentialHeaderTests {
    @Test(arguments: [
        ("Authorization", true), ("Proxy-Authorization", true), ("Cookie", true), ("X-Api-Key", true),
        ("X-Auth-Token", true), ("X-Creds", true),
        // Identity, as an authenticating proxy or gateway writes it.
        ("Remote-User", true), ("X-Remote-User", true), ("X-Forwarded-User", true),
        ("X-Ms-Client-Principal", true), ("X-Ms-Client-Principal-Name", true), ("X-Identity", true),
        ("X-Client-Cert", true), ("X-Ssl-Client-Cert", true),
        // Not credentials.
        ("User-Agent", false), ("Accept", false), ("Accept-Language", false), ("If-None-Match", false),
        ("Range", false), ("X-Request-Id", false), ("Cache-Control", false),
    ])
    func aHeaderIsACredentialByItsName(name: String, credential: Bool) {
        #expect(HTTPRequest.isCredentialHeader(name) == credential)
        #expect(HTTPRequest.isCredentialHeader(name.uppercased()) == credential)
    }
}
