import Foundation
import Testing
import Transport

/// What `Redaction` leaves of a URL's user info, in URLs and in the messages that quote them.
@Suite("Redaction hides a URL's password or token, in URLs and in prose")
struct RedactionTests {
    /// The secret-name rule, read on the bytes: parts in any case and escaped, the short words
    /// only as whole words, and nothing else.
    @Test(arguments: [
        ("access_token", true), ("X-Amz-Signature", true), ("API_KEY", true), ("%74oken", true), ("%54OKEN", true),
        ("PHPSESSID", true), ("sid", true), ("user_sid", true), ("SID-2", true), ("otp", true), ("Pin", true),
        ("side", false), ("footprint", false), ("spin", false), ("w", false), ("", false), ("sidx", false),
        ("caf\u{E9}_key", true), ("\u{212A}ey", false), ("page", false), ("sort", false),
        ("creds", true), ("X-Creds", true), ("credit", false),
    ])
    func secretNamesAreReadOnTheBytes(name: String, secret: Bool) {
        #expect(Redaction.isSecretName(name.utf8) == secret)
    }

    @Test(
        "text",
        arguments: [
            ("https://TOKEN@host/x/", "https://***@host/x/"),
            ("https://alice:S3cret@host/x/", "https://alice:***@host/x/"),
            // A user name that is the token itself: GitHub's documented form, an empty password,
            // a known token's prefix, a token's length.
            ("https://TOKEN1:x-oauth-basic@host/x/", "https://***:***@host/x/"),
            ("https://TOKEN2:@host/x/", "https://***:***@host/x/"),
            ("https://ghp_TOKEN3:x@host/", "https://***:***@host/"),
            ("https://0123456789abcdef0123456789abcdef:x@host/", "https://***:***@host/"),
            ("cannot reach TOKEN4:x-oauth-basic@host/x: refused", "cannot reach ***:***@host/x: refused"),
            ("https://oauth2:glpat-T5@host/", "https://oauth2:***@host/"),
            // RFC 3986 allows sub-delims in the user info: the whole password goes, not the part before ','.
            ("https://alice:pa,ss(1)'!$&*+;=@host/x/", "https://alice:***@host/x/"),
            ("https://tok,en@host", "https://***@host"),
            // A password's own escapes are part of it: `%2F`, `%3F`, `%23` do not end the authority.
            ("http://alice:AB%2FSEC@127.0.0.1:1/", "http://alice:***@127.0.0.1:1/"),
            ("http://alice:AB%3FSEC%23x@h/s/", "http://alice:***@h/s/"),
            ("http://AB%2FTOKEN@h/", "http://***@h/"),
            (
                "see http://alice:AB%2FSEC@h/ and ?next=https%3A%2F%2Fh%2Fx%3Ftoken%3DT",
                "see http://alice:***@h/ and ?next=https%3A%2F%2Fh%2Fx%3Ftoken%3D***"
            ),
            ("base URL 'https://alice:S3cret@host' is bad", "base URL 'https://alice:***@host' is bad"),
            ("base URL 'https://alice:S3cret@host/x/' is bad", "base URL 'https://alice:***@host/x/' is bad"),
            (
                "GET https://a:b@one/x and https://c@two/y failed",
                "GET https://a:***@one/x and https://***@two/y failed"
            ),
            ("http://u:p@[::1]:8080/s/", "http://u:***@[::1]:8080/s/"),
            // rclone connection strings: secret options go, quoted or not.
            (
                "uploaded status to :webdav,url='http://127.0.0.1:1/',user=u,pass=OBSCURED42:dst (1/4)",
                "uploaded status to :webdav,url='http://127.0.0.1:1/',user=u,pass=***:dst (1/4)"
            ),
            (
                ":s3,access_key_id=AK,secret_access_key=\"a,b\":bucket",
                ":s3,access_key_id=***,secret_access_key=***:bucket"
            ),
            ("remote,key=value,x=1", "remote,key=***,x=1"),
            ("sizes 1,2,3 and w=200,h=100", "sizes 1,2,3 and w=200,h=100"),
            // No scheme: `user:password@host` as typed (a base URL without `https://`).
            ("a:p@b@host/", "a:***@host/"),
            ("base URL 'alice:SEKRETB@127.0.0.1/x/' is bad", "base URL 'alice:***@127.0.0.1/x/' is bad"),
            ("--base-url=alice:S3@h", "--base-url=alice:***@h"),
            // A password typed with a raw `#`, `?` or `/`: all of it goes.
            (
                "--base-url 'http://alice:SEKRETB#x@127.0.0.1:1/s/' is bad",
                "--base-url 'http://alice:***@127.0.0.1:1/s/' is bad"
            ),
            ("http://alice:SEKRETB?x@127.0.0.1:1/s/", "http://alice:***@127.0.0.1:1/s/"),
            ("http://alice:SEKRETB/x@127.0.0.1:1/s/", "http://alice:***@127.0.0.1:1/s/"),
            // …but a port, a path or a query with an `@` keeps its host.
            ("https://cdn.example/img@2x.png", "https://cdn.example/img@2x.png"),
            ("https://cdn.example:8443/img@2x.png", "https://cdn.example:8443/img@2x.png"),
            ("http://[::1]:8080/x@y", "http://[::1]:8080/x@y"),
            ("at 10:30 mail a@b.c", "at 10:30 mail a@b.c"),
            ("https://a:p@b@host/", "https://a:***@host/"),
            ("line one https://u:p@h\nnext", "line one https://u:***@h\nnext"),
            // No user info: unchanged.
            ("https://host/x?mail=a@b.c#f@g", "https://host/x?mail=a@b.c#f@g"),
            ("mail a@b.c, see https://host/x/", "mail a@b.c, see https://host/x/"),
            ("(https://host) by a@b", "(https://host) by a@b"),
            ("http://[::1]:8080/x", "http://[::1]:8080/x"),
            // Secret query parameters: their values go, the others stay.
            (
                "https://raw.githubusercontent.com/o/r/main/x.json?token=GHSAT0AAA",
                "https://raw.githubusercontent.com/o/r/main/x.json?token=***"
            ),
            (
                "base URL 'http://127.0.0.1:36637/?token=TOKSECRET' has a query",
                "base URL 'http://127.0.0.1:36637/?token=***' has a query"
            ),
            (
                "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4&X-Amz-Credential=AKIA%2F1&X-Amz-Signature=ab12&X-Amz-Security-Token=zz",
                "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4&X-Amz-Credential=***&X-Amz-Signature=***&X-Amz-Security-Token=***"
            ),
            (
                "https://a.blob.core.windows.net/c/b?sv=2020&sig=ab%3D&se=2026",
                "https://a.blob.core.windows.net/c/b?sv=2020&sig=***&se=2026"
            ),
            ("https://u:p@host/x?api_key=K#frag", "https://u:***@host/x?api_key=***#frag"),
            (
                "GET https://h/a?token=T1 and https://h/b?sig=S2 failed",
                "GET https://h/a?token=*** and https://h/b?sig=*** failed"
            ),
            ("https://h/x?code=abc;session=def&Password=x", "https://h/x?code=***;session=***&Password=***"),
            ("'https://h/?token=it's'", "'https://h/?token=***'"),
            ("https://h/?access_token=a b", "https://h/?access_token=*** b"),
            ("https://host/img.jpg?w=200&h=100", "https://host/img.jpg?w=200&h=100"),
            // A secret name written with escapes is the name the server reads.
            ("GET http://127.0.0.1:9/e?%74oken=S1 failed", "GET http://127.0.0.1:9/e?%74oken=*** failed"),
            ("https://h/x?TOK%45N=S2&to%6Ben=S7&w=%31", "https://h/x?TOK%45N=***&to%6Ben=***&w=%31"),
            // URLs refused for their form still lose their secrets in the message that quotes them.
            ("'mailto:a@b.c?password=MPW' is not", "'mailto:***@b.c?password=***' is not"),
            (
                "'//alice:hunter2@example.com/x' is not an absolute URL",
                "'//alice:***@example.com/x' is not an absolute URL"
            ),
            ("'http:/alice:hunter2@example.com/x' has no host", "'http:/alice:***@example.com/x' has no host"),
            ("relative/x?api_key=K1#frag", "relative/x?api_key=***#frag"),
            // Prose with a question mark or a number sign is left alone.
            ("is it part of the synced version? see issue #12", "is it part of the synced version? see issue #12"),
            ("a?b=c, w=1", "a?b=c, w=1"),
            // Names of the secrets of CDNs and session schemes, and short secret words.
            (
                "https://cdn/v.m3u8?hdnts=exp=1~acl=/*~hmac=ab&__hdnea__=x&Bearer=b&PHPSESSID=p&JSESSIONID=j",
                "https://cdn/v.m3u8?hdnts=***&__hdnea__=***&Bearer=***&PHPSESSID=***&JSESSIONID=***"
            ),
            (
                "https://h/x?sid=1&user_sid=2&otp=3&PIN=4&SAMLResponse=5&side=left&footprint=9&spin=1",
                "https://h/x?sid=***&user_sid=***&otp=***&PIN=***&SAMLResponse=***&side=left&footprint=9&spin=1"
            ),
            ("https://host/x?token=&a=1", "https://host/x?token=&a=1"),
            ("https://host/x?token", "https://host/x?token"),
            // A query without an authority is still a query: its secret value goes (`,` may be
            // part of a value).
            ("a?token=b, no URL", "a?token=***, no URL"),
            // Punctuation that ends a sentence's URL is the sentence's, shown after the mask.
            ("cannot fetch https://h/x?token=abc: refused", "cannot fetch https://h/x?token=***: refused"),
            ("see https://h/x?sig=abc. Then", "see https://h/x?sig=***. Then"),
            // At the end (a key or a URL alone), or after punctuation, the value keeps it masked.
            ("https://h/x?sig=abc.", "https://h/x?sig=***"),
            ("https://h/x?token=::: x", "https://h/x?token=*** x"),
            // Path parameters (`;jsessionid=`), as Java servlets put sessions in the path.
            ("http://h/app;jsessionid=TOPSECRET?x=1", "http://h/app;jsessionid=***?x=1"),
            ("http://h/a;token=T1;v=2/b;sig=S2", "http://h/a;token=***;v=2/b;sig=***"),
            (
                "cannot fetch http://127.0.0.1:1/app;jsessionid=TOPSECRETzq: refused",
                "cannot fetch http://127.0.0.1:1/app;jsessionid=***: refused"
            ),
            ("http://h/a;v=2;w=3/x.json", "http://h/a;v=2;w=3/x.json"),
            // Written escaped: `%3B` for `;`, `%3D` for `=`.
            ("http://h/a%3Bjsessionid=SEKA9", "http://h/a%3Bjsessionid=***"),
            ("http://h/a%3btoken%3DSEKB1/b", "http://h/a%3btoken%3D***/b"),
            ("http://h/a;token%3DSEKC9", "http://h/a;token%3D***"),
            ("http://h/a%3Bv%3D2/x%3B", "http://h/a%3Bv%3D2/x%3B"),
            // A path parameter of a URL nested in another's query, plain or escaped, before prose.
            (
                "cannot fetch https://h/?next=https://o/a;token=T4: refused",
                "cannot fetch https://h/?next=https://o/a;token=***: refused"
            ),
            (
                "cannot fetch https://h/?next=https%3A%2F%2Fo%2Fa%3Btoken%3DT5: refused",
                "cannot fetch https://h/?next=https%3A%2F%2Fo%2Fa%3Btoken%3D***: refused"
            ),
            ("see file:///d/a;token=T6, then", "see file:///d/a;token=***, then"),
            ("(at https://h/x?sig=abc) failed", "(at https://h/x?sig=***) failed"),
            ("https://h/x?token=a:b:c", "https://h/x?token=***"),
            ("https://h/x?token=:", "https://h/x?token=***"),
            // The fragment's parameters (OAuth's implicit grant), as the query's.
            ("https://app/cb#access_token=AT1&expires_in=3600", "https://app/cb#access_token=***&expires_in=3600"),
            ("https://h/x?a=1#state=s&code=C2", "https://h/x?a=1#state=s&code=***"),
            // A URL percent-encoded once (a cache key holds its original's so; so may another URL's
            // query): its escaped delimiters read as delimiters, and the text stays as it was.
            (
                "image-variant custom:image%20http%3A%2F%2Fu%3Apw%40h%2Fp.jpg%3Ftoken%3DTOK%26w%3D2 fit",
                "image-variant custom:image%20http%3A%2F%2Fu%3A***%40h%2Fp.jpg%3Ftoken%3D***%26w%3D2 fit"
            ),
            ("x https%3a%2f%2fh%2fa%3fsig%3dS%3bq%3d1", "x https%3a%2f%2fh%2fa%3fsig%3d***%3bq%3d1"),
            (
                "https://h/login?next=https%3A%2F%2Fo%2Fcb%3Faccess_token%3DAT2&lang=en",
                "https://h/login?next=https%3A%2F%2Fo%2Fcb%3Faccess_token%3D***&lang=en"
            ),
            ("https://h/a%2Fb?w=1%26h%3D2", "https://h/a%2Fb?w=1%26h%3D2"),
            ("https://h/?next=https://o/cb?token=T3", "https://h/?next=https://o/cb?token=***"),
            ("100%25 of https://h/x", "100%25 of https://h/x"),
        ])
    func text(input: String, expected: String) {
        #expect(Redaction.text(input) == expected)
    }

