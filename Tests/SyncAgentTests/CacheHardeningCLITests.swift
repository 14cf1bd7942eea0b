import Foundation
import StorageServer
import Testing

/// `sync-agent cache` as a careless user and a hostile input would drive it: closed pipes, huge
/// numbers, mistyped folders, secrets in URLs, values too big to keep, bytes that are not text.
@Suite("sync-agent cache: pipes, ranges, refused folders, secrets, notices, JSON")
struct CacheHardeningCLITests {
    /// Runs `script` with bash (pipes, and arguments that are not UTF-8, which a Swift string
    /// cannot pass), returning what it printed. Spawned as ``ChildProcess`` (not Foundation's
    /// `Process`, whose `run()` can crash on Linux: swift-corelibs-foundation #5472).
    static func bash(_ script: String) async throws -> (stdout: String, stderr: String) {
        try await withScratch { scratch in
            let (out, err) = (scratch + "/bash.out", scratch + "/bash.err")
            _ = try await ChildProcess("/bin/bash", ["-c", script], stdout: out, stderr: err).exitStatus()
            return (
                String(decoding: (try? Data(contentsOf: URL(fileURLWithPath: out))) ?? Data(), as: UTF8.self),
                String(decoding: (try? Data(contentsOf: URL(fileURLWithPath: err))) ?? Data(), as: UTF8.self)
            )
        }
    }

    @Test("a full disk under stdout fails get, ls and stats with exit 5 naming stdout; nothing claims success")
    func stdoutWriteFailure() async throws {
        try await CacheCommandTests.withServer { scratch, server, site in
            try String(repeating: "y", count: 100_000).write(toFile: site + "/f.txt", atomically: true, encoding: .utf8)
            let url = server.url(for: "f.txt").absoluteString
            let config = scratch + "/agent.yaml"
            try "storages:\n  a:\n    base-url: http://h.invalid/a/\n    dir: \(scratch)/a\n".write(
                toFile: config, atomically: true, encoding: .utf8)
            for command in [
                "cache get '\(url)' --cache '\(scratch)/c'", "cache get '\(url)' --cache '\(scratch)/c' --json",
                "cache ls --cache '\(scratch)/c'", "cache stats --cache '\(scratch)/c'",
                // check-config's verdict too: an OK that could not be written is no OK.
                "check-config '\(config)'",
                // And every other command's answer (outside audit: these exited 0).
                "--version", "keygen --out '\(scratch)/key'",
                "reset --dir '\(scratch)/never' --state '\(scratch)/never.sqlite'",
                // And the removal reports (last: they empty the cache).
                "cache rm '\(url)' --cache '\(scratch)/c'", "cache purge --all --cache '\(scratch)/c'",
            ] {
                let result = try await Self.bash("'\(SyncAgentBinary.path)' \(command) > /dev/full; echo $?")
                #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "5", "\(command)")
                #expect(result.stderr.contains("cannot write to stdout"), "\(command): \(result.stderr)")
            }
        }
    }

    /// `verify`'s differences are its answer: with stdout on a full disk it exited 0.
    /// An `-o` that cannot be written was found only after the fetch, which had stored the item
    /// (outside audit): it is refused first, with no request made and nothing stored.
    @Test("an -o whose folder is missing or a folder is refused before the fetch")
    func unwritableOutputIsRefusedFirst() async throws {
        try await CacheCommandTests.withServer { scratch, server, site in
            try "x".write(toFile: site + "/f.txt", atomically: true, encoding: .utf8)
            let url = server.url(for: "f.txt").absoluteString
            server.resetLog()
            for (output, code) in [(scratch + "/missing/dir/x", Int32(5)), (scratch, Int32(6))] {
                let result = try await SyncAgentBinary.run(
                    ["cache", "get", url, "--cache", scratch + "/c", "-o", output], scratch: scratch)
                #expect(result.status == code, "\(output): \(result.stderr)")
                #expect(result.stderr.contains(output), "\(result.stderr)")
            }
            #expect(server.requests().isEmpty, "nothing fetched")
            // And empty paths given where a file or folder belongs are named as such.
            let serve = try await SyncAgentBinary.run(["serve", ""], scratch: scratch)
            #expect(serve.status == 6 && serve.stderr.contains("the folder to serve is empty"), "\(serve.stderr)")
            let check = try await SyncAgentBinary.run(["check-config", ""], scratch: scratch)
            #expect(check.status == 6 && check.stderr.contains("path is empty"), "\(check.stderr)")
        }
    }

