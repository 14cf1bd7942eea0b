import Foundation
import Testing

@testable import Transport

/// Which schemes libcurl may follow a redirect to (`CURLOPT_REDIR_PROTOCOLS_STR`), by the scheme
/// of the request. The loopback tests follow http → http redirects for real; a TLS origin is not
/// available on loopback here, so the https rule is held by this table.
@Suite("A redirect never downgrades https to http")
struct RedirectProtocolTests {
    @Test(arguments: [
        ("https://raw.githubusercontent.com/o/r/main/RXCacheConfig/cacheStatus.json", "https"),
        ("HTTPS://example.com/s/", "https"),
        ("http://127.0.0.1:8080/s/", "http,https"),
        ("http://example.com/s/", "http,https"),
    ])
    func redirectSchemesFollowTheRequestsScheme(url: String, allowed: String) throws {
        #expect(CurlTransfer.redirectProtocols(from: try #require(URL(string: url))) == allowed)
    }
}
