import Foundation
import Testing
import Transport

@testable import SyncDaemon

/// The config file: what a valid one gives, and every kind of mistake named with its line.
@Suite("watch --config: the YAML config file")
struct AgentConfigurationTests {
    /// Writes `text` as agent.yaml in a new folder and loads it.
    static func load(
        _ text: String, environment: [String: String] = ["PATH": "/usr/bin:/bin"],
        files: [String: String] = [:]
    ) throws(ConfigurationError) -> AgentConfiguration {
        let folder = NSTemporaryDirectory() + "agent-config-" + UUID().uuidString
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for (name, contents) in files { try? Data(contents.utf8).write(to: URL(fileURLWithPath: folder + "/" + name)) }
        try? Data(text.utf8).write(to: URL(fileURLWithPath: folder + "/agent.yaml"))
        return try AgentConfiguration.load(path: folder + "/agent.yaml", environment: environment)
    }

    /// The problems loading `text` gives.
    static func problems(_ text: String, environment: [String: String] = ["PATH": "/usr/bin:/bin"])
        -> [ConfigurationProblem]
    {
        do {
            _ = try load(text, environment: environment)
            return []
        } catch {
            return error.problems
        }
    }

    static let publicKey = Data((0..<32).map { UInt8($0) }).base64EncodedString()

    /// YAML merge keys (`<<: *anchor`, as docker-compose files use them) at any level: the
    /// mapping's own keys win, earlier merged mappings over later ones; a merge of a scalar is
    /// a problem on its line, and `<<` is never an unknown key.
    @Test func mergeKeysExpandWithOwnKeysWinning() throws {
        let configuration = try Self.load(
            """
            defaults: &common
              interval: 2m
              concurrency: 3
            storages:
              docs:
                <<: *common
                base-url: http://127.0.0.1:8080/docs/
                dir: /srv/docs
                concurrency: 4
              blog:
                <<: [{interval: 1h, max-failures: 5}, *common]
                base-url: http://127.0.0.1:8080/blog/
                dir: /srv/blog
            """)
        #expect(configuration.storages.map(\.name) == ["docs", "blog"])
        let docs = configuration.storages[0]
        let blog = configuration.storages[1]
        #expect(docs.interval == .seconds(120) && docs.concurrency == 4, "own keys win over merged ones")
        #expect(blog.interval == .seconds(3600) && blog.maxFailures == 5, "the earlier merged mapping wins")
        #expect(blog.concurrency == 3, "merged from the later mapping")

        let problems = Self.problems(
            """
            storages:
              docs:
                <<: 5
                base-url: http://127.0.0.1:8080/docs/
                dir: /srv/docs
            """)
        #expect(problems.map(\.line) == [3], "the line of the merged value: \(problems)")
        #expect(problems.first?.message.contains("a merge key (<<) takes a mapping") == true, "\(problems)")
        #expect(!problems.contains { $0.message.contains("unknown key") }, "\(problems)")

        // Aliases of aliases: a few lines that expand to 10⁹ nodes are refused, not walked.
        var laughs = ["defaults:", "  x-0: &l0 [a, a, a, a, a, a, a, a, a, a]"]
        for level in 1...8 {
            laughs.append(
                "  x-\(level): &l\(level) [" + Array(repeating: "*l\(level - 1)", count: 10).joined(separator: ", ")
                    + "]")
        }
        laughs += ["storages:", "  docs:", "    base-url: http://127.0.0.1:8080/docs/", "    dir: /srv/docs"]
        let bomb = Self.problems(laughs.joined(separator: "\n"))
        #expect(bomb.contains { $0.message.contains("expands to more than 200000 YAML nodes") }, "\(bomb)")
    }