    @Test("verify with stdout on a full disk exits 5 naming stdout")
    func verifyStdoutWriteFailure() async throws {
        try await withScratch { scratch in
            try await withStorageServer(root: URL(fileURLWithPath: SyncAgentCLITests.exampleStorage + "/1.2")) {
                server in
                let folder = ["--dir", scratch + "/content", "--state", scratch + "/state.sqlite"]
                let sync = try await SyncAgentBinary.run(
                    ["sync", "--base-url", server.baseURL!.absoluteString] + folder, scratch: scratch)
                #expect(sync.status == 0, "\(sync.stderr)")
                let result = try await Self.bash(
                    "'\(SyncAgentBinary.path)' verify --dir '\(scratch)/content' --state '\(scratch)/state.sqlite' > /dev/full; echo $?"
                )
                #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "5")
                #expect(result.stderr.contains("cannot write to stdout"), "\(result.stderr)")
            }
        }
    }

    @Test("a reader that closes the pipe early ends get quietly, never with a signal")
    func closedPipe() async throws {
        try await CacheCommandTests.withServer { scratch, server, site in
            try String(repeating: "x", count: 2_000_000).write(
                toFile: site + "/big.txt", atomically: true, encoding: .utf8)
            let url = server.url(for: "big.txt").absoluteString
            let script =
                "'\(SyncAgentBinary.path)' cache get '\(url)' --cache '\(scratch)/c' | head -c 10 >/dev/null; echo ${PIPESTATUS[0]}"
            let status = try await Self.bash(script).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            // 0: it wrote what it could and ended; 128+N would be a signal (SIGILL was 132).
            #expect(status == "0")
        }
    }

    @Test(
        "numbers out of range exit 6 naming the option",
        arguments: [
            ["--ttl", "1e16"], ["--ttl=-1"], ["--ttl", "nan"], ["--ttl", "inf"],
            // Decimal only, as --expires: Double also reads these.
            ["--ttl", "0x10"], ["--ttl", "1e9"], ["--ttl", "-0"], ["--expires", "36501d"],
            ["--max-size", "0"], ["--max-size", "99999999999999999999999"], ["--max-size=-5"], ["--max-size", "lots"],
            // A negative number after a space is the option's value too, not an option (exit 64).
            ["--ttl", "-1"], ["--max-size", "-5"], ["--expires", "-9223372036854775808"],
        ])
    func rangeChecks(option: [String]) async throws {
        try await withScratch { scratch in
            let result = try await SyncAgentBinary.run(
                ["cache", "get", "http://127.0.0.1:9/x", "--cache", scratch + "/c"] + option, scratch: scratch)
            #expect(result.status == 6, "\(option): \(result.stderr)")
            #expect(result.stderr.contains(String(option[0].prefix { $0 != "=" })))
        }
    }