    /// A hostile message cannot make the redaction deep or slow: a long run of quotes after a
    /// secret value, and a query of many parameters.
    @Test func longQuotesAndLongQueriesAreRedactedWhole() {
        let quotes = String(repeating: "'", count: 200_000)
        #expect(Redaction.text("https://h/?token=secret" + quotes) == "https://h/?token=***" + quotes)
        let query = (0..<20_000).map { "token\($0)=s\($0)" }.joined(separator: "&")
        let redacted = Redaction.text("https://h/?" + query)
        #expect(!redacted.contains("=s"))
        #expect(redacted.hasPrefix("https://h/?token0=***&token1=***"))
    }

    /// A value registered as a secret (a configured header's) is masked wherever it appears, as
    /// written and percent-encoded: an origin echoed one back in a redirect's query, and it was
    /// logged and stored. A value under 4 bytes is not looked for.
    @Test func registeredSecretsAreMaskedWhereverTheyAppear() {
        let secret = "token " + UUID().uuidString
        let encoded = "token%20" + secret.dropFirst(6)
        #expect(Redaction.text("GET http://h/x?echo=\(secret)") == "GET http://h/x?echo=\(secret)")
        Redaction.registerSecrets([secret, "abc"])
        #expect(Redaction.text("GET http://h/x?echo=\(secret) answered 404") == "GET http://h/x?echo=*** answered 404")
        #expect(Redaction.text("http://h/x?e=\(encoded)&n=1") == "http://h/x?e=***&n=1")
        #expect(Redaction.text("abc") == "abc")
    }