    @Test("libyaml's refusals on one line with their place and a fix; a UTF-16 file is named as such")
    func yamlRefusalsAreOneLineWithAPlace() throws {
        let storage = "storages:\n  a:\n    base-url: http://127.0.0.1:8080/a/\n    dir: /srv/a\n"
        // A NUL byte: Yams' description is three lines (the line and a caret).
        let nul = Self.problems(storage.replacingOccurrences(of: "8080/a/", with: "8080/a/\u{0}b"))
        #expect(nul.count == 1)
        #expect(nul.first?.line == 3 && nul.first?.column == 39, "\(nul)")
        #expect(nul.first?.message.contains("(U+0000); remove it") == true, "\(nul)")
        #expect(nul.allSatisfy { !$0.message.contains("\n") }, "\(nul)")

        // Deep nesting: libyaml's words name its API (yaml_set_max_nest_level).
        let deep = Self.problems(storage + "    headers: " + String(repeating: "[", count: 1500) + "\n")
        #expect(deep.first?.message.contains("nests more than 1,000 levels deep") == true, "\(deep)")
        #expect(deep.allSatisfy { !$0.message.contains("yaml_set") }, "\(deep)")

        // A merge of a scalar alias: named at the merge key, not at the anchor 3 lines up.
        let scalar = Self.problems("x-name: &n hello\n" + storage + "    <<: *n\n")
        #expect(scalar.filter { $0.message.contains("merge key") }.map(\.line) == [6], "\(scalar)")

        // A list of scalars merged: one problem, not one per member.
        let list = Self.problems("x-list: &l [1, 2]\n" + storage + "    <<: *l\n")
        #expect(list.filter { $0.message.contains("merge key") }.count == 1, "\(list)")

        // libyaml's lines and columns: CR LF, CR and NEL each end a line; a column is a code point.
        let places: [(String, Int, Int)] = [
            ("a\r\nb\r\ncd", 3, 3), ("a\rb\rcd", 3, 3), ("a\u{85}b\u{2028}c", 3, 2), ("e\u{301}e\u{301}", 1, 5),
            ("", 1, 1),
        ]
        for (text, line, column) in places {
            let place = ConfigReader.place(in: Substring(text))
            #expect(place.line == line && place.column == column, "\(text.debugDescription): \(place)")
        }
        let crlf = Self.problems(
            storage.replacingOccurrences(of: "\n", with: "\r\n").replacingOccurrences(
                of: "8080/a/", with: "8080/a/\u{0}"))
        #expect(crlf.first?.line == 3 && crlf.first?.column == 39, "\(crlf)")

        // Windows' "Unicode" is UTF-16 with a byte order mark.
        let folder = NSTemporaryDirectory() + "agent-config-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for (name, encoding) in [("utf16", String.Encoding.utf16), ("utf32", .utf32)] {
            let path = folder + "/\(name).yaml"
            try #require(storage.data(using: encoding)).write(to: URL(fileURLWithPath: path))
            do {
                _ = try AgentConfiguration.load(path: path)
                Issue.record("\(name): loaded")
            } catch {
                let message = error.problems.first?.message ?? ""
                let label = name == "utf16" ? "UTF-16" : "UTF-32"
                #expect(message.contains("is \(label) text, not UTF-8"), "\(message)")
                #expect(message.contains("iconv -f \(label) -t UTF-8"), "\(message)")
            }
        }
    }

    @Test(
        "a full file: defaults inherited, per-storage overrides, secrets from env and file, relative paths from the file's folder"
    )
    func fullFile() throws {
        let configuration = try Self.load(
            """
            # two storages
            http: 127.0.0.1:9464
            log-format: json
            defaults:
              interval: 10m
              jitter: 0.2
              max-failures: 12
              full-check-interval: 6h
            storages:
              docs:
                base-url: https://raw.githubusercontent.com/acme/site/main/storage
                dir: mirror/docs
                state: state/docs.sqlite
                interval: 90
                splay: 1m
                headers:
                  Authorization: {env: GITHUB_TOKEN, prefix: "token "}
                  X-Fleet: eu-1
                trust-key: publisher.pub
                hooks:
                  post-update:
                    - command: [/bin/true, --flag]
                      timeout: 30s
                  pre-switch:
                    - [sh, -c, "test -f index.html"]
              blog:
                base-url: http://127.0.0.1:8080/blog/
                dir: /srv/blog
                force: yes
                concurrency: 2
                full-check-interval: 0
                headers:
                  Authorization: {file: token.txt}
            """, environment: ["PATH": "/usr/bin:/bin", "GITHUB_TOKEN": "s3cret"],
            files: ["publisher.pub": Self.publicKey + "\n", "token.txt": "Bearer t0ken\n"])
        #expect(configuration.endpoint == "127.0.0.1:9464")
        #expect(configuration.logFormat == "json")
        #expect(configuration.storages.map(\.name) == ["docs", "blog"])
        let docs = configuration.storages[0]
        let blog = configuration.storages[1]
        #expect(docs.interval == .seconds(90))
        #expect(blog.interval == .seconds(600), "inherited from defaults")
        #expect(docs.jitter == 0.2 && blog.jitter == 0.2)
        #expect(docs.maxFailures == 12)
        #expect(docs.splay == .seconds(60))
        #expect(docs.fullCheckInterval == .seconds(6 * 3600), "inherited from defaults")
        #expect(blog.fullCheckInterval == .zero, "0: every replay is a full check")
        #expect(
            docs.clientConfiguration(transport: nil, logger: nil).fullCheckInterval == .seconds(6 * 3600),
            "handed to the client")
        #expect(docs.directory.hasSuffix("/mirror/docs") && docs.directory.hasPrefix("/"))
        #expect(docs.statePath.hasSuffix("/state/docs.sqlite"))
        #expect(
            (docs.directory as NSString).deletingLastPathComponent
                == (docs.statePath as NSString).deletingLastPathComponent
                .replacingOccurrences(of: "/state", with: "/mirror"), "both relative to the file's folder")
        #expect(docs.headers.map(\.value) == ["token s3cret", "eu-1"])
        #expect(blog.headers.map(\.value) == ["Bearer t0ken"], "a secret file's trailing newline is dropped")
        #expect(docs.trustedKeys.count == 1)
        #expect(docs.postUpdateHooks.count == 1 && docs.preSwitchHooks.count == 1)
        #expect(
            docs.preSwitchHooks.first?.command.first == "/usr/bin/sh"
                || docs.preSwitchHooks.first?.command.first == "/bin/sh",
            "a bare program name is found on PATH")
        #expect(blog.force && blog.concurrency == 2)
        #expect(
            blog.statePath.hasSuffix(".sqlite") && !blog.statePath.hasPrefix("/srv/blog/"),
            "the default state path lies outside the folder")
    }

    @Test("storages may be a list of mappings with name:, and keys may be written with _ for -; JSON is YAML too")
    func otherSpellings() throws {
        let list = try Self.load(
            """
            storages:
              - name: docs
                base_url: http://127.0.0.1/docs/
                dir: /tmp/docs
                max_failures: 3
              - name: blog
                base-url: http://127.0.0.1/blog/
                dir: /tmp/blog
            """)
        #expect(list.storages.map(\.name) == ["docs", "blog"])
        #expect(
            list.storages[0].maxFailures == 3 && list.storages[0].baseURL.absoluteString == "http://127.0.0.1/docs/")
        let aliases = try Self.load(
            "storages:\n  docs:\n    url: http://127.0.0.1/docs/\n    folder: /tmp/docs\n    state_path: /tmp/docs.sqlite\n"
        )
        #expect(
            aliases.storages.first?.directory == "/tmp/docs" && aliases.storages.first?.statePath == "/tmp/docs.sqlite")
        let json = try Self.load(
            #"{"storages": {"docs": {"base-url": "http://127.0.0.1/docs/", "dir": "/tmp/docs", "interval": "90s"}}}"#)
        #expect(json.storages.first?.interval == .seconds(90))
        let problems = Self.problems(
            "storages:\n  - name: a\n    base-url: http://h/a/\n    dir: /tmp/a\n  - name: a\n    base-url: http://h/b/\n    dir: /tmp/b\n  - dir: /tmp/c\n"
        )
        #expect(problems.contains { $0.line == 5 && $0.message.contains("appears 2 times") }, "\(problems)")
        #expect(problems.contains { $0.line == 8 && $0.message.contains("no name:") }, "\(problems)")
    }

    /// The status may name the archive or the update list on another host: the storage's
    /// headers (its token) go only to the base URL's own origin.
    @Test(
        "headers go only to the storage's origin",
        arguments: [
            ("https://raw.example/o/r/main/RXCacheConfig/cacheStatus.json", true),
            ("https://RAW.example:443/o/r/main/RXCacheContent.zip", true),
            ("https://other.example/o/r/main/RXCacheContent.zip", false),
            ("http://raw.example/o/r/main/RXCacheContent.zip", false),
            ("https://raw.example:8443/x", false),
            ("https://raw.example.evil/x", false),
        ])
    func headersGoOnlyToTheStoragesOrigin(url: String, sent: Bool) async throws {
        var settings = StorageSettings(
            name: "a", baseURL: URL(string: "https://raw.example/o/r/main/")!, directory: "/tmp/a", statePath: nil)
        settings.headers = [.init(name: "X-Api-Key", value: "SECRET-VALUE", source: "env K")]
        let adapter = try #require(settings.clientConfiguration(transport: nil, logger: nil).requestAdapter)
        var request = HTTPRequest(url: URL(string: url)!)
        try await adapter.adapt(&request)
        #expect((request.headers["X-Api-Key"] == "SECRET-VALUE") == sent)
    }

    /// A dangling link as `dir` passed, then the agent refused it as "not a folder".
    @Test("a dir that is a symlink (even a dangling one) is refused, naming it")
    func aDirThatIsASymlinkIsRefused() throws {
        let folder = NSTemporaryDirectory() + "agent-link-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createSymbolicLink(atPath: folder + "/mirror", withDestinationPath: folder + "/not-yet")
        let problems = Self.problems("storages:\n  a:\n    base-url: http://h/a/\n    dir: \(folder)/mirror\n")
        #expect(
            problems.contains {
                $0.line == 4 && $0.message.contains("\(folder)/mirror is a symlink; give the real folder's path")
            }, "\(problems)")
    }

    /// A key `defaults` may not set is reported once, and not applied: a `defaults.state` made
    /// every storage report a state database shared with the first (outside audit).
    @Test("a refused defaults key is reported once and not applied")
    func aRefusedDefaultsKeyIsNotApplied() {
        let problems = Self.problems(
            "defaults:\n  state: /tmp/shared.sqlite\nstorages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n"
                + "  b:\n    base-url: http://h/b/\n    dir: /tmp/b\n")
        #expect(problems.count == 1, "\(problems)")
        #expect(problems.first?.message.contains("defaults.state: each storage has its own") == true, "\(problems)")
    }

    /// A secret file or a hook program inside a storage's dir: the first full check deleted
    /// them as files the storage does not have, and every reload then failed.
    @Test("a secret file inside a storage's dir is refused")
    func aSecretFileInsideADirIsRefused() {
        // dir `.`: the config file's own folder, where the secret file is.
        let text =
            "storages:\n  a:\n    base-url: http://h/a/\n    dir: .\n    headers:\n      Authorization: {file: token.txt}\n"
        do {
            _ = try Self.load(text, files: ["token.txt": "x"])
        } catch {
            #expect(
                error.problems.contains {
                    $0.message.contains("the secret file of Authorization")
                        && $0.message.contains("lies inside storages.a's folder")
                }, "\(error.problems)")
            return
        }
        Issue.record("loaded")
    }

    @Test("a header's description never shows its value")
    func secretsStayHidden() throws {
        let configuration = try Self.load(
            """
            storages:
              a:
                base-url: http://127.0.0.1/a/
                dir: /tmp/a
                headers:
                  Authorization: {env: TOKEN}
            """, environment: ["TOKEN": "very-secret-value"])
        let header = try #require(configuration.storages.first?.headers.first)
        #expect(header.value == "very-secret-value")
        #expect(!header.description.contains("very-secret"))
        #expect(header.description == "Authorization: <from env TOKEN>")
    }

    @Test("a storage's header values are masked in every message once its client is configured")
    func headerValuesAreRegisteredAsSecrets() throws {
        let value = "sekrit-" + UUID().uuidString
        var settings = StorageSettings(
            name: "a", baseURL: try #require(URL(string: "http://h/a/")), directory: "/tmp/a", statePath: nil)
        settings.headers = [StorageSettings.Header(name: "Authorization", value: "Bearer " + value, secret: value)]
        _ = settings.clientConfiguration(transport: nil, logger: nil)
        #expect(Redaction.text("GET http://h/a/x?echo=\(value)") == "GET http://h/a/x?echo=***")
    }

    @Test(
        "each mistake is named with its line",
        arguments: [
            // (file, line, a fragment of the message)
            (
                "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n    intreval: 5m\n", 5,
                "did you mean interval"
            ),
            (
                "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n    interval: 5 minutes\n", 5,
                "is not a duration"
            ),
            ("storages:\n  a:\n    dir: /tmp/a\n", 3, "no base-url"),
            ("storages:\n  a:\n    base-url: ftp://h/a/\n    dir: /tmp/a\n", 3, "is not an http(s) URL"),
            ("storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n    jitter: 2\n", 5, "between 0 and 0.9"),
            ("storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n    jitter: 0x0.1\n", 5, "is not a number"),
            ("storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n    jitter: 1e-1\n", 5, "is not a number"),
            (
                "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n    headers:\n      Authorization: {env: NOPE_UNSET}\n",
                6, "NOPE_UNSET is not set"
            ),
            // The value itself where the variable's name belongs: refused, never quoted back.
            (
                "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n    headers:\n      Authorization: {env: \"token ghp_LEAKME\"}\n",
                6, "Authorization.env must be the name of an environment variable"
            ),
            (
                "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n    headers:\n      Authorization: {file: /nonexistent/token}\n",
                6, "the secret file /nonexistent/token does not exist; check the path"
            ),
            // What a secret file is when it is none, as the config file's own refusals say.
            (
                "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n    headers:\n      Authorization: {file: /tmp}\n",
                6, "the secret file /tmp is a folder, not a file; give a file's path"
            ),
            (
                "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n    headers:\n      Authorization: {file: /dev/zero}\n",
                6, "the secret file /dev/zero is"
            ),
            (
                "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n  b:\n    base-url: http://h/b/\n    dir: /tmp/a\n",
                5, "also storages.a's folder"
            ),
            (
                "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n  b:\n    base-url: http://h/b/\n    dir: /tmp/a/b\n",
                5, "nest"
            ),
            (
                "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n  a:\n    base-url: http://h/b/\n    dir: /tmp/b\n",
                5, "appears twice in one mapping (first on line 2)"
            ),
            // Two spellings of one key: which counted depended on their order, silently.
            (
                "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n    folder: /tmp/b\n", 5,
                "storages.a: 'folder' gives dir again ('dir' on line 4 gives it); keep one"
            ),
            (
                "storages:\n  a:\n    url: http://h/a/\n    base_url: http://h/b/\n    dir: /tmp/a\n", 4,
                "'base_url' gives base-url again"
            ),
            (
                "defaults:\n  interval: 5m\n  trust_keys: []\n  trust-key: []\nstorages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n",
                4, "defaults: 'trust-key' gives trust-key again"
            ),
            (
                "log-format: json\nlog_format: text\nstorages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n", 2,
                "the top level: 'log_format' gives log-format again"
            ),
            (
                "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n    hooks:\n      post-update:\n        - command: [no-such-program-xyz]\n",
                7, "no executable no-such-program-xyz on PATH"
            ),
            (
                "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n    hooks:\n      after: []\n", 6,
                "unknown key 'after'"
            ),
            ("storages:\n  a:\n    base-url: [http://h/a/\n    dir: /tmp/a\n", 4, "not valid YAML"),
            ("storages:\n  'bad name':\n    base-url: http://h/a/\n    dir: /tmp/a\n", 2, "storage name 'bad name'"),
            (
                "defaults:\n  dir: /tmp/x\nstorages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n", 2,
                "each storage has its own"
            ),
            ("storage:\n  a: {}\n", 1, "unknown key 'storage'"),
            // A NUL cut the path at it in every system call (an outside audit): refused in any field.
            ("storages:\n  a:\n    base-url: http://h/a/\n    dir: \"/tmp/a\\0b\"\n", 4, "contains a NUL character"),
            (
                "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n    headers:\n      X: {env: HOME, file: /etc/hostname}\n",
                6, "give either env: or file:, not both"
            ),
            // The staging folder's name would be over 255 bytes: every check failed, forever.
            (
                "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/" + String(repeating: "a", count: 250)
                    + "\n", 4,
                "over the 255 bytes a name can have"
            ),
            ("storages: {}\n", 1, "is empty"),
            ("http: 0.0.0.0:99999\nstorages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n", 1, "http:"),
            // What the agent refuses when it starts a storage is refused here too.
            ("storages:\n  a:\n    base-url: file:///srv/a/\n    dir: /tmp/a\n", 3, "is not an http(s) URL"),
            ("storages:\n  a:\n    base-url: http://h/a/\n    dir: /etc/hostname\n", 4, "exists and is not a folder"),
            ("storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n    state: /tmp\n", 5, "is not a file"),
            (
                "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/cc/m\n  b:\n    base-url: http://h/b/\n    dir: /tmp/cc/n\n    state: /tmp/cc/m/b.sqlite\n",
                5, "lies inside storages.a's folder"
            ),
            // Another storage's staging folder is emptied by its updates too (an outside audit).
            (
                "storages:\n  d:\n    base-url: http://h/a/\n    dir: /tmp/cc/n\n  h:\n    base-url: http://h/b/\n    dir: /tmp/cc/h\n    state: /tmp/cc/.n.content-sync/h.sqlite\n",
                5, "lies inside storages.d's staging folder /tmp/cc/.n.content-sync"
            ),
            (
                "storages:\n  d:\n    base-url: http://h/a/\n    dir: /tmp/cc/n\n  f:\n    base-url: http://h/b/\n    dir: /tmp/cc/.n.content-sync\n",
                5,
                "storages.f's folder /tmp/cc/.n.content-sync and storages.d's staging folder /tmp/cc/.n.content-sync are one folder"
            ),
            (
                "storages:\n  d:\n    base-url: http://h/a/\n    dir: /tmp/cc/n\n  f:\n    base-url: http://h/b/\n    dir: /tmp/cc/.n.content-sync/x\n",
                5, "nest"
            ),
        ])
    func mistakes(file: String, line: Int, fragment: String) {
        let problems = Self.problems(file)
        #expect(problems.contains { $0.line == line && $0.message.contains(fragment) }, "\(problems)")
    }

    @Test(
        "trust-key refuses what --trust-key refuses: a private key (owner-only, with a .pub beside it) and a file that is no key"
    )
    func trustKeyFiles() throws {
        let folder = NSTemporaryDirectory() + "agent-keys-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Data((Self.publicKey + "\n").utf8).write(to: URL(fileURLWithPath: folder + "/publisher"))
        chmod(folder + "/publisher", 0o600)
        try Data((Self.publicKey + "\n").utf8).write(to: URL(fileURLWithPath: folder + "/publisher.pub"))
        try Data("not a key\n".utf8).write(to: URL(fileURLWithPath: folder + "/junk"))
        let file = { (key: String) in
            "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n    trust-key: \(folder)/\(key)\n"
        }
        #expect(
            Self.problems(file("publisher")).contains {
                $0.line == 5 && $0.message.contains("looks like a private key")
            })
        #expect(Self.problems(file("junk")).contains { $0.line == 5 && $0.message.contains("sync-agent keygen") })
        #expect(Self.problems(file("publisher.pub")).isEmpty)
    }

    @Test(
        "a header is an HTTP token and one line, whether its value is written or a secret",
        arguments: [
            ("Authorization", "token abc", nil), ("X-Fleet_1", "eu", nil), ("", "v", "is not a header name"),
            ("Bad Name", "v", "is not a header name"),
            ("X-A", "a\r\nX-Injected: 1", "line break"), ("X-A", "a\nb", "line break"), ("X-A", "a\u{0}b", "NUL"),
            // The engine's own: framing, ranges, conditional requests (an outside audit).
            ("Content-Length", "5", "is written by the transport itself"),
            ("Transfer-Encoding", "chunked", "is written by the transport itself"),
            ("X-A", "v\u{0B}x", "control character"), ("X-A", "v\u{7F}", "control character"),
            ("if-none-match", "*", "is set by sync-agent itself"),
            ("Range", "bytes=0-1", "is set by sync-agent itself"), ("Host", "h", "is written by the transport itself"),
            ("Accept", "application/json", nil), ("Cookie", "a=b", nil),
        ] as [(String, String, String?)])
    func headerChecks(name: String, value: String, expected: String?) {
        let problem = StorageSettings.Header.problem(name: name, value: value)
        if let expected {
            #expect(problem?.contains(expected) == true, "\(String(describing: problem))")
        } else {
            #expect(problem == nil)
        }
    }

    @Test("a written header value with a line break is refused with its line, as a secret's is")
    func writtenHeaderLineBreak() {
        let problems = Self.problems(
            "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n    headers:\n      X-A: \"one\\r\\nX-B: two\"\n"
        )
        #expect(problems.contains { $0.line == 6 && $0.message.contains("line break") }, "\(problems)")
    }

    /// Folders are found by path, not compared pair by pair: among many storages, a dir inside
    /// an earlier storage's, and an earlier dir inside a later storage's, are each named once,
    /// on the later storage, with the same words as before.
    @Test("nesting among many storages is found both ways, once each")
    func nestingAmongManyStorages() {
        var file = "storages:\n"
        for index in 0..<300 {
            let dir =
                switch index {
                case 250: "/tmp/cc/many/5/inner" // inside storage 5's
                case 260: "/tmp/cc/many/outer" // holds storage 7's
                case 7: "/tmp/cc/many/outer/seven"
                default: "/tmp/cc/many/\(index)"
                }
            file += "  s\(index):\n    base-url: http://h/\(index)/\n    dir: \(dir)\n"
        }
        let nests = Self.problems(file).filter { $0.message.contains("nest") }
        #expect(nests.count == 2, "\(nests)")
        #expect(
            nests.contains {
                $0.message.hasPrefix(
                    "storages.s250's folder /tmp/cc/many/5/inner and storages.s5's folder /tmp/cc/many/5 nest")
            }, "\(nests)")
        #expect(
            nests.contains {
                $0.message.hasPrefix(
                    "storages.s260's folder /tmp/cc/many/outer and storages.s7's folder /tmp/cc/many/outer/seven nest")
            }, "\(nests)")
    }

    /// A file of many mistakes lists the first 500 and counts the rest (200,000 unknown keys
    /// printed as many lines, and took minutes).
    @Test("past 500 problems, the rest are counted, not listed")
    func manyProblemsAreCounted() throws {
        var file = "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n"
        for index in 0..<2_000 { file += "k\(index): 1\n" }
        let path = "/tmp/many-problems-\(UUID().uuidString).yaml"
        try Data(file.utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect {
            try AgentConfiguration.load(path: path, environment: [:])
        } throws: { error in
            guard let error = error as? ConfigurationError else { return false }
            return error.problems.count == 500 && error.unlisted == 1_500 && error.count == 2_000
                && error.description.hasSuffix(
                    "and 1500 more problems, not listed; fix these first, then run check-config again")
        }
    }

    @Test("a list item without name: is named as such, and the list is not called empty")
    func aNamelessItemIsNotAnEmptyList() {
        let problems = Self.problems("storages:\n  - base-url: http://h/a/\n    dir: /tmp/a\n")
        #expect(problems.contains { $0.message.contains("no name:") }, "\(problems)")
        #expect(!problems.contains { $0.message.contains("is empty") }, "\(problems)")
    }

    @Test("every problem in a file is listed, not only the first")
    func allProblems() {
        let problems = Self.problems(
            "storages:\n  a:\n    base-url: http://h/a/\n    dir: /tmp/a\n    jitter: 3\n    concurrency: 0\n    colour: red\n"
        )
        #expect(problems.map(\.line) == [5, 6, 7], "\(problems)")
    }

    @Test("an error prints as file:line:column: message, one problem a line")
    func errorText() {
        let error = ConfigurationError(
            path: "agent.yaml",
            problems: [.init(line: 3, column: 5, message: "bad"), .init(line: nil, message: "worse")])
        #expect(error.description == "agent.yaml:3:5: bad\nagent.yaml: worse")
    }

    @Test("a reload's difference by name: added, removed, changed, unchanged")
    func difference() throws {
        let old = AgentConfiguration(storages: [
            StorageSettings(name: "a", baseURL: URL(string: "http://h/a/")!, directory: "/tmp/a"),
            StorageSettings(name: "b", baseURL: URL(string: "http://h/b/")!, directory: "/tmp/b"),
            StorageSettings(name: "c", baseURL: URL(string: "http://h/c/")!, directory: "/tmp/c"),
        ])
        var new = old
        new.storages.remove(at: 1)
        new.storages[1].interval = .seconds(60)
        new.storages.append(StorageSettings(name: "d", baseURL: URL(string: "http://h/d/")!, directory: "/tmp/d"))
        #expect(
            Agent.difference(from: old, to: new)
                == Agent.Difference(added: ["d"], removed: ["b"], changed: ["c"], unchanged: ["a"]))
    }
}