    @Test("ls, stats, rm and purge refuse a missing, empty or foreign folder with exit 5 and create or delete nothing")
    func refusedFolders() async throws {
        try await withScratch { scratch in
            let missing = scratch + "/mistyped"
            let foreign = scratch + "/game-project"
            let empty = scratch + "/empty"
            try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
            chmod(empty, 0o700)
            try FileManager.default.createDirectory(
                atPath: foreign + "/blobs/textures", withIntermediateDirectories: true)
            try Data("wood".utf8).write(to: URL(fileURLWithPath: foreign + "/blobs/textures/wood.png"))
            for folder in [missing, foreign, empty] {
                for command in [
                    ["ls"], ["stats"], ["purge", "--all"], ["rm", "--prefix", "http://"],
                    ["rm", "http://example.com/a"],
                ] {
                    let result = try await SyncAgentBinary.run(
                        ["cache"] + command + ["--cache", folder], scratch: scratch)
                    #expect(result.status == 5, "\(command) \(folder): \(result.stderr)")
                    #expect(result.stderr.contains(folder))
                }
                if folder == foreign {
                    let get = try await SyncAgentBinary.run(
                        ["cache", "get", "http://127.0.0.1:9/x", "--cache", foreign], scratch: scratch)
                    #expect(get.status == 5, "\(get.stderr)")
                }
            }
            #expect(!FileManager.default.fileExists(atPath: missing))
            #expect(
                try FileManager.default.contentsOfDirectory(atPath: empty) == [], "ls, stats, rm, purge made a cache")
            #expect(
                try Data(contentsOf: URL(fileURLWithPath: foreign + "/blobs/textures/wood.png")) == Data("wood".utf8))
        }
    }

    @Test("rm --prefix '' is refused (exit 6, pointing at purge --all) and removes nothing")
    func emptyPrefix() async throws {
        try await CacheCommandTests.withServer { scratch, server, site in
            try "a".write(toFile: site + "/a.txt", atomically: true, encoding: .utf8)
            let cache = scratch + "/c"
            #expect(
                try await SyncAgentBinary.run(
                    ["cache", "get", server.url(for: "a.txt").absoluteString, "--cache", cache], scratch: scratch
                ).status == 0)
            let result = try await SyncAgentBinary.run(
                ["cache", "rm", "--prefix", "", "--cache", cache], scratch: scratch)
            #expect(result.status == 6)
            #expect(result.stderr.contains("purge --all"))
            #expect(
                try await SyncAgentBinary.run(["cache", "ls", "--cache", cache], scratch: scratch).stdout.split(
                    separator: "\n"
                ).count == 1)
        }
    }

    @Test("a password or token in the URL shows nowhere: ls, --json, warnings, errors, the index")
    func secretsInURLs() async throws {
        try await CacheCommandTests.withServer { scratch, server, site in
            try "private".write(toFile: site + "/private", atomically: true, encoding: .utf8)
            let cache = scratch + "/c"
            let port = server.url(for: "private").port!
            let withPassword = "http://alice:S3cretPassw0rd@127.0.0.1:\(port)/private"
            let withToken = "http://ghpT0kenSecret@127.0.0.1:\(port)/private"
            var outputs: [CommandResult] = []
            for url in [withPassword, withToken] {
                outputs.append(
                    try await SyncAgentBinary.run(
                        ["cache", "get", url, "--cache", cache, "--ttl", "0"], scratch: scratch))
                // Stale now, and the origin gone for this one: the warning quotes the URL.
                outputs.append(
                    try await SyncAgentBinary.run(
                        ["cache", "get", url.replacingOccurrences(of: "/private", with: "/missing"), "--cache", cache],
                        scratch: scratch))
            }
            outputs.append(try await SyncAgentBinary.run(["cache", "ls", "--cache", cache], scratch: scratch))
            outputs.append(
                try await SyncAgentBinary.run(["cache", "ls", "--json", "--cache", cache], scratch: scratch))
            outputs.append(
                try await SyncAgentBinary.run(
                    ["cache", "get", "--json", withPassword, "--cache", cache, "-o", scratch + "/out"], scratch: scratch
                ))
            await server.stop()
            outputs.append(
                try await SyncAgentBinary.run(["cache", "get", withPassword, "--cache", cache], scratch: scratch))
            let everything = outputs.map { $0.stdout + $0.stderr }.joined()
            #expect(!everything.contains("S3cretPassw0rd"))
            #expect(!everything.contains("ghpT0kenSecret"))
            #expect(everything.contains("alice:***@"))
            for name in try FileManager.default.contentsOfDirectory(atPath: cache) where name.hasPrefix("index.sqlite")
            {
                let bytes = try Data(contentsOf: URL(fileURLWithPath: cache + "/" + name))
                #expect(bytes.range(of: Data("S3cretPassw0rd".utf8)) == nil, "\(name)")
                #expect(bytes.range(of: Data("ghpT0kenSecret".utf8)) == nil, "\(name)")
            }
        }
    }

    @Test("a value too big for --max-size is written with a one-line notice, exit 0, and not kept")
    func tooBigToKeep() async throws {
        try await CacheCommandTests.withServer { scratch, server, site in
            let body = String(repeating: "z", count: 50_000)
            try body.write(toFile: site + "/big.txt", atomically: true, encoding: .utf8)
            let cache = scratch + "/c"
            let result = try await SyncAgentBinary.run(
                ["cache", "get", server.url(for: "big.txt").absoluteString, "--cache", cache, "--max-size", "10000"],
                scratch: scratch)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdout == body)
            #expect(result.stderr.contains("not kept") && result.stderr.split(separator: "\n").count == 1)
            let json = try await SyncAgentBinary.run(
                ["cache", "get", "--json", server.url(for: "big.txt").absoluteString, "--cache", cache],
                scratch: scratch)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
            #expect(object["stored"] as? Bool == false)
            #expect(object["source"] as? String == "network")
            #expect(try await SyncAgentBinary.run(["cache", "ls", "--cache", cache], scratch: scratch).stdout.isEmpty)
        }
    }

    @Test("--json on get, rm and purge; JSON keeps slashes as they are")
    func jsonOutputs() async throws {
        try await CacheCommandTests.withServer { scratch, server, site in
            try "a".write(toFile: site + "/a.txt", atomically: true, encoding: .utf8)
            let url = server.url(for: "a.txt").absoluteString
            let cache = scratch + "/c"
            let first = try await SyncAgentBinary.run(
                ["cache", "get", "--json", url, "--cache", cache], scratch: scratch)
            #expect(first.stdout.contains("\"url\" : \"http://"), "\(first.stdout)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(first.stdout.utf8)) as? [String: Any])
            #expect(
                object["source"] as? String == "network" && object["size"] as? Int == 1
                    && object["stored"] as? Bool == true)
            let second = try #require(
                try JSONSerialization.jsonObject(
                    with: Data(
                        try await SyncAgentBinary.run(
                            ["cache", "get", "--json", url, "--cache", cache], scratch: scratch
                        ).stdout.utf8)) as? [String: Any])
            #expect(second["source"] as? String == "disk")
            #expect(
                !(try await SyncAgentBinary.run(["cache", "ls", "--json", "--cache", cache], scratch: scratch).stdout
                    .contains("\\/")))
            let removed = try await SyncAgentBinary.run(
                ["cache", "rm", "--json", url, "--cache", cache], scratch: scratch)
            #expect(
                (try JSONSerialization.jsonObject(with: Data(removed.stdout.utf8)) as? [String: Any])?["removed"]
                    as? Int == 1)
            let purged = try await SyncAgentBinary.run(
                ["cache", "purge", "--all", "--json", "--cache", cache], scratch: scratch)
            #expect(
                (try JSONSerialization.jsonObject(with: Data(purged.stdout.utf8)) as? [String: Any])?["removed"] as? Int
                    == 0)
        }
    }

    @Test("a --param that is not UTF-8 is refused (exit 6), never folded into U+FFFD")
    func bytesThatAreNotText() async throws {
        try await withScratch { scratch in
            // Through bash: Foundation's Process cannot pass bytes that are not UTF-8.
            let script =
                "'\(SyncAgentBinary.path)' cache get http://127.0.0.1:9/x --cache '\(scratch)/c' --param q=$'\\xff\\xfe'; echo \" status=$?\""
            let (stdout, stderr) = try await Self.bash(script)
            #expect(stdout.contains("status=6"), "\(stdout) \(stderr)")
            #expect(stderr.contains("not UTF-8"))
        }
    }

    /// Every command refuses an argument that is not UTF-8 (a path, an account, a header, a
    /// URL), naming it by its number and option, never its bytes: it may be a secret.
    @Test(arguments: [
        (
            "cache get http://127.0.0.1:9/x --cache C -H $'Authorization: Bearer S3CRET\\xff'",
            "argument 7 (the value of -H)"
        ),
        ("cache get $'http://u:S3CRET\\xff@127.0.0.1:9/x' --cache C", "argument 3 "),
        (
            "image get http://127.0.0.1:9/x.png --cache C --size 5x5 --account $'S3CRET\\xfe'",
            "argument 9 (the value of --account)"
        ),
        (
            "sync --base-url http://127.0.0.1:9/ --dir $'D/S3CRET\\xff' --state D/s.sqlite",
            "argument 5 (the value of --dir)"
        ),
        // After an option with its value inline, that option is no name to show (it holds a secret).
        ("cache get http://127.0.0.1:9/x --cache C '--header=X-Key: S3CRET' $'S3CRET\\xff'", "argument 7 "),
    ])
    func anArgumentThatIsNotUTF8IsRefusedByNumber(command: String, named: String) async throws {
        try await withScratch { scratch in
            let line = command.replacingOccurrences(of: " C", with: " '\(scratch)/c'")
                .replacingOccurrences(of: "'D/", with: "'\(scratch)/d/").replacingOccurrences(
                    of: " D/", with: " \(scratch)/")
            let (stdout, stderr) = try await Self.bash("'\(SyncAgentBinary.path)' \(line); echo \" status=$?\"")
            #expect(stdout.contains("status=6"), "\(stdout) \(stderr)")
            #expect(
                stderr.contains(named + (named.hasSuffix(" ") ? "" : " ")) && stderr.contains("is not UTF-8 text"),
                "\(stderr)")
            #expect(!stderr.contains("S3CRET"), "\(stderr)")
            #expect(!FileManager.default.fileExists(atPath: scratch + "/c"), "nothing ran")
            #expect(!FileManager.default.fileExists(atPath: scratch + "/d"), "nothing ran")
        }
    }

    /// A usage error never quotes a value of the command line (a stray word of an unquoted
    /// `-H Authorization: Bearer …`, a surplus URL with a password, an unknown option's inline
    /// value); it names the argument by its number, and keeps option names.
    @Test func aUsageErrorQuotesNoValue() async throws {
        try await withScratch { scratch in
            let cache = scratch + "/c"
            let unquoted = try await SyncAgentBinary.run(
                [
                    "cache", "get", "http://127.0.0.1:9/x", "--cache", cache, "-H", "Authorization:", "Bearer",
                    "S3CRET1",
                ],
                scratch: scratch)
            #expect(unquoted.status == 64, "\(unquoted.stderr)")
            #expect(unquoted.stderr.contains("(argument 8), (argument 9)"), "\(unquoted.stderr)")
            let surplus = try await SyncAgentBinary.run(
                ["cache", "rm", "http://127.0.0.1:9/x", "http://u:S3CRET2@127.0.0.1:9/y", "--cache", cache],
                scratch: scratch)
            #expect(surplus.status == 64 && surplus.stderr.contains("(argument 4)"), "\(surplus.stderr)")
            let unknown = try await SyncAgentBinary.run(
                ["cache", "get", "http://127.0.0.1:9/x", "--cache", cache, "--tokn=S3CRET3"], scratch: scratch)
            #expect(unknown.status == 64 && unknown.stderr.contains("--tokn"), "\(unknown.stderr)")
            for result in [unquoted, surplus, unknown] {
                #expect(!result.stderr.contains("S3CRET") && !result.stdout.contains("S3CRET"), "\(result.stderr)")
                #expect(result.stderr.contains("Usage: sync-agent cache"), "\(result.stderr)")
            }
            // A mistyped command is shown: a word before any option.
            let typo = try await SyncAgentBinary.run(["cache", "gett", "http://127.0.0.1:9/x"], scratch: scratch)
            #expect(typo.status == 64 && typo.stderr.contains("'gett'"), "\(typo.stderr)")
            let blank = try await SyncAgentBinary.run(
                ["cache", "get", "http://127.0.0.1:9/x", "--cache", cache, "--account", " \t"], scratch: scratch)
            #expect(blank.status == 6 && blank.stderr.contains("--account is empty"), "\(blank.stderr)")
        }
    }

    /// A cache folder of another user's (root's, here) is named as such, not as "another
    /// program's": its tag and index are this cache's, only this user may not read them. The
    /// index this user may read but not write names the file and the fix, never "delete".
    @Test(.enabled(if: getuid() == 0, "another user's files need two users: run as root"))
    func aCacheOfAnotherUsersIsNamedAsSuch() async throws {
        try await withScratch { scratch in
            try "hi\n".write(toFile: scratch + "/f.txt", atomically: true, encoding: .utf8)
            let cache = scratch + "/c"
            let get = try await SyncAgentBinary.run(
                ["cache", "get", "file://\(scratch)/f.txt", "--cache", cache], scratch: scratch)
            #expect(get.status == 0, "\(get.stderr)")
            for path in [scratch, cache] { chmod(path, 0o755) }
            let unreadable = try await SyncAgentBinary.runUnprivileged(
                ["cache", "ls", "--cache", cache], scratch: scratch)
            #expect(unreadable.status == 5, "\(unreadable.stderr)")
            #expect(unreadable.stderr.contains("may not read \(cache)/CACHEDIR.TAG"), "\(unreadable.stderr)")
            #expect(!unreadable.stderr.contains("another program"), "\(unreadable.stderr)")

            chmod(cache + "/CACHEDIR.TAG", 0o644)
            chmod(cache + "/blobs", 0o755)
            chmod(cache + "/cache.lock", 0o666)
            chmod(cache + "/index.sqlite", 0o644)
            let unwritable = try await SyncAgentBinary.runUnprivileged(
                ["cache", "ls", "--cache", cache], scratch: scratch)
            #expect(unwritable.status == 5, "\(unwritable.stderr)")
            #expect(unwritable.stderr.contains("may not read and write \(cache)/index.sqlite"), "\(unwritable.stderr)")
            #expect(!unwritable.stderr.contains("delete"), "\(unwritable.stderr)")
        }
    }

    /// `-o` over an existing file keeps its mode (a private file stays 0600, as `curl -o` and
    /// `cp` keep it), never a set-user-ID bit, and a new file gets the usual 0644 less the umask.
    @Test func outputOverAnExistingFileKeepsItsMode() async throws {
        try await withScratch { scratch in
            try "hi\n".write(toFile: scratch + "/f.txt", atomically: true, encoding: .utf8)
            let url = "file://\(scratch)/f.txt"
            for (mode, kept) in [(0o600, 0o600), (0o640, 0o640), (0o4755, 0o755)] as [(mode_t, mode_t)] {
                let out = scratch + "/out-\(String(mode, radix: 8))"
                try "old".write(toFile: out, atomically: true, encoding: .utf8)
                chmod(out, mode)
                let get = try await SyncAgentBinary.run(
                    ["cache", "get", url, "--cache", scratch + "/c", "-o", out], scratch: scratch)
                #expect(get.status == 0, "\(get.stderr)")
                var status = stat()
                #expect(
                    stat(out, &status) == 0 && status.st_mode & 0o7777 == kept, "\(String(status.st_mode, radix: 8))")
                #expect(try String(contentsOfFile: out, encoding: .utf8) == "hi\n")
            }
        }
    }

    /// `-o` inside the cache folder (its index, a value, through a link too) is refused before
    /// anything is fetched or written: it would replace one of the cache's own files.
    @Test func outputInsideTheCacheFolderIsRefused() async throws {
        try await withScratch { scratch in
            try "hi\n".write(toFile: scratch + "/f.txt", atomically: true, encoding: .utf8)
            let cache = scratch + "/c"
            let url = "file://\(scratch)/f.txt"
            #expect(
                try await SyncAgentBinary.run(["cache", "get", url, "--cache", cache], scratch: scratch).status == 0)
            let index = FileManager.default.contents(atPath: cache + "/index.sqlite")
            #expect(symlink(cache, scratch + "/link") == 0)
            for output in [cache + "/index.sqlite", scratch + "/link/new.txt", cache + "/../c/blobs/x"] {
                for command in [["cache", "get", url], ["image", "get", url, "--size", "10x"]] {
                    let result = try await SyncAgentBinary.run(
                        command + ["--cache", cache, "-o", output], scratch: scratch)
                    #expect(result.status == 6, "\(command) -o \(output): \(result.stderr)")
                    #expect(result.stderr.contains("is inside the cache folder"), "\(result.stderr)")
                }
            }
            #expect(FileManager.default.contents(atPath: cache + "/index.sqlite") == index)
            #expect(!FileManager.default.fileExists(atPath: cache + "/new.txt"))
        }
    }
}