    /// However a server escapes an echo (any byte, either case, `+` for a space), it is found
    /// by decoding the text; text around it, and a `%` that is no escape, stay as they were.
    @Test func registeredSecretsAreFoundHoweverTheyAreEscaped() {
        let secret = "tok en-" + UUID().uuidString
        Redaction.registerSecrets([secret])
        func all(_ text: String, lower: Bool) -> String {
            text.utf8.map { String(format: lower ? "%%%02x" : "%%%02X", $0) }.joined()
        }
        #expect(Redaction.text("?e=\(all(secret, lower: false))&n=1") == "?e=***&n=1")
        #expect(Redaction.text("a \(all(secret, lower: true)) b") == "a *** b")
        #expect(Redaction.text("?e=" + secret.replacingOccurrences(of: " ", with: "+") + "&n=1") == "?e=***&n=1")
        #expect(Redaction.text("100% done, 50%2 left, a+b") == "100% done, 50%2 left, a+b")
    }

    /// A re-audit: servers write escapes in either case, and only `%2F` was looked for, so an
    /// echo with `%2f` was shown and stored.
    @Test func registeredSecretsAreMaskedWithEscapesInEitherCase() {
        let secret = "ab/cd+ef:" + UUID().uuidString
        Redaction.registerSecrets([secret])
        let upper = secret.replacingOccurrences(of: "/", with: "%2F").replacingOccurrences(of: "+", with: "%2B")
            .replacingOccurrences(of: ":", with: "%3A")
        #expect(Redaction.text("?echo=\(upper)&n=1") == "?echo=***&n=1")
        let lower = secret.replacingOccurrences(of: "/", with: "%2f").replacingOccurrences(of: "+", with: "%2b")
            .replacingOccurrences(of: ":", with: "%3a")
        #expect(Redaction.text("?echo=\(lower)&n=1") == "?echo=***&n=1")
    }

    /// An audit: libcurl sends a URL's user info as `Authorization: Basic <base64>`, and an
    /// origin that echoed that value back had it shown and stored unmasked.
    @Test func userInfoSecretsHoldTheBasicCredentialsLibcurlSends() throws {
        let url = try #require(URL(string: "http://alice:Pw%20SECRET99@h/x"))
        let secrets = Redaction.userInfoSecrets(of: url)
        #expect(secrets.contains("Pw%20SECRET99") && secrets.contains("Pw SECRET99"))
        #expect(secrets.contains(Data("alice:Pw SECRET99".utf8).base64EncodedString()))
        #expect(!secrets.contains("alice"))
        // Echoed without its padding, or in the URL-safe alphabet.
        let basic = Data("alice:Pw SECRET99".utf8).base64EncodedString()
        #expect(basic.hasSuffix("=") && secrets.contains(String(basic.prefix { $0 != "=" })))
        let token = try #require(URL(string: "https://ghp_abcdefgh12345678@h/x"))
        #expect(Redaction.userInfoSecrets(of: token).contains(Data("ghp_abcdefgh12345678:".utf8).base64EncodedString()))
    }

    /// Every transfer registers what of its request an origin could echo back, for an app of
    /// the library too (no configuration registered them): its credential headers' values and
    /// its URL's user info, with the `Basic` form.
    @Test func aTransferRegistersItsCredentials() async throws {
        let token = "tok-" + UUID().uuidString
        let password = "pw-" + UUID().uuidString.prefix(12)
        let basic = Data("bob:\(password)".utf8).base64EncodedString()
        let plain = "X-Tenant: " + UUID().uuidString
        #expect(Redaction.text("?a=\(token)&b=\(basic)") == "?a=\(token)&b=\(basic)")
        let transport = try CurlTransport()
        var request = HTTPRequest(url: try #require(URL(string: "http://bob:\(password)@127.0.0.1:9/x")))
        request.headers = ["Authorization": "Bearer " + token, "X-Tenant": String(plain.dropFirst(10))]
        request.retry = RetryPolicy.none
        await #expect(throws: TransportError.self) { try await transport.data(for: request) }
        await transport.shutdown()
        #expect(Redaction.text("?a=\(token)&b=Basic \(basic)") == "?a=***&b=Basic ***")
        #expect(Redaction.text("?a=Bearer%20\(token)") == "?a=Bearer%20***")
        #expect(Redaction.text("?a=Bearer%20" + token.replacingOccurrences(of: "-", with: "%2d")) == "?a=***")
        // A header named as no credential is not looked for (the CLI registers its -H values).
        #expect(Redaction.text("?t=" + plain.dropFirst(10)) == "?t=" + plain.dropFirst(10))
    }

    @Test func urlHidesASecretQueryValue() throws {
        let url = try #require(URL(string: "https://h/s/?token=ABC&path=x"))
        #expect(Redaction.url(url) == "https://h/s/?token=***&path=x")
        #expect(!Redaction.hasUserInfo(url))
    }

    @Test func urlKeepsTheUserNameAndHidesThePassword() throws {
        let url = try #require(URL(string: "https://alice:S3cret@example.com/storage/"))
        #expect(Redaction.url(url) == "https://alice:***@example.com/storage/")
        #expect(Redaction.hasUserInfo(url))
        #expect(!Redaction.hasUserInfo(try #require(URL(string: "https://example.com/a@b"))))
    }
}
